"""Counts the workers of one server share (:mod:`envwire.server.supervisor`): a small file in the
server's private folder, mapped into every worker, where each worker writes its own counts and
reads everyone's, so that a server-wide bound (``capacity``) means the whole server.

Each worker writes only its own slots; a check that must see everyone's and then take a place
(:meth:`Tally.locked`) holds the file's lock meanwhile, so two workers never both take the last
place. The supervisor zeroes a dead worker's slots, and its replacement starts from zero.

:class:`SharedAddressLimiter` bounds what client addresses hold across the workers the same way
(the OpenEnv front end's HTTP and MCP sessions, which outlive their connections).
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
import threading
import zlib
from collections.abc import Iterator
from typing import Literal

from envwire.errors import CapacityError
from envwire.server.security.addresses import AddressLimiter

__all__ = [
    "BUCKETS",
    "SESSIONS",
    "SLOTS",
    "SharedAddressLimiter",
    "Tally",
    "bucket_of",
    "make_tally_file",
]

#: The slot holding a worker's sessions (open, and being opened).
SESSIONS = 0

#: Slots per worker.
SLOTS = 4

_SLOT = struct.Struct("<q")


def make_tally_file(path: str, count: int, slots: int = SLOTS) -> None:
    """Create the zeroed file of ``count`` workers' ``slots`` each (readable by the owner
    alone)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.ftruncate(fd, count * slots * _SLOT.size)
    finally:
        os.close(fd)


class Tally:
    """Worker ``index``'s view of the file at ``path`` of ``count`` workers' ``slots`` each
    (made by :func:`make_tally_file`, or here when it does not exist yet: every worker may
    make it, and none truncates what another wrote)."""

    def __init__(self, path: str, index: int, count: int, slots: int = SLOTS) -> None:
        self.index = index
        self.count = count
        self.slots = slots
        self._threads = threading.Lock()  # the file's lock is the process's: one thread a time
        size = count * slots * _SLOT.size
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        if os.fstat(self._fd).st_size < size:
            with self.locked():
                if os.fstat(self._fd).st_size < size:
                    os.ftruncate(self._fd, size)
        self._map = mmap.mmap(self._fd, size)

    def _offset(self, index: int, slot: int) -> int:
        return (index * self.slots + slot) * _SLOT.size

    def set(self, slot: int, value: int) -> None:
        """Write this worker's count in ``slot``."""
        _SLOT.pack_into(self._map, self._offset(self.index, slot), value)

    def get(self, index: int, slot: int) -> int:
        """Worker ``index``'s count in ``slot``."""
        return int(_SLOT.unpack_from(self._map, self._offset(index, slot))[0])

    def others(self, slot: int) -> int:
        """The other workers' counts in ``slot``, summed."""
        return sum(self.get(i, slot) for i in range(self.count) if i != self.index)

    def clear(self, index: int) -> None:
        """Zero worker ``index``'s slots (the supervisor, when that worker died)."""
        for slot in range(self.slots):
            _SLOT.pack_into(self._map, self._offset(index, slot), 0)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the file's lock (across processes and threads) for a check and the count it
        takes (held for microseconds; a process that dies holding it releases it)."""
        with self._threads:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Unmap the file."""
        self._map.close()
        os.close(self._fd)


#: Buckets of client addresses in a :class:`SharedAddressLimiter`'s file (an address counts
#: against its bucket's holdings in the other workers: two addresses that share a bucket are
#: held to their cap together, never past it; with this many, rarely).
BUCKETS = 1 << 16

_TOTAL = 0  # a SharedAddressLimiter's first slot: all this worker holds


def bucket_of(address: str) -> int:
    """An address's bucket, the same in every process (``hash`` is not)."""
    return 1 + zlib.crc32(address.encode("utf-8", "surrogatepass")) % BUCKETS


class SharedAddressLimiter(AddressLimiter):
    """An :class:`~envwire.server.security.addresses.AddressLimiter` whose ``total`` and
    ``per_address`` bound every worker of the server together: each worker publishes what it
    holds, in all and per address bucket, in the file at ``path``, and an acquire checks the
    others' under the file's lock."""

    def __init__(
        self,
        total: int | None,
        per_address: int | None,
        what: str,
        *,
        path: str,
        index: int,
        count: int,
    ) -> None:
        super().__init__(total, per_address, what)
        self.tally = Tally(path, index, count, slots=1 + BUCKETS)
        self.tally.clear(index)  # a replacement starts from nothing
        self._buckets: dict[int, int] = {}

    def acquire(self, address: str, cap: int | Literal["address"] | None = "address") -> None:
        limit = self.per_address if cap == "address" else cap
        bucket = bucket_of(address)
        with self.tally.locked():
            if self.total is not None and self.held() + self.tally.others(_TOTAL) >= self.total:
                raise CapacityError(
                    f"server is at capacity ({self.total} {self.what}); try again later"
                )
            if limit is not None and self.held(address) + self.tally.others(bucket) >= limit:
                raise CapacityError(
                    f"client {address[:64]} holds {limit} {self.what} or more, the most one "
                    "address may hold here; close some first"
                )
            super().acquire(address, cap)
            self._count_bucket(bucket, 1)

    def release(self, address: str) -> None:
        if self.held(address) <= 0:
            return
        super().release(address)
        self._count_bucket(bucket_of(address), -1)

    def _count_bucket(self, bucket: int, change: int) -> None:
        with self._lock:
            held = self._buckets.get(bucket, 0) + change
            if held > 0:
                self._buckets[bucket] = held
            else:
                self._buckets.pop(bucket, None)
            self.tally.set(bucket, held)
            self.tally.set(_TOTAL, self._count)
