"""The WebSocket server a game connects to: one game, text frames, every wait bounded.

The server runs in a background thread (``websockets``' threading API). The first connection
is the game's; any later one is refused with close code 1013 (try again later) while a game is
connected. The caller sends and receives on the game's connection from its own thread.

Errors are mapped here, once: a wait that runs out raises :class:`TimeoutError` (the caller
knows what it was waiting for and turns it into an envwire error); a closed connection raises
:class:`GameDisconnected`.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable

from websockets.exceptions import ConnectionClosed
from websockets.sync.server import Server, ServerConnection, serve

__all__ = ["GameDisconnected", "GameServer"]

_POLL_SECONDS = 0.05
_EXIT_CHECK_SECONDS = 0.5
_TRY_AGAIN_LATER = 1013
# Bounds the WebSocket handshake, and so how long close() can wait for a half-open one.
_OPEN_TIMEOUT = 5.0


class GameDisconnected(Exception):
    """The game's connection is closed; ``str()`` says how."""


class GameServer:
    """Listen on ``host:port`` (port 0 picks a free port) for one game.

    Raises:
        OSError: the address cannot be bound.
    """

    def __init__(self, host: str, port: int) -> None:
        self._arrivals: queue.Queue[ServerConnection] = queue.Queue()
        self._released = threading.Event()
        self._lock = threading.Lock()
        self._taken = False
        self._connection: ServerConnection | None = None
        # No compression: Godot's client does not negotiate it, and frames are small.
        self._server: Server = serve(
            self._handle, host, port, compression=None, open_timeout=_OPEN_TIMEOUT
        )
        self.host = host
        self.port: int = self._server.socket.getsockname()[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"envwire-godot-server-{self.port}", daemon=True
        )
        self._thread.start()

    @property
    def connected(self) -> bool:
        """True once a game has connected (even if it has disconnected since)."""
        return self._connection is not None

    def _handle(self, connection: ServerConnection) -> None:
        with self._lock:
            refuse, self._taken = self._taken, True
        if refuse:
            connection.close(_TRY_AGAIN_LATER, "a game is already connected")
            return
        self._arrivals.put(connection)
        # Returning would close the connection: hold it until the server is closed, or until
        # the interpreter is exiting (its threads are joined before finalizers could close us).
        while not self._released.wait(_EXIT_CHECK_SECONDS):
            if not threading.main_thread().is_alive():
                return

    def accept(self, timeout: float, check: Callable[[], None]) -> None:
        """Wait up to ``timeout`` seconds for the game to connect.

        Args:
            timeout: seconds to wait.
            check: called between short waits; it raises to abandon the wait (the game died).

        Raises:
            TimeoutError: no game connected in time.
        """
        remaining = timeout
        while self._connection is None:
            check()
            if remaining <= 0:
                raise TimeoutError
            wait = min(_POLL_SECONDS, remaining)
            with contextlib.suppress(queue.Empty):
                self._connection = self._arrivals.get(timeout=wait)
            remaining -= wait

    def send(self, text: str) -> None:
        """Send one text frame to the game.

        Raises:
            GameDisconnected: the connection is closed (or no game connected).
        """
        connection = self._require()
        try:
            connection.send(text)
        except ConnectionClosed as exc:
            raise GameDisconnected(_how(exc)) from exc

    def recv(self, timeout: float) -> str | bytes:
        """The next frame from the game, waiting up to ``timeout`` seconds.

        Raises:
            TimeoutError: no frame arrived in time.
            GameDisconnected: the connection closed.
        """
        connection = self._require()
        try:
            return connection.recv(timeout=timeout)
        except ConnectionClosed as exc:
            raise GameDisconnected(_how(exc)) from exc

    def wait_closed(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the game to close the connection, discarding
        anything it still sends."""
        if self._connection is None:
            return
        deadline = time.monotonic() + timeout
        with contextlib.suppress(ConnectionClosed, TimeoutError):
            while (remaining := deadline - time.monotonic()) > 0:
                self._connection.recv(timeout=remaining)

    def _require(self) -> ServerConnection:
        if self._connection is None:
            raise GameDisconnected("no game is connected")
        return self._connection

    def close(self, timeout: float) -> None:
        """Close the game's connection and stop listening; waits up to ``timeout`` seconds."""
        self._released.set()
        if self._connection is not None:
            # Do not wait for the game's closing handshake: it may be dead or quitting.
            self._connection.close_timeout = min(timeout, 1.0)
            self._connection.close()
        self._server.shutdown()
        self._thread.join(timeout)


def _how(exc: ConnectionClosed) -> str:
    received = exc.rcvd
    if received is None:
        return "the connection dropped without a closing handshake"
    return f"the game closed the connection (code {received.code}, reason {received.reason!r})"
