"""The server side of a WebSocket over one blocking socket.

The opening handshake is an HTTP request: :func:`handshake` reads and answers it on a freshly
accepted socket, within a deadline however slowly its bytes come and within a size limit;
:func:`upgrade` answers one that an :class:`~envwire.sockets.http.HttpConnection` has read (a
front end serving plain HTTP on the same port). Either gives the bytes that followed the
request, the start of the WebSocket stream, for a :class:`WebSocketChannel`, which frames
messages with the sans-IO codec of :mod:`envwire.protocols.http.websocket`. Compression is never
negotiated.

Whoever owns a channel reads it with :meth:`WebSocketChannel.receive`; a timer thread calls
:meth:`WebSocketChannel.keepalive` every fraction of a second, which pings idle peers and drops
those that stop answering, and, while the owner is not reading (``busy``), answers the peer's
pings and notices a peer that leaves.

Backpressure: a client has ``send_timeout`` seconds to take each message before the connection
is dropped. While the owner is busy, the timer thread reads ahead, but stops once
``max_queued`` bytes of messages wait, or while a message is not drained: a peer that sends
without reading then meets TCP's own flow control, and the server holds at most that queue,
one message in progress and the socket buffers for it.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading
import time
from collections import deque
from typing import Any

from envwire import jsonio
from envwire.protocols.http.http11 import Request, Response, json_response
from envwire.protocols.http.websocket import (
    DEFAULT_MAX_FRAGMENTS,
    PING,
    PONG,
    FrameError,
    FrameReader,
    close_frame,
    control_frame,
    handshake_problem,
    text_frame,
)
from envwire.sockets import RECV_SIZE, Stream, close_stream
from envwire.sockets.buffers import Hold
from envwire.sockets.http import DEFAULT_SEND_TIMEOUT, HttpConnection, Waiting

__all__ = [
    "DEFAULT_MAX_HANDSHAKE",
    "DEFAULT_MAX_QUEUED",
    "HandshakeError",
    "SendTimeout",
    "WebSocketChannel",
    "handshake",
    "upgrade",
]


#: Bytes of WebSocket messages read ahead while the owner is busy.
DEFAULT_MAX_QUEUED = 1024 * 1024
#: The largest opening handshake :func:`handshake` reads (request line and headers). Clients
#: send a few hundred bytes; a browser with cookies a few kilobytes.
DEFAULT_MAX_HANDSHAKE = 16 * 1024


class HandshakeError(ConnectionError):
    """The peer did not open a WebSocket: no valid handshake, or not all of it in time;
    ``str()`` says which."""


class SendTimeout(OSError):
    """The peer did not take a message within the send timeout."""


def upgrade(http: HttpConnection, request: Request) -> bytes | None:
    """Answer ``request``, read by ``http``, as a WebSocket opening handshake.

    Returns:
        The bytes received after the handshake (the start of the WebSocket stream), once
        ``101 Switching Protocols`` is sent; None when ``request`` is not a valid handshake:
        it was answered with 400 and a JSON ``{"detail": ...}`` saying why, which
        ``http.close_reason`` repeats.

    Raises:
        OSError: the answer could not be sent.
    """
    problem = handshake_problem(request)
    if problem is not None:
        http.keep_alive = False
        http.close_reason = f"bad WebSocket handshake: {problem}"
        http.send(json_response(400, jsonio.dumps({"detail": problem})))
        return None
    return http.accept_websocket(request)


def handshake(sock: Stream, timeout: float, *, max_size: int = DEFAULT_MAX_HANDSHAKE) -> bytes:
    """Read and answer the opening handshake on a newly accepted socket.

    The request must arrive whole within ``timeout`` seconds and ``max_size`` bytes, have no
    body, and be a valid WebSocket handshake (:func:`upgrade`); a malformed or refused one is
    answered with its HTTP error first.

    Returns:
        The bytes received after the handshake (see :func:`upgrade`).

    Raises:
        HandshakeError: what went wrong (the caller closes the socket).
    """
    deadline = time.monotonic() + timeout
    http = HttpConnection(sock, max_body=0, max_header=max_size, send_timeout=timeout)
    request = http.next_request(timeout, deadline)
    if request is None or isinstance(request, Waiting):
        if time.monotonic() >= deadline:
            raise HandshakeError(f"no complete WebSocket handshake within {timeout:g} s")
        raise HandshakeError("the peer closed the connection before its handshake")
    try:
        if isinstance(request, Response):
            http.send(request)
            if request.status == 408:  # a partial request at the deadline: told, then closed
                raise HandshakeError(f"no complete WebSocket handshake within {timeout:g} s")
            raise HandshakeError(http.close_reason)
        trailing = upgrade(http, request)
    except OSError as exc:
        raise HandshakeError(f"cannot answer the handshake: {exc}") from exc
    if trailing is None:
        raise HandshakeError(http.close_reason)
    return trailing


def _send_within(sock: Stream, data: bytes, timeout: float | None) -> None:
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


class WebSocketChannel:
    """A server-side WebSocket on a blocking socket (see the module docstring).

    :meth:`receive` runs in the owner's thread; the thread that last called it is the channel's
    reader. :meth:`keepalive`, called by a timer thread, pings idle peers and drops those that
    stop answering (shutting the socket down wakes a blocked ``recv``). :meth:`send_text`,
    :meth:`close` and :meth:`abort` may be called from any thread.
    """

    def __init__(
        self,
        sock: Stream,
        trailing: bytes = b"",
        *,
        max_size: int | None = 100 * 1024 * 1024,
        max_fragments: int = DEFAULT_MAX_FRAGMENTS,
        ping_interval: float | None = 20.0,
        ping_timeout: float | None = 20.0,
        send_timeout: float | None = DEFAULT_SEND_TIMEOUT,
        max_queued: int = DEFAULT_MAX_QUEUED,
        hold: Hold | None = None,
    ) -> None:
        self.sock = sock
        self.reader = FrameReader(max_size, max_fragments=max_fragments)
        #: This connection's share of the receive buffers all connections share: a message in
        #: progress that it cannot cover closes the connection with 1013 (try again later).
        self.hold = hold
        self.send_timeout = send_timeout
        self.max_queued = max_queued
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.lock = threading.Lock()
        self.dead = False
        self.close_sent = False
        self.close_reason = ""
        #: The peer's close frame (code, reason), once it sent one.
        self.peer_close: tuple[int, str] | None = None
        self.last_rx = time.monotonic()
        #: True while the owner works on a message instead of reading: the peer is not pinged
        #: meanwhile (its pongs could not be read), so a long env call never looks like a dead
        #: peer, and the timer thread reads ahead instead.
        self.busy = False
        self._messages: deque[str | bytes] = deque()
        self._queued = 0  # characters in _messages
        self._sending = False  # a frame is being written (the peer may not be draining)
        self._ping_sent: float | None = None
        self._peer_closed = False
        sock.settimeout(None)
        self._pending = trailing
        self._reader_thread = threading.current_thread()
        #: Held by whoever reads the socket: the owner in :meth:`receive`, or the timer thread
        #: answering pings while the owner is busy.
        self._read_lock = threading.Lock()

    @property
    def closed(self) -> bool:
        """True once the connection is over or closing: :meth:`receive` returns None and sends
        fail from then on (``close_reason`` says why)."""
        return self.dead or self._peer_closed or self.close_sent

    def receive(self, wait: float | None = None) -> str | bytes | None:
        """The next message (``str`` for text, ``bytes`` for binary); None once the connection
        is over (:attr:`closed`), or when none has come within ``wait`` seconds, however the
        peer's bytes trickle in (the connection then stays open)."""
        messages = self._messages
        deadline = None if wait is None else time.monotonic() + wait
        timed = False  # the socket has a timeout to take off again
        self._read_lock.acquire()
        self._reader_thread = threading.current_thread()
        try:
            while not messages:
                if self.dead or self._peer_closed:
                    return None
                if self._pending:
                    data, self._pending = self._pending, b""
                else:
                    if deadline is not None:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            return None
                        self.sock.settimeout(left)
                        timed = True
                    try:
                        data = self.sock.recv(RECV_SIZE)
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
                if not self._covered():
                    self.close(1013, "the server's receive buffers are full", linger=0.5)
                    return None
            self.busy = True
            text = messages.popleft()
            self._queued -= len(text)
            if self.hold is not None:
                self.hold.update(self.reader.buffered + self._queued)
            return text
        finally:
            self._read_lock.release()
            if timed and not self.dead:
                with contextlib.suppress(OSError):
                    self.sock.settimeout(None)

    def _covered(self) -> bool:
        """Whether the shared receive buffers cover what this connection holds now (a message
        in progress, and those read ahead)."""
        if self.hold is None:
            return True
        if self.hold.update(self.reader.buffered + self._queued):
            return True
        self.close_reason = "the server's receive buffers are full"
        return False

    def _on_event(self, event: tuple[Any, ...]) -> None:
        kind = event[0]
        if kind in ("text", "binary"):
            self._messages.append(event[1])
            self._queued += len(event[1])
        elif kind == "ping":
            # Never wait for the lock off the reader's thread: a message being written may
            # hold it until the send timeout, and a timer thread may serve many channels.
            self._send(control_frame(PONG, event[1]), wait=self._on_reader_thread())
        elif kind == "close":
            self._peer_closed = True
            code, reason = event[1], event[2]
            self.peer_close = (code, reason)
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
                close_stream(self.sock)
                return False
            except OSError as exc:
                self.close_reason = self.close_reason or f"socket error: {exc}"
                self.dead = True
                close_stream(self.sock)  # abort() would find it dead: close it here
                return False
            finally:
                self._sending = False
        finally:
            self.lock.release()
        return True

    def keepalive(self, now: float) -> None:
        """Timer thread: while the owner is busy, answer the peer's pings (and notice a peer
        that left); otherwise ping a peer silent for ``ping_interval`` and drop one that left a
        ping unanswered for ``ping_timeout``."""
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
        """Read what the peer sent while the owner is busy: pings get their pongs at once
        (clients such as openenv-core's drop connections whose pongs are late), messages queue
        for the owner, up to ``max_queued`` bytes and never while a message is not drained (the
        rest waits in the socket: TCP makes the client wait)."""
        if not self._read_lock.acquire(blocking=False):
            return
        try:
            while not self.dead and not self._sending and self._queued < self.max_queued:
                try:
                    data = self.sock.recv(RECV_SIZE, socket.MSG_DONTWAIT)
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
                if not self._covered():
                    self._send(close_frame(1013, "the server's receive buffers are full"))
                    self.abort()
                    return
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
            # Another thread (watchdog, reaper) must not read the socket: the reader answers
            # the peer's close frame if it is reading; a timer ends the connection anyway.
            timer = threading.Timer(linger, self.abort)
            timer.daemon = True
            timer.start()
            return
        deadline = time.monotonic() + linger
        self.busy = False
        while not self._peer_closed and time.monotonic() < deadline:
            try:
                self.sock.settimeout(max(deadline - time.monotonic(), 0.01))
                data = self.sock.recv(RECV_SIZE)
            except OSError:
                break
            if not data:
                break
            try:
                events = self.reader.feed(data)
            except FrameError:
                break
            closing: tuple[Any, ...] | None = next((e for e in events if e[0] == "close"), None)
            if closing is not None:
                self.peer_close = (closing[1], closing[2])
                break
        self.abort()

    def abort(self) -> None:
        """Drop the connection now, without a closing handshake (any thread)."""
        with self.lock:
            if self.dead:
                return
            self.dead = True
        if self.hold is not None:
            self.hold.release()
        close_stream(self.sock)
