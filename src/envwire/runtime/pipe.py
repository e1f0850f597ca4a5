"""The pool's pipe: length-prefixed frames over one file descriptor, and values pickled with a
fast path for NumPy arrays and scalars.

Frames are read in bulk (:class:`FrameReader`): one ``read`` takes every frame already waiting,
so a busy pipe costs one system call for many replies. That matters most in the server, where
the thread reading a pool process's replies releases the GIL at every system call and must win
it back from the session threads each time.

:func:`dumps` pickles as :mod:`pickle` does, but NumPy arrays of plain dtypes and NumPy
scalars go as their bytes (arrays) or as Python numbers (scalars), not through NumPy's own
reduction, which costs several microseconds an object (an observation, an action: every call
carries some). :func:`pickle.loads` reads the result; arrays come back writable.
"""

from __future__ import annotations

import copyreg
import io
import os
import pickle
import struct
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from typing import Any

import numpy as np

__all__ = ["READ_SIZE", "FrameReader", "dumps", "frame", "pipes", "write_all"]

_LENGTH = struct.Struct("<I")

#: Bytes one read takes at most: below glibc's threshold for serving an allocation by its own
#: ``mmap`` (128 KiB), which ``os.read`` would otherwise pay, with its ``munmap`` and page
#: faults, on every read (about 50 us for 256 KiB; 4 us for 64 KiB).
READ_SIZE = 1 << 16

#: Largest frame: 4 GiB - 1 (the length is a u32).
MAX_FRAME = 2**32 - 1


def _array(data: bytes | bytearray, dtype: str, shape: tuple[int, ...]) -> np.ndarray[Any, Any]:
    """An array rebuilt from its bytes (writable: a read-only source is copied)."""
    buffer = data if isinstance(data, bytearray) else bytearray(data)
    return np.frombuffer(buffer, dtype).reshape(shape)


def _reduce_array(array: Any) -> Any:
    if array.dtype.kind not in "biufc" or array.dtype.fields is not None:
        return array.__reduce_ex__(pickle.HIGHEST_PROTOCOL)  # NumPy's own, for the rest
    if not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)
    # In-band PickleBuffer: no copy here, and a bytearray (writable) on the other side.
    return _array, (pickle.PickleBuffer(memoryview(array)), array.dtype.str, array.shape)


def _reduce_scalar(value: Any) -> Any:
    return type(value), (value.item(),)


def _scalar_types() -> list[type[np.generic]]:
    """NumPy's numeric scalar types whose ``item()`` is a Python number that rebuilds them
    exactly (not ``longdouble``, wider than a Python float)."""
    wide = (np.longdouble, np.clongdouble)
    numeric = (np.bool_, np.integer, np.floating, np.complexfloating)
    found = {t for t in np.sctypeDict.values() if issubclass(t, numeric) and t not in wide}
    return sorted(found, key=lambda t: t.__name__)


class _Pickler(pickle.Pickler):
    dispatch_table = {  # noqa: RUF012 - a class attribute the pickle module reads
        **copyreg.dispatch_table,
        np.ndarray: _reduce_array,
        **dict.fromkeys(_scalar_types(), _reduce_scalar),
    }


def dumps(value: object) -> bytes:
    """``value`` pickled (protocol 5), arrays and NumPy scalars by the fast path.

    Raises:
        pickle.PicklingError, TypeError, AttributeError: ``value`` cannot be pickled.
    """
    buffer = io.BytesIO()
    _Pickler(buffer, pickle.HIGHEST_PROTOCOL).dump(value)
    return buffer.getvalue()


def frame(head: bytes, payload: bytes) -> bytes:
    """One frame: the length of ``head + payload``, then both.

    Raises:
        ValueError: more than :data:`MAX_FRAME` bytes.
    """
    size = len(head) + len(payload)
    if size > MAX_FRAME:
        raise ValueError(f"a frame holds at most {MAX_FRAME} bytes, this one {size}")
    return b"".join((_LENGTH.pack(size), head, payload))


def pipes(ctx: BaseContext) -> tuple[Connection, Connection, Connection, Connection]:
    """A pipe each way between the server and a worker process it starts: the server's ends
    (replies to read, calls to write), then the child's (calls to read, replies to write).

    Not one socket pair: a pipe's readers and writers wait on queues of their own, so the
    server's read of a reply never wakes the child waiting for its next call (over a socket
    pair it could: a worker slept up to twice a call).
    """
    child_calls, calls = ctx.Pipe(duplex=False)
    replies, child_replies = ctx.Pipe(duplex=False)
    return replies, calls, child_calls, child_replies


def write_all(fd: int, data: bytes | memoryview) -> None:
    """Write all of ``data`` to ``fd`` (a blocking pipe or socket).

    Raises:
        OSError: the other end is gone.
    """
    written = os.write(fd, data)  # nearly always all of it: a frame fits the pipe's buffer
    if written == len(data):
        return
    view = memoryview(data)[written:]
    while view:
        view = view[os.write(fd, view) :]


class FrameReader:
    """Whole frames from ``fd``: :meth:`read` returns every one already received (blocking
    until there is at least one), or an empty list at EOF."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = bytearray()

    def read(self) -> list[bytearray]:
        """The frames received so far, each without its length prefix.

        Raises:
            OSError: reading failed.
        """
        buffer = self._buffer
        if not buffer:  # the usual case: nothing left over, and one whole frame comes
            chunk = os.read(self.fd, READ_SIZE)
            if (
                len(chunk) >= _LENGTH.size
                and _LENGTH.unpack_from(chunk)[0] == len(chunk) - _LENGTH.size
            ):
                return [bytearray(chunk[_LENGTH.size :])]
            if not chunk:
                return []
            buffer += chunk
        while True:
            if len(buffer) >= _LENGTH.size:
                frames = self._split()
                if frames:
                    return frames
            chunk = os.read(self.fd, READ_SIZE)
            if not chunk:
                return []
            self._buffer += chunk

    def feed(self, data: bytes) -> None:
        """Take ``data``, read from ``fd`` elsewhere (the start of a frame), before what
        :meth:`read` reads next."""
        self._buffer += data

    @property
    def buffered(self) -> bool:
        """Whether bytes of a frame not yet returned are held here."""
        return bool(self._buffer)

    def _split(self) -> list[bytearray]:
        buffer, frames, start = self._buffer, [], 0
        end = len(buffer)
        while end - start >= _LENGTH.size:
            (size,) = _LENGTH.unpack_from(buffer, start)
            stop = start + _LENGTH.size + size
            if stop > end:
                break
            frames.append(buffer[start + _LENGTH.size : stop])
            start = stop
        if start:
            del buffer[:start]
        return frames
