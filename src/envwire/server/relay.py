"""Between the workers of one server (:mod:`envwire.server.supervisor`): what a client addresses
by id across connections reaches the worker that holds it.

Each worker serves its HTTP mounts a second time on its own Unix socket (:func:`relay_front_end`),
for the other workers alone (the socket's folder is private to the server's user). A worker that
gets a request for another worker's session (an OpenEnv HTTP or MCP session, whose id names its
worker; the arena, which lives in worker 0) passes it there whole (:class:`RelayMount`) with the
client's address in the :data:`FORWARDED` header, and relays the answer. The owner runs every
check as if the client had come to it: tokens, Host/Origin, its own limits.

The requests a worker passes go over keep-alive connections (:class:`RelayPool`): after an
answer, the connection is kept for the next request to the same worker, at most
:data:`MAX_IDLE` idle ones per worker (the rest are closed). A kept connection that the other
worker closed meanwhile (its keep-alive time ran out, it was replaced) is dropped before use,
and a request that finds it closed while being sent is sent again once, on a new connection.
"""

from __future__ import annotations

import http.client
import logging
import select
import socket
import threading
from collections.abc import Callable, Sequence
from urllib.parse import quote

from envwire.protocols.http.http11 import Request, Response, json_response
from envwire.server.http import Guard, HttpFrontEnd, Mount, OnHang, PlainMount, WebSocketHandler
from envwire.server.parking import Parking
from envwire.server.security.admission import ConnectionLimits
from envwire.server.threads import ThreadPool
from envwire.settings import HttpSettings

__all__ = [
    "FORWARDED",
    "MAX_IDLE",
    "RELAY_TIMEOUT",
    "Borrowed",
    "RelayMount",
    "RelayPool",
    "fetch",
    "relay_front_end",
]

log = logging.getLogger("envwire.workers")

#: The header carrying the client's address, peer and scheme to the worker a request is
#: passed to (trusted on the relay socket alone; a client's own is dropped).
FORWARDED = "envwire-forwarded"

#: Seconds a passed request may take, answer included (the owner bounds its own work with the
#: env's step timeout; this bounds a worker that stopped answering).
RELAY_TIMEOUT = 300.0

#: Connections on one worker's relay socket at once (every other worker's requests in flight).
MAX_RELAYED = 4096

#: Idle keep-alive connections a process keeps to each other worker's relay socket.
MAX_IDLE = 8

_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "content-length", "upgrade", "te", FORWARDED}
)


class _UnixConnection(http.client.HTTPConnection):
    """An HTTP/1.1 client connection to a Unix socket."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def _closed(conn: _UnixConnection) -> bool:
    """Whether an idle connection is unusable: the peer closed it (or sent what nobody asked)."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class RelayPool:
    """Keep-alive HTTP connections to the workers' Unix sockets, reused across requests.

    Args:
        max_idle: idle connections kept per socket path; one more, after its answer, is closed.

    Attributes:
        opened: connections opened so far (all paths).
    """

    def __init__(self, max_idle: int = MAX_IDLE) -> None:
        self.max_idle = max_idle
        self.opened = 0
        self._idle: dict[str, list[_UnixConnection]] = {}
        self._lock = threading.Lock()

    def idle(self, path: str) -> int:
        """Idle connections kept to ``path`` now."""
        with self._lock:
            return len(self._idle.get(path, ()))

    def fetch(self, path: str, request: Request, timeout: float = RELAY_TIMEOUT) -> Response:
        """Send ``request`` to the worker listening on the Unix socket ``path``; its answer.

        Raises:
            OSError: the worker cannot be reached, or did not answer within ``timeout``.
        """
        headers = {k: v for k, v in request.headers.items() if k not in _HOP_BY_HOP}
        headers[FORWARDED] = f"{request.client} {request.peer} {request.scheme}"
        headers["content-length"] = str(len(request.body))
        target = _quote_path(request.path + (f"?{request.query}" if request.query else ""))
        conn = self._take(path, timeout)
        reused = conn.sock is not None
        try:
            try:
                conn.request(request.method, target, body=request.body, headers=headers)
                answer = conn.getresponse()
            except ConnectionError:  # the peer closed a kept connection: once more, anew
                if not reused:
                    raise
                conn.close()
                conn = self._new(path, timeout)
                conn.request(request.method, target, body=request.body, headers=headers)
                answer = conn.getresponse()
            body = answer.read()
            kept = [(k, v) for k, v in answer.getheaders() if k.lower() not in _HOP_BY_HOP]
        except http.client.HTTPException as exc:
            conn.close()
            raise OSError(f"bad answer from the worker at {path}: {exc}") from None
        except BaseException:
            conn.close()
            raise
        self._give_back(path, conn, keep=not answer.will_close)
        content_type = next((v for k, v in kept if k.lower() == "content-type"), "")
        rest = [(k, v) for k, v in kept if k.lower() != "content-type"]
        return Response(answer.status, body, content_type or "application/octet-stream", rest)

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()

    def _new(self, path: str, timeout: float) -> _UnixConnection:
        with self._lock:
            self.opened += 1
        return _UnixConnection(path, timeout)  # it connects on its first request

    def _take(self, path: str, timeout: float) -> _UnixConnection:
        """A kept connection to ``path`` that is still open, or a new one."""
        while True:
            with self._lock:
                kept = self._idle.get(path)
                conn = kept.pop() if kept else None
            if conn is None:
                return self._new(path, timeout)
            if not _closed(conn):
                conn.timeout = timeout
                if conn.sock is not None:
                    conn.sock.settimeout(timeout)
                return conn
            conn.close()

    def _give_back(self, path: str, conn: _UnixConnection, keep: bool) -> None:
        if keep:
            with self._lock:
                kept = self._idle.setdefault(path, [])
                if len(kept) < self.max_idle:
                    kept.append(conn)
                    return
        conn.close()


#: The pool of this process's passed requests.
_POOL = RelayPool()


def fetch(path: str, request: Request, timeout: float = RELAY_TIMEOUT) -> Response:
    """Send ``request`` to the worker listening on the Unix socket ``path`` over a kept
    connection of this process's :class:`RelayPool`; its answer.

    Raises:
        OSError: the worker cannot be reached, or did not answer within ``timeout``.
    """
    return _POOL.fetch(path, request, timeout)


def _quote_path(target: str) -> str:
    """The request target as sent on the wire (``Request.path`` is percent-decoded)."""
    path, sep, query = target.partition("?")
    return quote(path, safe="/:@!$&'()*+,;=-._~") + sep + query


class RelayMount(PlainMount):
    """The first mount of a worker's HTTP front end: a request whose owner (``owner``: a
    worker's index, or None for any) is another worker is passed to it.

    Args:
        index: this worker's index.
        relays: every worker's Unix socket path, by index.
        owner: which worker a request belongs to (None: whichever got it).
        timeout: seconds a passed request may take.
    """

    def __init__(
        self,
        index: int,
        relays: Sequence[str],
        owner: Callable[[Request], int | None],
        timeout: float = RELAY_TIMEOUT,
    ) -> None:
        self.index = index
        self.relays = tuple(relays)
        self.owner = owner
        self.timeout = timeout

    # No WebSocket here: a WebSocket's session lives in the worker that accepted it.

    def check(self, head: Request) -> Response | bool | None:
        return None  # the mounts behind judge the head: they run in every worker alike

    def respond(self, request: Request, on_hang: OnHang) -> Response | None:
        owner = self.owner(request)
        if owner is None or owner == self.index or not 0 <= owner < len(self.relays):
            return None
        try:
            return fetch(self.relays[owner], request, self.timeout)
        except OSError as exc:
            log.warning("worker %d did not answer a request passed to it: %s", owner, exc)
            return json_response(
                503,
                '{"detail":"the server worker holding this session is not answering; try again"}',
                [("retry-after", "1")],
            )


class Borrowed:
    """A mount served by a second front end too: every request goes to it, but its start and
    stop stay with the front end that owns it."""

    def __init__(self, mount: Mount) -> None:
        self.mount = mount

    def check(self, head: Request) -> Response | bool | None:
        return self.mount.check(head)

    def respond(self, request: Request, on_hang: OnHang) -> Response | None:
        return self.mount.respond(request, on_hang)

    def upgrade(self, request: Request) -> WebSocketHandler | Response | None:
        return self.mount.upgrade(request)

    def body_limit(self, request: Request) -> int | None:
        return self.mount.body_limit(request)

    def refuse(self, request: Request, status: int, message: str) -> Response | None:
        return self.mount.refuse(request, status, message)

    def start(self, front: HttpFrontEnd) -> None:
        """The owner's front end starts it."""

    def stop(self) -> None:
        """The owner's front end stops it."""


def relay_front_end(
    sock: socket.socket,
    settings: HttpSettings,
    *,
    guard: Guard,
    mounts: Sequence[Mount],
    threads: ThreadPool | None = None,
    parking: Parking | None = None,
) -> HttpFrontEnd:
    """The front end serving ``mounts`` (borrowed) on a worker's own Unix socket ``sock``:
    requests passed by the other workers, with their client's address in :data:`FORWARDED`,
    in plain HTTP (the socket never leaves the host)."""
    limits = ConnectionLimits(
        max_connections=MAX_RELAYED,
        per_address=MAX_RELAYED,
        max_pending=MAX_RELAYED,
        pending_per_address=MAX_RELAYED,
        handshake_timeout=RELAY_TIMEOUT,
    )
    front = HttpFrontEnd(
        settings,
        host="",
        guard=guard,
        limits=limits,
        mounts=[Borrowed(m) for m in mounts],
        threads=threads,
        parking=parking,
    )
    front.name = "relay"
    front.thread_name = "envwire-relay"
    front.tls = None
    front.forwarded = True
    front.adopt(sock)
    return front
