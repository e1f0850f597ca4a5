"""The pool's pipe: values survive the fast pickling path exactly, frames split right."""

from __future__ import annotations

import os
import pickle
import threading
import time
from typing import Any

import numpy as np
import pytest

from envwire.runtime.pipe import READ_SIZE, FrameReader, dumps, frame, write_all

ARRAYS = [
    np.arange(12, dtype=np.int64).reshape(3, 4),
    np.arange(12, dtype=np.float32).reshape(3, 4).T,  # not contiguous
    np.array(7, np.uint8),  # 0-d
    np.zeros((0, 3), np.float64),
    np.array([True, False]),
    np.array([1 + 2j], np.complex64),
    np.array([1.5], np.float16),
    np.arange(4, dtype=">i4"),  # not native byte order
    np.array(["a", "bc"]),  # a dtype NumPy pickles itself
    np.array([{"x": 1}, None], dtype=object),
]


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: f"{a.dtype}{a.shape}")
def test_arrays_come_back_equal_and_writable(array: np.ndarray[Any, Any]) -> None:
    back = pickle.loads(dumps(array))
    assert back.dtype == array.dtype and back.shape == array.shape
    assert np.array_equal(back, array)
    assert back.flags.writeable


def test_read_only_arrays_come_back_writable_copies() -> None:
    array = np.arange(3)
    array.flags.writeable = False
    back = pickle.loads(dumps(array))
    back[0] = 9
    assert array[0] == 0


@pytest.mark.parametrize(
    "value",
    [
        np.int64(-3),
        np.uint8(200),
        np.float32(0.1),
        np.float64(1e300),
        np.bool_(True),
        np.complex128(1j),
    ],
    ids=repr,
)
def test_numpy_scalars_keep_their_type_and_value(value: np.generic) -> None:
    back = pickle.loads(dumps(value))
    assert type(back) is type(value) and back == value


def test_nested_values_as_a_step_result() -> None:
    value = ((np.int64(2), np.ones(2, np.float32)), 0.5, False, True, {"t": np.int64(3)})
    back = pickle.loads(dumps(value))
    assert back[1:4] == (0.5, False, True) and back[4] == {"t": 3}
    assert np.array_equal(back[0][1], value[0][1]) and type(back[0][0]) is np.int64


def test_frames_are_read_whole_however_the_bytes_arrive() -> None:
    read, write = os.pipe()
    frames = [frame(b"h%d" % i, b"x" * i * 1000) for i in range(5)]
    data = b"".join(frames)

    def feed() -> None:  # cut inside a length, inside bodies, and across frames
        for piece in (data[:3], data[3:2500], data[2500:7000], data[7000:]):
            write_all(write, piece)
            time.sleep(0.05)
        os.close(write)

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        reader = FrameReader(read)
        got: list[bytes] = []
        while len(got) < 5:
            got += [bytes(f) for f in reader.read()]
        assert got == [b"h%d" % i + b"x" * i * 1000 for i in range(5)]
        assert reader.read() == []  # EOF
    finally:
        feeder.join()
        os.close(read)


def test_a_frame_larger_than_one_read_is_read_whole() -> None:
    """One read takes at most READ_SIZE bytes (kept small: a larger read costs an ``mmap`` of
    its own); a frame of several reads' worth comes back whole, and so does the next."""
    read, write = os.pipe()
    big = frame(b"", bytes(range(256)) * (3 * READ_SIZE // 256 + 1))
    feeder = threading.Thread(target=write_all, args=(write, big + frame(b"", b"next")))
    feeder.start()
    try:
        reader = FrameReader(read)
        got: list[bytes] = []
        while len(got) < 2:
            got += [bytes(f) for f in reader.read()]
        assert got == [big[4:], b"next"]
    finally:
        feeder.join()
        os.close(write)
        os.close(read)
