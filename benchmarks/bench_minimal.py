"""gym-socket's one step, beside a minimal hand-written Python implementation of the same bytes.

Run: ``python benchmarks/bench_minimal.py [--seconds S] [--runs R] [--quick] [--cpu N|none]``.

The baseline is the least Python that can serve and step CartPole over gym-socket's extended
path with envwire's own client flags (``ERRORS | MONITOR_REPLY | EXTENDED``): a server that
answers the handshake, the extended reset and the extended step and nothing else (blocking
``recv_into`` a preallocated buffer, CartPole really stepped, the reply built from a fixed
header, the observation's bytes and one ``struct``), and a client that sends the step's 7 bytes
with one ``sendall`` and reads the 47-byte reply with ``recv_into``, ``np.frombuffer`` and one
``struct``. Before the rounds, both servers answer the same requests from the same state, and
the benchmark checks that their replies are the same bytes.

envwire's side is a real ``envwire serve`` and envwire's ``envwire.make`` client. Both pairs
step CartPole with one fixed action and reset when an episode ends, in alternating rounds. The
figures: steps/s, and CPU per step of the client and of the server (``/proc``), with the ratio
of envwire's total CPU per step to the baseline's (the issue's target: at most 1.5, goal 1.25).
By default both processes of each pair run on one core (``sched_setaffinity``, every thread),
so that their CPU time is the step's whole cost and the wall time follows it; ``--cpu N`` picks
the core, ``--cpu none`` lets them float.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import socket
import statistics
import struct
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium
import numpy as np

import envwire
from envwire.testing import ServerProcess
from harness import Result, machine, parse_settings, print_table
from harness import read_exactly as _read

__all__ = ["main", "minimal_server"]

_FLAGS = 0x01 | 0x02 | 0x04  # ERRORS | MONITOR_REPLY | EXTENDED: envwire's client's own
_STEP, _RESET = 8, 7  # the extended packets
#: The step request for action 1 of a Discrete space: packet 8, action type 0 (JSON), "1".
_STEP_ONE = bytes([_STEP, 0]) + struct.pack("<I", 1) + b"1"
_U32 = struct.Struct("<I")
#: The reset request envwire's client sends for ``reset()``: packet 7, its options' JSON.
_RESET_JSON = json.dumps({"seed": None, "options": None}, separators=(",", ":")).encode()
_RESET_PLAIN = bytes([_RESET]) + _U32.pack(len(_RESET_JSON)) + _RESET_JSON
_TAIL = struct.Struct("<d??")
_EMPTY_INFO = _U32.pack(2) + b"{}"


def _tensor_code() -> int:
    """The dtype code gym-socket's extended path gives float32 (taken from the codec once,
    so that the baseline writes the same bytes)."""
    from envwire.protocols.gymsocket.packets import CODE_BY_DTYPE

    return int(CODE_BY_DTYPE[np.dtype("<f4")])


def _minimal_main(conn: Any, pin: int | None) -> None:
    """The baseline server: one connection at a time; handshake, extended reset and step."""
    if pin is not None:
        os.sched_setaffinity(0, {pin})
    listener = socket.create_server(("127.0.0.1", 0))
    conn.send(listener.getsockname()[1])
    env = gymnasium.make("CartPole-v1")
    # status 0, kind 2 (tensor), field length 25: dtype code, ndim 1, dim 4, then 16 bytes
    head = b"\x00\x02" + struct.pack("<IBII", 25, _tensor_code(), 1, 4)
    tail = _TAIL.pack
    while True:
        client, _ = listener.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        fixed = memoryview(bytearray(5))
        if not _read(client, fixed):
            client.close()
            continue
        name = bytearray(_U32.unpack_from(fixed, 1)[0])
        _read(client, memoryview(name))
        client.sendall(b"\x00\x00\x00\x00")  # no error: the session is open
        request = bytearray(7)
        view = memoryview(request)
        while _read(client, view):
            if request[0] == _STEP:  # action type 0, one JSON digit
                obs, reward, terminated, truncated, _ = env.step(request[6] - 48)
                client.sendall(
                    head + obs.tobytes() + tail(reward, terminated, truncated) + _EMPTY_INFO
                )
            else:  # the reset: its options' JSON, 29 bytes here, 2 of them already read
                rest = bytearray(_U32.unpack_from(request, 1)[0] - 2)
                _read(client, memoryview(rest))
                options = json.loads(bytes(request[5:]) + rest)
                obs, _ = env.reset(seed=options["seed"])
                client.sendall(head + obs.tobytes() + _EMPTY_INFO)
        client.close()


@contextlib.contextmanager
def minimal_server(pin: int | None) -> Iterator[tuple[int, int]]:
    """The baseline server in a process of its own: yields (port, pid)."""
    parent, child = multiprocessing.Pipe()
    ctx = multiprocessing.get_context("spawn")
    process = ctx.Process(target=_minimal_main, args=(child, pin), daemon=True)
    process.start()
    try:
        if not parent.poll(60):
            raise RuntimeError("the minimal server did not start")
        assert process.pid is not None
        yield int(parent.recv()), process.pid
    finally:
        process.kill()
        process.join(5)


class MinimalClient:
    """The baseline client: the step's 7 bytes out, the 47-byte reply read into one buffer."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(bytes([_FLAGS]) + _U32.pack(11) + b"CartPole-v1")
        answer = bytearray(4)
        if not _read(self.sock, memoryview(answer)) or answer != b"\x00\x00\x00\x00":
            raise ConnectionError(f"the handshake was refused: {bytes(answer)!r}")
        self.reply = bytearray(47)
        self.view = memoryview(self.reply)
        self.reset_reply = memoryview(bytearray(37))

    def reset(self) -> np.ndarray[Any, Any]:
        self.sock.sendall(_RESET_PLAIN)
        if not _read(self.sock, self.reset_reply):
            raise ConnectionError("the server closed the connection")
        return np.frombuffer(self.reset_reply, np.float32, 4, 15)

    def step(self) -> tuple[np.ndarray[Any, Any], float, bool, bool]:
        self.sock.sendall(_STEP_ONE)
        if not _read(self.sock, self.view):
            raise ConnectionError("the server closed the connection")
        reward, terminated, truncated = _TAIL.unpack_from(self.reply, 31)
        return np.frombuffer(self.reply, np.float32, 4, 15), reward, terminated, truncated

    def close(self) -> None:
        self.sock.close()


def _cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time, in seconds."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stepping(
    step: Callable[[], bool], reset: Callable[[], object], seconds: float, pid: int
) -> dict[str, float]:
    """Steps ``seconds`` long (resetting when an episode ends): steps/s, and the client's and
    the server's CPU µs per step."""
    for _ in range(200):  # warm up
        if step():
            reset()
    count = 0
    began, client, server = time.perf_counter(), time.process_time(), _cpu_seconds(pid)
    deadline = began + seconds
    while True:
        if step():
            reset()
        count += 1
        if count % 64 == 0 and time.perf_counter() >= deadline:
            break
    wall = time.perf_counter() - began
    client_us = 1e6 * (time.process_time() - client) / count
    server_us = 1e6 * (_cpu_seconds(pid) - server) / count
    return {"rate": count / wall, "client": client_us, "server": server_us}


def _check_same_bytes(minimal_port: int, envwire_port: int) -> int:
    """Both servers answer the handshake, a seeded reset and 8 steps of action 1 from the
    same state with the same bytes; returns the step reply's length."""
    seeded = b'{"seed":0,"options":null}'
    requests = [bytes([_RESET]) + _U32.pack(len(seeded)) + seeded] + [_STEP_ONE] * 8
    replies: list[list[bytes]] = []
    for port in (minimal_port, envwire_port):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.settimeout(30)
        sock.sendall(bytes([_FLAGS]) + _U32.pack(11) + b"CartPole-v1")
        got = [_recv_exactly(sock, 4)]
        for request, size in zip(requests, [37] + [47] * 8, strict=True):
            sock.sendall(request)
            got.append(_recv_exactly(sock, size))
        sock.close()
        replies.append(got)
    if replies[0] != replies[1]:
        raise AssertionError(f"the replies differ:\n{replies[0]}\n{replies[1]}")
    return len(replies[0][-1])


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray(size)
    if not _read(sock, memoryview(data)):
        raise ConnectionError("closed")
    return bytes(data)


def _chosen_cpu(choice: str) -> int | None:
    """``--cpu``: ``last`` (the default: the highest CPU this process may use), ``none`` (no
    pinning), or a CPU's number."""
    if choice == "none":
        return None
    return max(os.sched_getaffinity(0)) if choice == "last" else int(choice)


def _pin_threads(pid: int, cpu: int) -> None:
    """Every thread of process ``pid`` (and the threads they start later) onto ``cpu``."""
    for task in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(task), {cpu})


def main() -> int:
    args, settings = parse_settings(
        "gym-socket's one step beside a minimal Python implementation of the same bytes",
        extra=[("--cpu", str, "last")],
    )
    pin = _chosen_cpu(args.cpu)
    if pin is not None:
        os.sched_setaffinity(0, {pin})
    names = {
        "minimal": "minimal Python: CartPole one step, same bytes",
        "envwire": "envwire: CartPole one step, extended path",
    }
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    with minimal_server(pin) as (port, pid), ServerProcess(["CartPole-v1"]) as server:
        assert server.process is not None
        if pin is not None:
            _pin_threads(server.process.pid, pin)
        server_pid = server.process.pid
        reply_bytes = _check_same_bytes(port, server.ports["gym-socket"])
        minimal = MinimalClient(port)
        minimal.reset()
        remote = envwire.make(server.url("gym-socket", "CartPole-v1"))
        remote.reset(seed=0)

        def remote_step() -> bool:
            _, _, terminated, truncated, _ = remote.step(1)
            return bool(terminated or truncated)

        def minimal_step() -> bool:
            _, _, terminated, truncated = minimal.step()
            return bool(terminated or truncated)

        cases = {
            "minimal": lambda: _stepping(minimal_step, minimal.reset, settings.seconds, pid),
            "envwire": lambda: _stepping(remote_step, remote.reset, settings.seconds, server_pid),
        }
        try:
            for _ in range(settings.runs):
                for key, measure in cases.items():
                    rounds[key].append(measure())
        finally:
            minimal.close()
            remote.close()
    results = _results(names, rounds, reply_bytes)
    report = {"machine": machine() | {"pinned_cpu": pin}, "results": [vars(r) for r in results]}
    print_table(report)
    return 0


def _results(
    names: dict[str, str], rounds: dict[str, list[dict[str, float]]], reply_bytes: int
) -> list[Result]:
    """Steps/s and CPU per step of each pair; envwire's over the baseline's, per round."""
    results = []
    med = {
        key: {k: statistics.median(r[k] for r in rounds[key]) for k in ("rate", "client", "server")}
        for key in rounds
    }
    for key, name in names.items():
        results.append(Result(name, med[key]["rate"], notes={"reply_bytes": reply_bytes}))
        for side in ("client", "server"):
            results.append(Result(f"  CPU per step, {side}", med[key][side], "us"))
    totals = [
        (e["client"] + e["server"]) / (b["client"] + b["server"])
        for e, b in zip(rounds["envwire"], rounds["minimal"], strict=True)
    ]
    rates = [
        e["rate"] / b["rate"] for e, b in zip(rounds["envwire"], rounds["minimal"], strict=True)
    ]
    results.append(
        Result(
            "envwire over minimal: steps/s",
            med["envwire"]["rate"],
            baseline=names["minimal"],
            ratio=statistics.median(rates),
            spread=(min(rates), max(rates)),
        )
    )
    total = med["envwire"]["client"] + med["envwire"]["server"]
    results.append(
        Result(
            "envwire over minimal: CPU per step, client + server",
            total,
            "us",
            baseline=names["minimal"],
            ratio=statistics.median(totals),
            spread=(min(totals), max(totals)),
        )
    )
    return results


if __name__ == "__main__":
    sys.exit(main())
