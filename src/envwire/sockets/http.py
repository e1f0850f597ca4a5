"""HTTP/1.1 and WebSocket over one blocking socket.

:class:`HttpConnection` reads requests and writes responses with the sans-IO parser of
:mod:`envwire.protocols.http.http11` (keep-alive, pipelining, ``Expect: 100-continue``, chunked
bodies, size limits). When a request asks for a WebSocket, it completes the opening handshake
(:mod:`envwire.protocols.http.websocket`) and hands the socket to a :class:`WebSocketChannel`, which
frames messages with the same module; one timer thread pings idle channels and drops those that
stop answering. Compression is never negotiated.

Backpressure: a reply goes out before the next request is read, and a client has
``send_timeout`` seconds to take each reply (HTTP or WebSocket) before the connection is
dropped. While a WebSocket request is being worked on, the timer thread reads ahead for pings,
but stops once ``max_queued`` bytes of requests wait, or while a reply is not drained: a
client that sends without reading then meets TCP's own flow control, and the server holds at
most that queue, one message in progress and the socket buffers for it.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol

from envwire import jsonio
from envwire.protocols.http.http11 import (
    NEED_DATA,
    HttpError,
    Request,
    RequestParser,
    Response,
    json_response,
    response_bytes,
)
from envwire.protocols.http.websocket import (
    PING,
    PONG,
    FrameError,
    FrameReader,
    accept_bytes,
    close_frame,
    control_frame,
    text_frame,
)
from envwire.protocols.openenv import dumps

__all__ = ["BodyPolicy", "HttpConnection", "WebSocketChannel"]

_RECV = 256 * 1024

#: Seconds a client has to take each reply before its connection is dropped.
DEFAULT_SEND_TIMEOUT = 30.0
#: Bytes of WebSocket requests read ahead while one is worked on.
DEFAULT_MAX_QUEUED = 1024 * 1024


class SendTimeout(OSError):
    """The peer did not take a reply within the send timeout."""


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
    called from another thread, e.g. to answer a request whose env hung)."""

    def __init__(
        self,
        sock: socket.socket,
        *,
        max_body: int,
        keepalive: float | None,
        send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
        policies: Sequence[BodyPolicy] = (),
    ) -> None:
        self.sock = sock
        self.keepalive = keepalive
        self.send_timeout = send_timeout
        self.close_reason = ""
        self.policies = tuple(policies)
        self.parser = RequestParser(max_body=max_body, body_limit=self._body_limit)
        self.lock = threading.Lock()
        self.dead = False
        self.keep_alive = True
        self._timeout: float | None = -1.0  # the socket timeout last set (-1: never)

    def next_request(self, deadline: float | None = None) -> Request | Response | None:
        """The next request; a Response to send when the request was malformed; None at EOF,
        on a socket error, after ``keepalive`` idle seconds, or when the whole request has not
        arrived by ``deadline`` (a ``time.monotonic()`` value; the first request's)."""
        parser = self.parser
        if deadline is None and self._timeout != self.keepalive:
            self.sock.settimeout(self.keepalive)
            self._timeout = self.keepalive
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
                if deadline is not None:  # however slowly the bytes come
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return None
                    self.sock.settimeout(left)
                    self._timeout = -1.0
                parser.receive_data(self.sock.recv(_RECV))
        except HttpError as exc:
            self.keep_alive = False
            self.close_reason = f"bad request ({exc.status}): {exc.message}"
            if exc.request is not None:
                for policy in self.policies:
                    refusal = policy.refuse(exc.request, exc.status, exc.message)
                    if refusal is not None:
                        return refusal
            return json_response(exc.status, dumps({"detail": f"Bad request: {exc.message}"}))
        except (TimeoutError, OSError):
            return None
        assert isinstance(parsed, Request)
        self.keep_alive = parsed.keep_alive
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
        _shutdown(self.sock)


def _send_within(sock: socket.socket, data: bytes, timeout: float | None) -> None:
    """``sock.sendall(data)`` on a blocking socket, given up after ``timeout`` seconds.

    The socket stays blocking (another thread reads it with ``MSG_DONTWAIT``, which a socket
    timeout would turn into a wait): the deadline comes from ``poll``.

    Raises:
        SendTimeout: the peer did not take everything in time.
        OSError: the connection failed.
    """
    if timeout is None:
        sock.sendall(data)
        return
    view = memoryview(data)
    deadline = time.monotonic() + timeout
    poller: select.poll | None = None
    while view:
        with contextlib.suppress(BlockingIOError, InterruptedError):
            view = view[sock.send(view, socket.MSG_DONTWAIT) :]
        if not view:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SendTimeout(f"the peer took no data for {timeout:g} s")
        if poller is None:
            poller = select.poll()
            poller.register(sock, select.POLLOUT)
        poller.poll(remaining * 1000)


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


class WebSocketChannel:
    """A server-side WebSocket on a blocking socket (see the module docstring).

    :meth:`receive` runs in the connection's thread and blocks in ``recv`` without a timeout;
    :meth:`keepalive`, called by one timer thread for every channel, pings idle peers and drops
    those that stop answering (shutting the socket down wakes the blocked ``recv``).
    :meth:`send_text`, :meth:`close` and :meth:`abort` may be called from any thread.
    """

    def __init__(
        self,
        sock: socket.socket,
        trailing: bytes = b"",
        *,
        max_size: int | None = 100 * 1024 * 1024,
        ping_interval: float | None = 20.0,
        ping_timeout: float | None = 20.0,
        send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
        max_queued: int = DEFAULT_MAX_QUEUED,
    ) -> None:
        self.sock = sock
        self.reader = FrameReader(max_size)
        self.send_timeout = send_timeout
        self.max_queued = max_queued
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.lock = threading.Lock()
        self.dead = False
        self.close_sent = False
        self.close_reason = ""
        self.last_rx = time.monotonic()
        #: True while the connection works on a message: the peer is not pinged meanwhile
        #: (its pongs could not be read), so a long env call never looks like a dead peer.
        self.busy = False
        self._messages: deque[str | bytes] = deque()
        self._queued = 0  # characters in _messages
        self._sending = False  # a frame is being written (the peer may not be draining)
        self._ping_sent: float | None = None
        self._peer_closed = False
        sock.settimeout(None)
        self._pending = trailing
        self._reader_thread = threading.current_thread()
        #: Held by whoever reads the socket: the connection's thread in :meth:`receive`, or the
        #: timer thread answering pings while the connection works on a request.
        self._read_lock = threading.Lock()

    def receive(self, wait: float | None = None) -> str | bytes | None:
        """The next message (``str`` for text, ``bytes`` for binary); None once the connection
        is over, or after ``wait`` seconds without one (the connection then stays open)."""
        messages = self._messages
        if wait is not None:
            self.sock.settimeout(wait)
        self._read_lock.acquire()
        try:
            while not messages:
                if self.dead or self._peer_closed:
                    return None
                if self._pending:
                    data, self._pending = self._pending, b""
                else:
                    try:
                        data = self.sock.recv(_RECV)
                    except TimeoutError:
                        return None
                    except OSError as exc:
                        self.close_reason = self.close_reason or f"socket error: {exc}"
                        self.abort()
                        return None
                    self.last_rx = time.monotonic()
                    self._ping_sent = None  # any traffic shows the peer is alive
                    if not data:
                        self.close_reason = self.close_reason or "the peer went away"
                        self.abort()
                        return None
                try:
                    events = self.reader.feed(data)
                except FrameError as exc:
                    self.close_reason = f"protocol error: {exc.reason}"
                    self.close(exc.code, exc.reason, linger=0.5)
                    return None
                for event in events:
                    self._on_event(event)
            self.busy = True
            text = messages.popleft()
            self._queued -= len(text)
            return text
        finally:
            self._read_lock.release()
            if wait is not None and not self.dead:
                with contextlib.suppress(OSError):
                    self.sock.settimeout(None)

    def _on_event(self, event: tuple[Any, ...]) -> None:
        kind = event[0]
        if kind in ("text", "binary"):
            self._messages.append(event[1])
            self._queued += len(event[1])
        elif kind == "ping":
            # Never wait for the lock off the connection's thread: a reply being written may
            # hold it until the send timeout, and the timer thread serves every channel.
            self._send(control_frame(PONG, event[1]), wait=self._on_reader_thread())
        elif kind == "close":
            self._peer_closed = True
            code, reason = event[1], event[2]
            self.close_reason = self.close_reason or f"the client closed the connection ({code})"
            if not self.close_sent:  # answer the closing handshake, then end the TCP stream
                self._send(close_frame(code, reason), wait=self._on_reader_thread())
                self.close_sent = True
            self.abort()

    def _on_reader_thread(self) -> bool:
        return threading.current_thread() is self._reader_thread

    def _send(self, frame: bytes, *, wait: bool = True) -> bool:
        """Write one frame within the send timeout; False if the connection is gone (or, when
        not ``wait``, if another frame is being written: this one is dropped)."""
        if not self.lock.acquire(blocking=wait):
            return False
        try:
            if self.dead:
                return False
            self._sending = True
            try:
                _send_within(self.sock, frame, self.send_timeout)
            except SendTimeout:
                self.close_reason = (
                    f"the client did not read its replies for {self.send_timeout:g} s"
                )
                self.dead = True
                _shutdown(self.sock)
                return False
            except OSError:
                self.dead = True
                return False
            finally:
                self._sending = False
        finally:
            self.lock.release()
        return True

    def keepalive(self, now: float) -> None:
        """Timer thread: while the connection works on a request, answer the peer's pings (and
        notice a peer that left); otherwise ping a peer silent for ``ping_interval`` and drop
        one that left a ping unanswered for ``ping_timeout``."""
        if self.dead or self.close_sent:
            return
        if self.busy:
            self._answer_while_busy(now)
            return
        if self.ping_interval is None:
            return
        sent = self._ping_sent
        if sent is not None:
            if self.ping_timeout is not None and now - sent >= self.ping_timeout:
                self.close_reason = f"no answer to a ping within {self.ping_timeout:g} s"
                self.abort()
            return
        if now - self.last_rx < self.ping_interval:
            return
        frame = control_frame(PING, os.urandom(4))
        if not self.lock.acquire(blocking=False):  # a frame is being written: ping later
            return
        try:
            if self.dead:
                return
            self._ping_sent = now
            try:
                # Never block the timer thread: a peer whose buffers are full is gone anyway.
                sent_bytes = self.sock.send(frame, socket.MSG_DONTWAIT)
            except OSError:
                sent_bytes = -1
        finally:
            self.lock.release()
        if sent_bytes != len(frame):
            self.close_reason = "the peer stopped reading"
            self.abort()

    def _answer_while_busy(self, now: float) -> None:
        """Read what the peer sent while the connection's thread is busy: pings get their
        pongs at once (clients such as openenv-core's drop connections whose pongs are late),
        requests queue for the connection's thread, up to ``max_queued`` bytes and never while a
        reply is not drained (the rest waits in the socket: TCP makes the client wait)."""
        if not self._read_lock.acquire(blocking=False):
            return
        try:
            while not self.dead and not self._sending and self._queued < self.max_queued:
                try:
                    data = self.sock.recv(_RECV, socket.MSG_DONTWAIT)
                except (BlockingIOError, InterruptedError):
                    return
                except OSError:
                    self.abort()
                    return
                if not data:
                    self.close_reason = self.close_reason or "the peer went away"
                    self.abort()
                    return
                self.last_rx = now
                try:
                    events = self.reader.feed(data)
                except FrameError as exc:
                    self.close_reason = f"protocol error: {exc.reason}"
                    self._send(close_frame(exc.code, exc.reason), wait=False)
                    self.abort()
                    return
                for event in events:
                    self._on_event(event)
        finally:
            self._read_lock.release()

    def send_text(self, text: str) -> bool:
        """Send one text message; False if the connection is gone, or if the client did not take
        it within ``send_timeout`` seconds (the connection is then dropped)."""
        if self.close_sent or not self._send(text_frame(jsonio.utf8(text))):
            return False
        self.last_rx = time.monotonic()  # the idle clock restarts once the reply is out
        self.busy = False
        return True

    def close(self, code: int = 1000, reason: str = "", linger: float = 1.0) -> None:
        """Send a close frame, wait up to ``linger`` s for the peer's, then close the socket
        (idempotent)."""
        with self.lock:
            if self.dead:
                return
            first = not self.close_sent
            self.close_sent = True
        if first and not self._send(close_frame(code, reason[:120])):
            self.abort()
            return
        if threading.current_thread() is not self._reader_thread:
            # Another thread (watchdog, reaper) must not read the socket: the connection's
            # thread answers the peer's close frame if it is reading; a timer ends it anyway.
            timer = threading.Timer(linger, self.abort)
            timer.daemon = True
            timer.start()
            return
        deadline = time.monotonic() + linger
        self.busy = False
        while not self._peer_closed and time.monotonic() < deadline:
            try:
                self.sock.settimeout(max(deadline - time.monotonic(), 0.01))
                data = self.sock.recv(_RECV)
            except OSError:
                break
            if not data:
                break
            try:
                events = self.reader.feed(data)
            except FrameError:
                break
            if any(event[0] == "close" for event in events):
                break
        self.abort()

    def abort(self) -> None:
        """Drop the connection now, without a closing handshake (any thread)."""
        with self.lock:
            if self.dead:
                return
            self.dead = True
        _shutdown(self.sock)
