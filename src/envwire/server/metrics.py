"""``envwire serve --metrics PORT``: ``/metrics`` on a listener of its own, for servers whose
HTTP front end is off (the HTTP front end serves ``/metrics`` itself). prometheus-client's own
exposition server answers the scrapes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prometheus_client import start_http_server

if TYPE_CHECKING:
    from envwire.server.app import Server

__all__ = ["MetricsListener"]


class MetricsListener:
    """Serves the server's metrics in Prometheus' text format on ``host:port``."""

    name = "metrics"

    def __init__(self, server: Server, host: str = "127.0.0.1", port: int = 0) -> None:
        self.registry = server.observe.metrics.registry
        self.host, self.port = host, port
        self._http: Any = None

    def start(self) -> tuple[str, int]:
        """Bind and serve; return the bound address."""
        self._http, _ = start_http_server(self.port, addr=self.host, registry=self.registry)
        self.port = int(self._http.server_address[1])
        return self.host, self.port

    def stop(self) -> None:
        """Stop serving."""
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
