"""The threads that serve connections: a bounded pool, made on demand, that shrinks when idle.

A connection with work to do (a request arrived, an env call to make) gets a thread from the
:class:`ThreadPool`; a connection that waits for its client gives its thread back and waits in
:mod:`.parking` instead, so idle connections hold no thread. Work beyond ``max_threads`` busy
threads waits in arrival order. A thread left without work for ``idle_seconds`` exits, so a burst
leaves no threads behind.

A thread stuck in an inline env that hung cannot be taken back: :meth:`ThreadPool.forsake` gives
up its place, so that the pool may make another one, and the stuck thread exits when (if ever)
the env returns.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable

__all__ = ["ThreadPool"]

log = logging.getLogger("envwire.threads")


class ThreadPool:
    """Runs submitted work on at most ``max_threads`` threads at once, in arrival order.

    Args:
        max_threads: the most threads at work (and alive) at once.
        idle_seconds: how long a thread waits for work before it exits.
        name: the threads' name prefix.
    """

    def __init__(self, max_threads: int, idle_seconds: float = 10.0, name: str = "envwire") -> None:
        if max_threads < 1:
            raise ValueError(f"max_threads must be at least 1, got {max_threads}")
        self.max_threads = max_threads
        self.idle_seconds = idle_seconds
        self.name = name
        self._work: collections.deque[Callable[[], None]] = collections.deque()
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._threads = 0  # alive and counted (forsaken ones are not)
        self._idle = 0  # of those, waiting for work
        self._forsaken: set[int] = set()
        self._stopped = False
        self._made = 0

    @property
    def threads(self) -> int:
        """Threads alive and counted now."""
        with self._lock:
            return self._threads

    @property
    def waiting(self) -> int:
        """Work waiting for a thread now."""
        with self._lock:
            return len(self._work)

    def submit(self, work: Callable[[], None]) -> None:
        """Run ``work`` on a pool thread, now or when one is free (never raises from
        ``work``: its exceptions are logged)."""
        with self._lock:
            if self._stopped:
                return
            self._work.append(work)
            if self._idle > len(self._work) - 1:
                self._ready.notify()
                return
            if self._threads < self.max_threads:
                self._threads += 1
                self._made += 1
                number = self._made
            else:
                return  # a busy thread takes it when done
        thread = threading.Thread(target=self._run, name=f"{self.name}-{number}", daemon=True)
        thread.start()

    def forsake(self, ident: int) -> None:
        """The thread ``ident`` is stuck (an env that hung in it): stop counting it, so that
        another may be made in its place. It exits when it returns."""
        with self._lock:
            if ident in self._forsaken:
                return
            self._forsaken.add(ident)
            self._threads -= 1
            if self._work and self._idle == 0:  # its place can take waiting work now
                self._threads += 1
                self._made += 1
                number = self._made
            else:
                return
        threading.Thread(target=self._run, name=f"{self.name}-{number}", daemon=True).start()

    def _run(self) -> None:
        me = threading.get_ident()
        while True:
            with self._lock:
                while not self._work:
                    if self._stopped:
                        self._threads -= 1
                        return
                    self._idle += 1
                    woke = self._ready.wait(self.idle_seconds)
                    self._idle -= 1
                    if not woke and not self._work:
                        self._threads -= 1
                        return
                work = self._work.popleft()
            try:
                work()
            except Exception:
                log.exception("connection work failed")
            # Done with it: an idle thread must not keep the last connection it served alive.
            del work
            if me in self._forsaken:  # taken back after it hung: its place is someone else's
                with self._lock:
                    self._forsaken.discard(me)
                return

    def stop(self) -> None:
        """Drop waiting work; threads exit when their current work ends."""
        with self._lock:
            self._stopped = True
            self._work.clear()
            self._ready.notify_all()
