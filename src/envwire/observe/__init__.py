"""Seeing what a server does: Prometheus metrics, JSON logs, the live activity the dashboard
shows, and episodes recorded as Minari datasets (``docs/guides/observability.md``).

Recording (:mod:`envwire.observe.recorder`, :mod:`envwire.observe.datasets`) needs the
``minari`` extra and is imported only when it is switched on.
"""

from envwire.observe.hub import Observability
from envwire.observe.live import Activity
from envwire.observe.logs import JsonFormatter, configure_logging
from envwire.observe.metrics import CONTENT_TYPE, Metrics

__all__ = [
    "CONTENT_TYPE",
    "Activity",
    "JsonFormatter",
    "Metrics",
    "Observability",
    "configure_logging",
]
