"""Giving memory back to the system after large messages.

Python frees a finished message's buffers at once, but the C allocator may keep the pages:
glibc's ``malloc`` serves a large block from its heaps once it has freed a mapped one of that
size (its mmap threshold grows up to 32 MiB), and keeps what is freed there, in as many heaps
(arenas) as threads that allocated, until ``malloc_trim`` hands it back. A burst of large
messages therefore left the server hundreds of megabytes above its size long after.

:func:`give_back` asks for a trim: a daemon thread calls ``malloc_trim(0)`` (every arena's free
pages go back to the system) a second after the request, at most once a second however many
requests come, and again when no request came for :data:`SETTLE` seconds, and for three times
as long (what is freed later: a reply still being sent to a slow reader, a closed session's
env); so a trim never runs on a connection's thread and a burst costs one trim a second.
The receive budget (:mod:`.buffers`) asks whenever a connection that buffered beyond its
allowance (256 KiB) lets the memory go. Where the C library is not glibc (musl, macOS), there
is nothing to call and :func:`give_back` does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
from collections.abc import Callable
from typing import Final

__all__ = ["SETTLE", "TRIM_DELAY", "give_back", "trims"]

#: Seconds between a request and its trim, and between two trims.
TRIM_DELAY: Final = 1.0
#: Seconds without a request after which a trim follows (and again after three times as long).
SETTLE: Final = 5.0


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class _Trimmer:
    """Calls ``trim`` ``delay`` seconds after a request (one call for the requests meanwhile),
    then after each quiet period of ``settles`` (seconds since that trim) with no request."""

    def __init__(
        self, trim: Callable[[int], int] | None, delay: float, settles: tuple[float, ...]
    ) -> None:
        self.trim = trim
        self.delay = delay
        self.settles = settles
        self.count = 0  # trims done, for tests and metrics
        self._wanted = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def request(self) -> None:
        if self.trim is None:
            return
        self._wanted.set()
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name="envwire-trim", daemon=True
                    )
                    self._thread.start()

    def _run(self) -> None:
        assert self.trim is not None
        while True:
            self._wanted.wait()
            time.sleep(self.delay)  # the requests of a burst meanwhile: one trim
            self._wanted.clear()
            self.trim(0)
            self.count += 1
            # What is freed later (a reply still being sent, a closed session's env): more
            # trims while no request comes.
            waited = 0.0
            for settle in self.settles:
                if self._wanted.wait(settle - waited):
                    break
                waited = settle
                self.trim(0)
                self.count += 1


_TRIMMER = _Trimmer(_malloc_trim(), TRIM_DELAY, (SETTLE, 3 * SETTLE))


def give_back() -> None:
    """Ask for the allocator's free memory to go back to the system soon (never blocks)."""
    _TRIMMER.request()


def trims() -> int:
    """How many trims this process has done."""
    return _TRIMMER.count
