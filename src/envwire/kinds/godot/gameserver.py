"""The WebSocket server a game connects to: one game, text frames, every wait bounded.

A background thread accepts connections; each one's opening handshake runs in a short-lived
thread of its own (at most :data:`MAX_HANDSHAKES` at once, each within ``handshake_timeout``
seconds and :data:`~envwire.sockets.websocket.DEFAULT_MAX_HANDSHAKE` bytes), so that a peer
that connects and says nothing delays nobody. The first connection to complete its handshake is
the game's; any later one is refused with close code 1013 (try again later), even once the game
has left: a server serves one game. The caller sends and receives on the game's connection from
its own thread; between its waits the accepting thread reads the connection: it answers the
game's pings and closing handshake, and notices a game that leaves. The server never pings the
game: every wait for the game is bounded already.

It runs on envwire's own WebSocket stack (:mod:`envwire.sockets.websocket`), the OpenEnv front
end's, chosen over ``websockets``' threading server by measurement: faster on the GymGodot
exchange, for half the CPU, and with more bounded (``benchmarks/README.md``, "One WebSocket
server stack").

Errors are mapped here, once: a wait that runs out raises :class:`TimeoutError` (the caller
knows what it was waiting for and turns it into an envwire error); a closed connection raises
:class:`GameDisconnected`.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable

from envwire.sockets import close_stream
from envwire.sockets.websocket import HandshakeError, WebSocketChannel, handshake

__all__ = [
    "MAX_HANDSHAKES",
    "MAX_MESSAGE",
    "GameDisconnected",
    "GameServer",
]

log = logging.getLogger("envwire.godot")

#: The largest message the game may send, in bytes (a larger one closes the connection with
#: code 1009). Observations travel as JSON lists of numbers.
MAX_MESSAGE = 1024 * 1024
#: Opening handshakes in progress at once; a connection beyond them is closed at once.
MAX_HANDSHAKES = 4

_POLL_SECONDS = 0.05
# How often the accepting thread serves the game's connection between calls (pongs, a game
# that left); also how long close() may wait for it to notice.
_TICK_SECONDS = 0.25
_TRY_AGAIN_LATER = 1013
_GOING_AWAY = 1001
# Bounds the WebSocket handshake, and so how long a peer may hold a handshake slot.
_OPEN_TIMEOUT = 5.0
# Seconds a refused connection is given to answer the closing handshake.
_REFUSAL_LINGER = 1.0


class GameDisconnected(Exception):
    """The game's connection is closed; ``str()`` says how."""


class GameServer:
    """Listen on ``host:port`` (port 0 picks a free port) for one game.

    Args:
        host: the address to listen on.
        port: the port; 0 picks a free one (see :attr:`port`).
        send_timeout: seconds the game has to take each message before its connection is
            dropped (a game that stopped reading).
        handshake_timeout: seconds a connection has to complete its opening handshake.
        max_message: the largest message the game may send, in bytes.

    Raises:
        OSError: the address cannot be bound.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        send_timeout: float = 10.0,
        handshake_timeout: float = _OPEN_TIMEOUT,
        max_message: int = MAX_MESSAGE,
    ) -> None:
        self.send_timeout = send_timeout
        self.handshake_timeout = handshake_timeout
        self.max_message = max_message
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._arrived = threading.Event()
        self._handshakes = threading.BoundedSemaphore(MAX_HANDSHAKES)
        self._greeting: set[socket.socket] = set()  # sockets in their handshake
        self._taken = False  # a connection completed its handshake: the game's
        self._arrival: WebSocketChannel | None = None  # the game's, once it completed it
        self._connection: WebSocketChannel | None = None  # the game's, once accept() saw it
        self._listener = socket.create_server((host, port))
        # accept() wakes up this often to serve the game's connection between calls.
        self._listener.settimeout(_TICK_SECONDS)
        self.host = host
        self.port: int = self._listener.getsockname()[1]
        self._thread = threading.Thread(
            target=self._accept_loop, name=f"envwire-godot-server-{self.port}", daemon=True
        )
        self._thread.start()

    @property
    def connected(self) -> bool:
        """True once a game has connected (even if it has disconnected since)."""
        return self._connection is not None

    # --- the accepting thread and the handshakes ------------------------------------------

    def _accept_loop(self) -> None:
        listener = self._listener
        while not self._closing.is_set():
            try:
                sock, peer = listener.accept()
            except TimeoutError:
                self._keepalive()
                continue
            except OSError as exc:
                if self._closing.is_set():
                    return
                # Out of file descriptors, say: the listener is fine, the next accept may work.
                log.warning("accepting a connection for the Godot game failed: %s", exc)
                self._closing.wait(_TICK_SECONDS)
                continue
            if not self._handshakes.acquire(blocking=False):
                log.info("%s: refused: %d handshakes in progress", peer, MAX_HANDSHAKES)
                close_stream(sock)
            else:
                threading.Thread(
                    target=self._greet,
                    args=(sock, peer),
                    name=f"{self._thread.name}-hs",
                    daemon=True,
                ).start()
            self._keepalive()
            del sock  # the loop's locals would keep the last socket alive until the next accept

    def _keepalive(self) -> None:
        channel = self._arrival
        if channel is not None:
            channel.keepalive(time.monotonic())

    def _greet(self, sock: socket.socket, peer: object) -> None:
        """A connection's handshake; the game's connection, or a refusal."""
        try:
            with self._lock:
                if self._closing.is_set():
                    close_stream(sock)
                    return
                self._greeting.add(sock)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                trailing = handshake(sock, self.handshake_timeout)
            except (HandshakeError, OSError) as exc:
                log.debug("%s: no WebSocket opened: %s", peer, exc)
                close_stream(sock)
                return
            finally:
                with self._lock:
                    self._greeting.discard(sock)
            channel = WebSocketChannel(
                sock,
                trailing,
                max_size=self.max_message,
                ping_interval=None,
                send_timeout=self.send_timeout,
            )
            with self._lock:
                closing, refuse = self._closing.is_set(), self._taken
                if not (closing or refuse):
                    self._taken = True
                    # The caller reads only while it waits for a reply; the rest of the time
                    # the accepting thread does (the channel's "busy"): it answers the game's
                    # pings and its closing handshake, and notices a game that leaves. So the
                    # game is never pinged: every wait for it is bounded by the caller instead.
                    channel.busy = True
                    self._arrival = channel
            if closing:
                channel.close(_GOING_AWAY, "the server is closing", linger=0)
            elif refuse:
                channel.close(_TRY_AGAIN_LATER, "a game is already connected", _REFUSAL_LINGER)
            else:
                self._arrived.set()
        finally:
            self._handshakes.release()

    # --- the caller's side ----------------------------------------------------------------

    def accept(self, timeout: float, check: Callable[[], None]) -> None:
        """Wait up to ``timeout`` seconds for the game to connect.

        Args:
            timeout: seconds to wait.
            check: called between short waits; it raises to abandon the wait (the game died).

        Raises:
            TimeoutError: no game connected in time.
        """
        deadline = time.monotonic() + timeout
        while self._connection is None:
            check()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            if self._arrived.wait(min(_POLL_SECONDS, remaining)):
                self._connection = self._arrival

    def send(self, text: str) -> None:
        """Send one text frame to the game.

        Raises:
            GameDisconnected: the connection is closed, or the game did not take the frame
                within ``send_timeout`` seconds (or no game connected).
        """
        connection = self._require()
        if not connection.send_text(text):
            raise GameDisconnected(_how(connection))
        connection.busy = True  # see _greet: the accepting thread reads until recv() does

    def recv(self, timeout: float) -> str | bytes:
        """The next frame from the game (``str`` for text, ``bytes`` for binary), waiting up to
        ``timeout`` seconds in all.

        Raises:
            TimeoutError: no frame arrived in time.
            GameDisconnected: the connection closed (also when the game broke the protocol or
                sent a message over ``max_message`` bytes: the server closes it then).
        """
        connection = self._require()
        message = connection.receive(wait=timeout)
        if message is not None:
            return message
        if connection.closed:
            raise GameDisconnected(_how(connection))
        raise TimeoutError

    def wait_closed(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the game to close the connection, discarding
        anything it still sends."""
        connection = self._connection
        if connection is None:
            return
        deadline = time.monotonic() + timeout
        while not connection.closed and (remaining := deadline - time.monotonic()) > 0:
            connection.receive(wait=remaining)

    def _require(self) -> WebSocketChannel:
        if self._connection is None:
            raise GameDisconnected("no game is connected")
        return self._connection

    def close(self, timeout: float) -> None:
        """Close the game's connection and stop listening; waits up to ``timeout`` seconds."""
        self._closing.set()
        with self._lock:
            greeting = list(self._greeting)
            game = self._arrival
        for sock in greeting:  # their handshakes fail at once
            close_stream(sock)
        if game is not None:
            # Do not wait long for the game's closing handshake: it may be dead or quitting.
            game.close(linger=min(timeout, 1.0))
        close_stream(self._listener)
        self._thread.join(timeout)


def _how(connection: WebSocketChannel) -> str:
    if connection.peer_close is not None:
        code, reason = connection.peer_close
        return f"the game closed the connection (code {code}, reason {reason!r})"
    return f"the connection closed: {connection.close_reason or 'no closing handshake'}"
