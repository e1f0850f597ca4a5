"""Counts the workers of one server share (:mod:`envwire.server.supervisor`): a small file in the
server's private folder, mapped into every worker, where each worker writes its own counts and
reads everyone's, so that a server-wide bound (``capacity``) means the whole server.

Each worker writes only its own slots; a check that must see everyone's and then take a place
(:meth:`Tally.locked`) holds the file's lock meanwhile, so two workers never both take the last
place. The supervisor zeroes a dead worker's slots, and its replacement starts from zero.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
from collections.abc import Iterator

__all__ = ["SESSIONS", "SLOTS", "Tally", "make_tally_file"]

#: The slot holding a worker's sessions (open, and being opened).
SESSIONS = 0

#: Slots per worker.
SLOTS = 4

_SLOT = struct.Struct("<q")


def make_tally_file(path: str, count: int) -> None:
    """Create the zeroed file of ``count`` workers' slots (readable by the owner alone)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.ftruncate(fd, count * SLOTS * _SLOT.size)
    finally:
        os.close(fd)


class Tally:
    """Worker ``index``'s view of the file at ``path`` (made by :func:`make_tally_file`)."""

    def __init__(self, path: str, index: int, count: int) -> None:
        self.index = index
        self.count = count
        self._fd = os.open(path, os.O_RDWR)
        self._map = mmap.mmap(self._fd, count * SLOTS * _SLOT.size)

    def _offset(self, index: int, slot: int) -> int:
        return (index * SLOTS + slot) * _SLOT.size

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
        for slot in range(SLOTS):
            _SLOT.pack_into(self._map, self._offset(index, slot), 0)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the file's lock (across processes) for a check and the count it takes."""
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Unmap the file."""
        self._map.close()
        os.close(self._fd)
