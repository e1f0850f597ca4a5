"""The HTTP front end: one HTTP/1.1 and WebSocket port for every mount (OpenEnv, the arena,
the dashboard), and the checks every request passes (:mod:`.guard`)."""

from envwire.server.http.frontend import HttpFrontEnd, Mount, OnHang, PlainMount, WebSocketHandler
from envwire.server.http.guard import Guard, Refusal

__all__ = [
    "Guard",
    "HttpFrontEnd",
    "Mount",
    "OnHang",
    "PlainMount",
    "Refusal",
    "WebSocketHandler",
]
