"""envwire.sockets: gathered writes."""

from __future__ import annotations

import socket
import threading

import numpy as np
import pytest

from envwire.sockets import send_buffers


def _received(buffers: list[bytes | memoryview], *, sndbuf: int | None = None) -> bytes:
    """What the other end of a socket pair reads after ``send_buffers`` (a reader thread drains
    it, so that a small send buffer forces partial writes)."""
    left, right = socket.socketpair()
    if sndbuf is not None:
        left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    chunks: list[bytes] = []

    def drain() -> None:
        while data := right.recv(4096):
            chunks.append(data)

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        send_buffers(left, buffers)
    finally:
        left.shutdown(socket.SHUT_WR)
        reader.join(10)
        left.close()
        right.close()
    return b"".join(chunks)


def test_a_gathered_write_sends_the_buffers_in_order() -> None:
    frame = np.arange(84 * 84 * 4, dtype=np.uint32).astype(np.uint8).reshape(84, 84, 4)
    buffers = [b"\x00\x01", b"", frame.reshape(-1).data, b"tail"]
    assert _received(buffers) == b"\x00\x01" + frame.tobytes() + b"tail"


def test_views_of_wider_items_count_their_bytes() -> None:
    values = np.arange(1000, dtype=np.float64)
    assert _received([b"h", memoryview(values)]) == b"h" + values.tobytes()


def test_partial_writes_resume_where_they_stopped() -> None:
    """Megabytes through a small send buffer: ``sendmsg`` writes part at a time."""
    big = np.random.default_rng(0).integers(0, 256, 3_000_000, dtype=np.uint8)
    buffers = [b"head", big[:1_000_001].data, b"mid", big[1_000_001:].data, b"end"]
    expected = b"head" + big[:1_000_001].tobytes() + b"mid" + big[1_000_001:].tobytes() + b"end"
    assert _received(buffers, sndbuf=4096) == expected


@pytest.mark.parametrize("count", [1, 3, 200])
def test_lists_of_bytes_are_joined(count: int) -> None:
    buffers: list[bytes | memoryview] = [bytes([i % 256]) * 3 for i in range(count)]
    assert _received(buffers) == b"".join(bytes(b) for b in buffers)


def test_more_buffers_than_one_gather_takes_are_joined() -> None:
    buffers: list[bytes | memoryview] = [memoryview(bytes([i % 256]) * 2) for i in range(300)]
    assert _received(buffers) == b"".join(bytes(b) for b in buffers)
