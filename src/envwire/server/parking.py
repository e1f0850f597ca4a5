"""Where connections wait for their clients without a thread: one selector, one thread.

A connection that has served what its client sent, and whose client stays silent for a moment,
*parks*: it gives its thread back to the :class:`~envwire.server.threads.ThreadPool` and waits
here, registered for reading, with a deadline (its idle or handshake limit). When bytes arrive
(or the client hangs up) it is handed back to the pool to :meth:`~Parked.resume`; when its
deadline passes first, to :meth:`~Parked.expire` (which closes it, telling its client why where
the protocol can). So ten thousand idle connections hold a socket and a few objects each, and
no thread.

Parking is cheap both ways: a connection whose client sends again within the moment it waits
before parking (``hot_window``) never parks, so a client stepping as fast as it can keeps the
blocking fast path of a thread of its own.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Protocol

from envwire.server.threads import ThreadPool

__all__ = ["Parked", "Parking"]

log = logging.getLogger("envwire.parking")


class Parked(Protocol):
    """A connection that can wait here."""

    def fileno(self) -> int:
        """The socket to watch for reading."""
        ...

    def resume(self) -> None:
        """In a pool thread: the client sent something (or hung up); serve it."""
        ...

    def expire(self) -> None:
        """In a pool thread: the deadline passed while parked; close the connection."""
        ...


class Parking:
    """Parked connections of every front end, watched by one thread.

    Args:
        pool: the threads that resume (and expire) connections.
        clock: the time in seconds (``time.monotonic``).
    """

    def __init__(self, pool: ThreadPool, clock: Callable[[], float] = time.monotonic) -> None:
        self.pool = pool
        self.clock = clock
        # Made when the watching starts: a parking never started holds no descriptor.
        self._selector = selectors.DefaultSelector()
        self._wake_read: socket.socket | None = None
        self._wake_write: socket.socket | None = None
        self._lock = threading.Lock()
        self._arriving: list[tuple[Parked, float | None]] = []
        self._deadlines: list[tuple[float, int, Parked]] = []  # a heap; stale entries skipped
        #: connection -> (its current deadline entry's number, the descriptor it was parked with)
        self._parked: dict[Parked, tuple[int, int]] = {}
        self._numbers = itertools.count()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def __len__(self) -> int:
        with self._lock:
            return len(self._parked) + len(self._arriving)

    def start(self) -> None:
        """Start the watching thread (idempotent)."""
        with self._lock:
            if self._thread is not None or self._stopping:
                return
            self._wake_read, self._wake_write = socket.socketpair()
            self._wake_read.setblocking(False)
            self._wake_write.setblocking(False)
            self._selector.register(self._wake_read, selectors.EVENT_READ, None)
            self._thread = threading.Thread(target=self._loop, name="envwire-parking", daemon=True)
        self._thread.start()

    def _wake(self) -> None:
        """Interrupt the watching thread's ``select`` (any thread)."""
        wake = self._wake_write
        if wake is not None:
            with contextlib.suppress(BlockingIOError, OSError):
                wake.send(b"\0")

    def park(self, conn: Parked, deadline: float | None) -> None:
        """Wait for ``conn``'s client until ``deadline`` (a :attr:`clock` time; None: no
        deadline). Any thread may park; the connection must not be used until it is resumed
        or expired."""
        with self._lock:
            if self._stopping:
                stopped = True
            else:
                stopped = False
                self._arriving.append((conn, deadline))
        if stopped:
            self.pool.submit(conn.expire)
            return
        self._wake()

    def _loop(self) -> None:
        while self._round():
            pass
        self._close_all()

    def _round(self) -> bool:
        """Take in the connections parked since, wait for the next event or deadline, and hand
        what is ready to the pool; False once stopping. (A method of its own: its locals, the
        last connections it saw, are gone while the next ``select`` sleeps.)"""
        with self._lock:
            if self._stopping:
                return False
            arriving, self._arriving = self._arriving, []
        for parked, deadline in arriving:
            self._add(parked, deadline)
        try:
            events = self._selector.select(self._next_timeout())
        except OSError:  # a connection closed under us: drop what is no longer there
            self._drop_closed()
            return True
        for key, _ in events:
            if key.data is None:
                self._drain_wakeups()
                continue
            ready: Parked = key.data
            self._remove(ready)
            self.pool.submit(ready.resume)
        self._expire_due()
        return True

    def _add(self, conn: Parked, deadline: float | None) -> None:
        try:
            fd = conn.fileno()
        except (OSError, ValueError):
            fd = -1
        if fd < 0 or conn in self._parked:  # closed already, or parked twice
            self.pool.submit(conn.expire)
            return
        try:
            self._selector.register(fd, selectors.EVENT_READ, conn)
        except KeyError:  # a closed socket that had this number is still registered: drop it
            stale: Parked = self._selector.get_key(fd).data
            self._remove(stale)
            self.pool.submit(stale.expire)
            self._selector.register(fd, selectors.EVENT_READ, conn)
        except (ValueError, OSError):
            self.pool.submit(conn.expire)
            return
        number = next(self._numbers)
        self._parked[conn] = (number, fd)
        if deadline is not None:
            heapq.heappush(self._deadlines, (deadline, number, conn))
            if len(self._deadlines) > 2 * len(self._parked) + 64:
                self._compact()

    def _compact(self) -> None:
        """Drop the deadlines of connections resumed since they were pushed. A connection that
        parks after every step pushes a deadline an idle limit (an hour) away each time; left to
        reach the top of the heap, those stale entries would pile up by the million."""
        live = [entry for entry in self._deadlines if self._number(entry[2]) == entry[1]]
        heapq.heapify(live)
        self._deadlines = live

    def _remove(self, conn: Parked) -> None:
        entry = self._parked.pop(conn, None)
        if entry is not None:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._selector.unregister(entry[1])

    def _next_timeout(self) -> float | None:
        deadlines = self._deadlines
        while deadlines and self._number(deadlines[0][2]) != deadlines[0][1]:
            heapq.heappop(deadlines)  # resumed since: not its deadline any more
        if not deadlines:
            return None
        return max(deadlines[0][0] - self.clock(), 0.0)

    def _expire_due(self) -> None:
        now = self.clock()
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now:
            _, number, conn = heapq.heappop(deadlines)
            if self._number(conn) != number:
                continue
            self._remove(conn)
            self.pool.submit(conn.expire)

    def _number(self, conn: Parked) -> int | None:
        entry = self._parked.get(conn)
        return None if entry is None else entry[0]

    def _drain_wakeups(self) -> None:
        wake = self._wake_read
        assert wake is not None
        with contextlib.suppress(BlockingIOError, OSError):
            while wake.recv(4096):
                pass

    def _drop_closed(self) -> None:
        for conn in list(self._parked):
            try:
                closed = conn.fileno() < 0
            except (OSError, ValueError):
                closed = True
            if closed:
                self._remove(conn)
                self.pool.submit(conn.expire)

    def stop(self) -> None:
        """Stop watching: every parked connection is expired."""
        with self._lock:
            self._stopping = True
            thread = self._thread
        self._wake()
        if thread is not None:
            thread.join(timeout=5)
        else:
            self._close_all()

    def _close_all(self) -> None:
        with self._lock:
            arriving, self._arriving = self._arriving, []
        for conn in [*self._parked, *(c for c, _ in arriving)]:
            self._remove(conn)
            try:
                conn.expire()
            except Exception:
                log.exception("closing a parked connection failed")
        self._deadlines.clear()
        self._selector.close()
        for wake in (self._wake_read, self._wake_write):
            if wake is not None:
                wake.close()
