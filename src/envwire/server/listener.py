"""The TCP listener of the blocking front ends: a thread per accepted connection."""

from __future__ import annotations

import socket
import threading
from typing import Any

__all__ = ["ThreadedListener"]


class ThreadedListener:
    """A TCP listener with a thread per accepted connection (the blocking front ends' base).

    Subclasses set ``host``, ``port`` and ``thread_name``, and implement :meth:`connection`,
    which wraps an accepted socket in an object with a ``run()`` method (the thread's body).
    """

    host: str
    port: int
    thread_name = "envwire-conn"

    def __init__(self) -> None:
        self._listener: socket.socket | None = None
        self._connections: set[Any] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def connection(self, sock: socket.socket, peer: Any) -> Any:
        """The object serving one accepted socket."""
        raise NotImplementedError

    def listen(self, backlog: int) -> tuple[str, int]:
        """Bind and listen (connections queue from now on), then start accepting."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(backlog)
        self._listener = listener
        self.port = listener.getsockname()[1]
        threading.Thread(target=self._accept_loop, name=self.thread_name, daemon=True).start()
        return self.host, self.port

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                sock, peer = self._listener.accept()
            except OSError:
                return
            conn = self.connection(sock, peer)
            with self._lock:
                self._connections.add(conn)
            name = f"{self.thread_name}-{peer}"
            threading.Thread(target=conn.run, name=name, daemon=True).start()
            # The loop's locals would keep the last connection (and its buffers) alive until
            # the next accept, however long that takes.
            del conn, sock

    def forget(self, conn: Any) -> None:
        """A connection ended: stop tracking it."""
        with self._lock:
            self._connections.discard(conn)

    def stop_listening(self) -> list[Any]:
        """Stop accepting; the connections still open, for the caller to drop."""
        self._stopping.set()
        if self._listener is not None:
            self._listener.close()
        with self._lock:
            return list(self._connections)
