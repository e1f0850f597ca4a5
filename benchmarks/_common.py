"""Shared pieces of the benchmarks: a raw TCP echo baseline and timing helpers.

Every benchmark reports a ratio against a baseline measured in the same run, because the
machines it runs on are shared and noisy.
"""

from __future__ import annotations

import multiprocessing
import socket
import statistics
import time
from collections.abc import Callable
from typing import Any

__all__ = ["EchoServer", "echo_rate", "rate", "report"]


def _echo_main(ready: Any) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    ready.send(listener.getsockname()[1])
    while True:
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := conn.recv(1 << 20):
            conn.sendall(data)
        conn.close()


class EchoServer:
    """A plain blocking Python TCP echo server in its own process (the physical baseline)."""

    def __enter__(self) -> EchoServer:
        parent, child = multiprocessing.Pipe()
        self.process = multiprocessing.get_context("spawn").Process(
            target=_echo_main, args=(child,), daemon=True
        )
        self.process.start()
        self.port = int(parent.recv())
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.kill()
        self.process.join()


def echo_rate(port: int, request_size: int, reply_size: int, seconds: float) -> float:
    """Round trips per second: send ``request_size`` bytes, read back as many, padded so each
    direction carries at least what the protocol under test carries."""
    size = max(request_size, reply_size)
    payload = b"x" * size
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def once() -> None:
        sock.sendall(payload)
        got = 0
        while got < size:
            got += len(sock.recv(1 << 20))

    try:
        return rate(once, seconds)
    finally:
        sock.close()


def rate(call: Callable[[], Any], seconds: float, warmup: int = 200) -> float:
    """Calls per second of ``call`` over about ``seconds`` (after a warm-up)."""
    for _ in range(warmup):
        call()
    count, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(100):
            call()
        count += 100
        now = time.perf_counter()
        if now >= deadline:
            return count / (now - start)


def median_of(runs: int, measure: Callable[[], float]) -> float:
    """The median of ``runs`` measurements."""
    return statistics.median(measure() for _ in range(runs))


def report(rows: list[tuple[str, float, float | None]]) -> None:
    """Print name, rate and ratio columns."""
    width = max(len(name) for name, _, _ in rows)
    for name, value, ratio in rows:
        tail = f"   ratio {ratio:.2f}" if ratio is not None else ""
        print(f"{name:<{width}}  {value:>10,.0f} /s{tail}")
