"""``envwire serve --metrics PORT``: ``/metrics`` on a listener of its own, for servers whose
HTTP front end is off (the HTTP front end serves ``/metrics`` itself).

It is the server's HTTP front end with one mount, the dashboard's ``/metrics`` alone, and the
bounds of a port only Prometheus scrapes: the token rule of the HTTP front end (a token unless
``public_metrics``), TLS when the server has a certificate, at most :data:`MAX_SCRAPERS`
connections at once (others get 503 and are closed), and :data:`SCRAPE_TIMEOUT` seconds for a
scraper to send its request and to take the answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from envwire.errors import EnvwireError
from envwire.observe import Observability
from envwire.observe.dashboard import ObserveWeb
from envwire.observe.gather import Gathered
from envwire.protocols.http.http11 import Response, json_response
from envwire.server.http import Guard, HttpFrontEnd
from envwire.server.parking import Parking
from envwire.server.security import Security
from envwire.server.security.admission import ConnectionLimits
from envwire.server.threads import ThreadPool
from envwire.settings import HttpSettings

__all__ = ["MAX_SCRAPERS", "SCRAPE_TIMEOUT", "metrics_listener"]

#: Connections the listener serves at once; more are refused at once.
MAX_SCRAPERS = 8

#: Seconds a scraper's connection may take to send its request, and to read the answer.
SCRAPE_TIMEOUT = 10.0


def _refusal(error: EnvwireError) -> Response:
    return json_response(503, '{"detail":"too many scrapers at once"}', [("retry-after", "1")])


def metrics_listener(
    port: int,
    *,
    host: str,
    observe: Observability,
    security: Security,
    threads: ThreadPool | None = None,
    parking: Parking | None = None,
    peers: Sequence[str] = (),
) -> HttpFrontEnd:
    """The listener serving ``observe``'s metrics on ``host:port`` (0 picks a port), on the
    server's ``threads`` and ``parking`` (its own when None), summed with those of the other
    workers at ``peers`` (``--workers``: :mod:`envwire.observe.gather`)."""
    settings = HttpSettings(
        port=port,
        http_keepalive=SCRAPE_TIMEOUT,
        send_timeout=SCRAPE_TIMEOUT,
        max_message_size=64 * 1024,
        ping_interval=None,
        ping_timeout=None,
    )
    limits = ConnectionLimits(
        max_connections=MAX_SCRAPERS,
        per_address=MAX_SCRAPERS,
        max_pending=MAX_SCRAPERS,
        pending_per_address=MAX_SCRAPERS,
        handshake_timeout=SCRAPE_TIMEOUT,
    )
    web = ObserveWeb(observe, security.tokens, security.public_metrics, dashboard=False)
    served = Gathered(web, peers) if peers else web
    front = HttpFrontEnd(
        settings,
        host=host,
        guard=Guard(security, host, _refusal),
        limits=limits,
        mounts=[served],
        browsers=False,
        threads=threads,
        parking=parking,
    )
    front.name = "metrics"
    front.thread_name = "envwire-metrics"
    return front
