"""HTTP/1.1 over one blocking socket.

:class:`HttpConnection` reads requests and writes responses with the sans-IO parser of
:mod:`envwire.protocols.http.http11` (keep-alive, pipelining, ``Expect: 100-continue``, chunked
bodies, size limits). A request that asks for a WebSocket is answered with
:meth:`HttpConnection.accept_websocket` (or :func:`envwire.sockets.websocket.upgrade`, which
checks it first), and the socket goes on as a
:class:`~envwire.sockets.websocket.WebSocketChannel`.

Backpressure: a reply goes out before the next request is read, and a client has
``send_timeout`` seconds to take each reply before the connection is dropped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from envwire import jsonio
from envwire.protocols.http.http11 import (
    NEED_DATA,
    HeadRefused,
    HttpError,
    Request,
    RequestParser,
    Response,
    json_response,
    response_bytes,
)
from envwire.protocols.http.websocket import accept_bytes
from envwire.sockets import RECV_SIZE, Stream, close_stream
from envwire.sockets.buffers import Hold

__all__ = ["DEFAULT_SEND_TIMEOUT", "WAITING", "BodyPolicy", "HttpConnection", "Waiting"]


#: Seconds a client has to take each reply before its connection is dropped.
DEFAULT_SEND_TIMEOUT = 30.0


class Waiting:
    """The type of :data:`WAITING`."""

    def __repr__(self) -> str:
        return "WAITING"


#: :meth:`HttpConnection.next_request`'s answer when no whole request came within its wait.
WAITING = Waiting()


class BodyPolicy(Protocol):
    """Routes mounted on the front end that take smaller bodies than it does (the arena)."""

    def body_limit(self, request: Request) -> int | None:
        """The largest body for this request, or None when the policy does not apply."""
        ...

    def refuse(self, request: Request, status: int, message: str) -> Response | None:
        """The answer to a request refused before it was read, or None to use the default."""
        ...


class HttpConnection:
    """Requests in, responses out, on one socket (:meth:`send` and :meth:`abort` may be
    called from another thread, e.g. to answer a request whose env hung).

    Args:
        sock: the connected socket.
        max_body: the largest request body, in bytes (413 beyond).
        send_timeout: seconds the client has to take each response; None: forever.
        policies: smaller body limits for some routes (see :class:`BodyPolicy`).
        max_header: the largest request line and headers, in bytes (431 beyond).
        on_head: checks each request's head before any of its body is read (and before
            ``100 Continue``): an answer refuses it, and the connection closes after it.
        hold: this connection's share of the receive buffers all connections share; a request
            whose bytes it cannot cover is answered 503 and the connection closes.
    """

    def __init__(
        self,
        sock: Stream,
        *,
        max_body: int,
        send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
        policies: Sequence[BodyPolicy] = (),
        max_header: int = 64 * 1024,
        on_head: Callable[[Request], Response | None] | None = None,
        hold: Hold | None = None,
    ) -> None:
        self.sock = sock
        self.hold = hold
        self.send_timeout = send_timeout
        self.close_reason = ""
        self.policies = tuple(policies)
        self.parser = RequestParser(
            max_header=max_header, max_body=max_body, body_limit=self._body_limit, on_head=on_head
        )
        self.lock = threading.Lock()
        self.dead = False
        self.keep_alive = True
        #: Since when part of the next request has been here (None: none of it yet).
        self.began: float | None = None
        self._timeout: float | None = -1.0  # the socket timeout last set (-1: never)

    def next_request(
        self, wait: float, deadline: float | None = None
    ) -> Request | Response | Waiting | None:
        """The next request, reading for at most ``wait`` seconds on this thread: a Response
        to send when the request was malformed; :data:`WAITING` when no whole request came in
        time (the bytes that did stay in the parser: call again when more come); None at EOF,
        on a socket error, or when nothing came by ``deadline`` (a ``time.monotonic()`` time);
        a 408 response when part of a request came but not all of it by then, however slowly
        its bytes come. What arrived by the deadline is read even when this thread comes to
        the connection later. :attr:`began` says since when part of a request is here."""
        parser = self.parser
        try:
            while True:
                parsed = parser.next_request()
                if parsed is None:
                    return None
                if parsed is not NEED_DATA:
                    break
                if parser.needs_continue():
                    self.send_raw(b"HTTP/1.1 100 Continue\r\n\r\n")
                    parser.continue_sent()
                if self.began is None and parser.partial:
                    self.began = time.monotonic()
                limit = wait
                if deadline is not None:
                    # Past the deadline, what has arrived is still read (a server busy with a
                    # burst may come to a connection late); only a wait for more is refused.
                    limit = min(limit, max(deadline - time.monotonic(), 0.001))
                self.sock.settimeout(limit)
                self._timeout = -1.0
                try:
                    data = self.sock.recv(RECV_SIZE)
                except TimeoutError:
                    if deadline is not None and time.monotonic() >= deadline:
                        self.keep_alive = False
                        self.close_reason = "the request did not arrive whole in time"
                        if not parser.partial:
                            return None  # nothing came: nothing to answer
                        detail = jsonio.dumps({"detail": self.close_reason})
                        return json_response(408, detail)
                    return WAITING
                parser.receive_data(data)
                if self.hold is not None and not self.hold.update(len(parser.buffer)):
                    self.keep_alive = False
                    self.close_reason = "the server's receive buffers are full"
                    detail = jsonio.dumps(
                        {"detail": "the server's receive buffers are full; try again later"}
                    )
                    return json_response(503, detail, [("retry-after", "1")])
        except HeadRefused as exc:
            self.keep_alive = False  # a refused request closes its connection
            self.close_reason = f"refused before its body ({exc.response.status})"
            return exc.response
        except HttpError as exc:
            self.keep_alive = False
            self.close_reason = f"bad request ({exc.status}): {exc.message}"
            if exc.request is not None:
                for policy in self.policies:
                    refusal = policy.refuse(exc.request, exc.status, exc.message)
                    if refusal is not None:
                        return refusal
            detail = jsonio.dumps({"detail": f"Bad request: {exc.message}"})
            return json_response(exc.status, detail)
        except OSError:
            return None
        assert isinstance(parsed, Request)
        self.began = None
        self.keep_alive = parsed.keep_alive
        if self.hold is not None:  # what is left is the next requests' (pipelined)
            self.hold.update(len(parser.buffer))
        return parsed

    def _body_limit(self, request: Request) -> int | None:
        for policy in self.policies:
            limit = policy.body_limit(request)
            if limit is not None:
                return limit
        return None

    def send(self, response: Response, *, head: bool = False) -> bool:
        """Write a response; returns False when the connection must close afterwards (also when
        the client did not take it within ``send_timeout`` seconds: ``close_reason`` says so).
        """
        data = response_bytes(response, keep_alive=self.keep_alive, head=head)
        with self.lock:
            if self.dead:
                return False
            try:
                if self._timeout != self.send_timeout:  # sendall's timeout covers the whole call
                    self.sock.settimeout(self.send_timeout)
                    self._timeout = self.send_timeout
                self.sock.sendall(data)
            except TimeoutError:
                self.close_reason = (
                    f"the client did not read a response for {self.send_timeout:g} s"
                )
                return False
            except OSError:
                return False
        return self.keep_alive

    def send_raw(self, data: bytes) -> None:
        with self.lock:
            if not self.dead:
                self.sock.sendall(data)

    def accept_websocket(self, request: Request) -> bytes:
        """Answer the handshake with 101 Switching Protocols; returns the bytes already
        received after the handshake (the start of the WebSocket stream)."""
        self.send_raw(accept_bytes(request))
        trailing = bytes(self.parser.buffer)
        self.parser.buffer.clear()
        return trailing

    def abort(self) -> None:
        """Close the socket now (any thread); later sends are dropped."""
        with self.lock:
            self.dead = True
        if self.hold is not None:
            self.hold.release()
        close_stream(self.sock)
