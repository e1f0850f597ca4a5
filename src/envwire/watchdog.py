"""One thread that notices calls running past their deadline (env calls on the server, gRPC
calls in the client): shared by every place that must bound a wait it cannot time out itself."""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from typing import Protocol

__all__ = ["Watched", "Watchdog"]


class Watched(Protocol):
    """What a :class:`Watchdog` watches: a call that may run past its deadline."""

    def overdue(self, now: float) -> bool:
        """True when the call is past its deadline (``now`` from ``time.monotonic()``)."""
        ...

    def expire(self) -> None:
        """Deal with the overdue call (called from the watchdog's thread)."""
        ...


class Watchdog:
    """One thread that notices calls running past their deadline.

    A watched object (:class:`Watched`) has ``overdue(now) -> bool`` (``now`` from
    ``time.monotonic()``) and ``expire()``. Arming a call is the object's own business (an
    attribute write); the thread scans the watched objects every ``interval`` seconds, so no
    per-call bookkeeping piles up. Objects are held weakly: garbage is not watched.
    """

    def __init__(self, interval: float = 0.1, name: str = "envwire-watchdog") -> None:
        self.interval = interval
        self.name = name
        self._watched: weakref.WeakSet[Watched] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, target: Watched) -> None:
        """Start watching ``target`` (until it is garbage)."""
        with self._lock:
            self._watched.add(target)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name)
                self._thread.daemon = True
                self._thread.start()

    def _run(self) -> None:
        while True:
            time.sleep(self.interval)
            now = time.monotonic()
            with self._lock:
                late = [t for t in self._watched if t.overdue(now)]
            for target in late:
                with contextlib.suppress(Exception):  # a failing callback must not stop us
                    target.expire()
