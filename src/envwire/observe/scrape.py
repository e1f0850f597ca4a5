"""``envwire serve --metrics PORT``: ``/metrics`` on a listener of its own, for servers whose
HTTP front end is off (the HTTP front end serves ``/metrics`` itself).

prometheus-client's WSGI app makes the exposition; this module puts the server's rules in front
of it: the token rule of the HTTP front end (a token unless ``public_metrics``), TLS when the
server has a certificate, at most ``MAX_SCRAPERS`` connections at once (the others are closed
at once), and ``SCRAPE_TIMEOUT`` seconds for a scraper to send its request.
"""

from __future__ import annotations

import socket
import ssl
import threading
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import make_wsgi_app

from envwire.observe.dashboard import token_refusal

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from envwire.app import Server

__all__ = ["MAX_SCRAPERS", "SCRAPE_TIMEOUT", "MetricsListener"]

#: Connections the listener serves at once; more are closed without an answer.
MAX_SCRAPERS = 8

#: Seconds a scraper's connection may stay silent.
SCRAPE_TIMEOUT = 10.0


class _Quiet(WSGIRequestHandler):
    timeout = SCRAPE_TIMEOUT  # socket timeout for reading the request and writing the answer

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged."""


class _Bounded(WSGIServer):
    """A thread per connection, at most ``MAX_SCRAPERS`` of them; TLS (when ``tls`` is set)
    is negotiated in that thread, under the same timeout, never in the accepting one."""

    tls: ssl.SSLContext | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.slots = threading.BoundedSemaphore(MAX_SCRAPERS)
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        threading.Thread(
            target=self._serve_one, args=(request, client_address), daemon=True
        ).start()

    def _serve_one(self, request: Any, client_address: Any) -> None:
        try:
            if self.tls is not None:
                request.settimeout(SCRAPE_TIMEOUT)
                request = self.tls.wrap_socket(request, server_side=True)
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            self.slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A scraper that went away or timed out is not an error worth a traceback."""


class _IPv6(_Bounded):
    address_family = socket.AF_INET6


def _guarded(server: Server, app: Callable[..., Iterable[bytes]]) -> Callable[..., Any]:
    """``app`` behind the token rule of :class:`envwire.observe.dashboard.ObserveWeb`."""
    security = server.security

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not security.public_metrics:
            refused = token_refusal(
                security.tokens, environ.get("HTTP_AUTHORIZATION"), environ.get("PATH_INFO", "")
            )
            if refused is not None:
                start_response(
                    f"{refused.status} Unauthorized",
                    [("Content-Type", refused.content_type), *refused.headers],
                )
                return [refused.body]
        return app(environ, start_response)

    return guarded


class MetricsListener:
    """Serves the server's metrics in Prometheus' text format on ``host:port``."""

    name = "metrics"

    def __init__(self, server: Server, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = _guarded(server, make_wsgi_app(server.observe.metrics.registry))
        self.tls = server.security.tls
        self.host, self.port = host, port
        self._http: _Bounded | None = None

    def start(self) -> tuple[str, int]:
        """Bind and serve; return the bound address."""
        kind = _IPv6 if ":" in self.host else _Bounded
        http: _Bounded = make_server(self.host, self.port, self.app, kind, handler_class=_Quiet)
        http.tls = self.tls
        self._http = http
        self.port = int(http.server_address[1])
        threading.Thread(target=http.serve_forever, name="envwire-metrics", daemon=True).start()
        return self.host, self.port

    def stop(self) -> None:
        """Stop serving."""
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
