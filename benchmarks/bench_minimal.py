"""gym-socket's one step, vector step, SB3's VecEnv and frames, each beside a minimal
hand-written Python implementation of the same bytes.

Run: ``python benchmarks/bench_minimal.py [--seconds S] [--runs R] [--quick] [--cpu N|none]
[--batches 8,16,64] [--cases step,vector,sb3,frames]`` (the make_vec sizes, 8 by default; the
cases to run, all by default).

The one-step baseline is the least Python that can serve and step CartPole over gym-socket's
extended path with envwire's own client flags (``ERRORS | MONITOR_REPLY | EXTENDED``): a server
that answers the handshake, the extended reset and the extended step and nothing else
(blocking ``recv_into`` a preallocated buffer, CartPole really stepped, the reply built from a
fixed header, the observation's bytes and one ``struct``), and a client that sends the step's
7 bytes with one ``sendall`` and reads the 47-byte reply with ``recv_into``, ``np.frombuffer``
and one ``struct``. :mod:`minimal_cases` holds the baselines of two more cases written the same
way: ``make_vec(url, 8)`` of CartPole (beside in-process ``SyncVectorEnv``), SB3's
``make_vec_env(url, 8)`` of CartPole (beside SB3's ``DummyVecEnv``; needs the ``sb3`` extra),
and 84x84x4 uint8 frames one step (beside the plain echo of the same bytes, as the suite
measures it). Before the
rounds of each case, both servers answer the same requests from the same state, and the
benchmark checks that their replies are the same bytes.

envwire's side is a real ``envwire serve`` and envwire's own clients. Each pair steps with one
fixed action (resetting when an episode ends), in alternating rounds. The figures: steps/s,
and CPU per step (or batch) of the client and of the server (``/proc``), with the ratio of
envwire's total CPU to the baseline's (the one-step target: at most 1.5, goal 1.25). By
default every process runs on one core (``sched_setaffinity``, every thread), so that their
CPU time is the step's whole cost and the wall time follows it; ``--cpu N`` picks the core,
``--cpu none`` lets them float.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import operator
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
from harness import (
    EchoServer,
    Result,
    Settings,
    alternate,
    case_names,
    cpu_seconds,
    echo_rate,
    machine,
    parse_settings,
    print_table,
)
from harness import read_exactly as _read
from minimal_cases import (
    FRAMES_REPLY,
    SB3_FIXED,
    SB3_N,
    VECTOR_N,
    FramesClient,
    Sb3Client,
    VectorClient,
    cartpole_vector,
    check_requests,
    frames_requests,
    minimal_case_server,
    sb3_requests,
    vector_requests,
)

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


def _stepping(
    step: Callable[[], bool], reset: Callable[[], object], seconds: float, pid: int | None
) -> dict[str, float]:
    """Steps ``seconds`` long (resetting when an episode ends): steps/s, and the client's and
    the server's CPU µs per step."""
    for _ in range(200):  # warm up
        if step():
            reset()
    count = 0
    server = 0.0 if pid is None else cpu_seconds(pid)
    began, client = time.perf_counter(), time.process_time()
    deadline = began + seconds
    while True:
        if step():
            reset()
        count += 1
        if count % 64 == 0 and time.perf_counter() >= deadline:
            break
    wall = time.perf_counter() - began
    client_us = 1e6 * (time.process_time() - client) / count
    server_us = 0.0 if pid is None else 1e6 * (cpu_seconds(pid) - server) / count
    return {"rate": count / wall, "client": client_us, "server": server_us}


def _one_step_requests(steps: int) -> list[tuple[bytes, int]]:
    """The handshake, a seeded reset and ``steps`` steps of action 1, with each reply's size."""
    seeded = b'{"seed":0,"options":null}'
    hello = bytes([_FLAGS]) + _U32.pack(11) + b"CartPole-v1"
    reset = bytes([_RESET]) + _U32.pack(len(seeded)) + seeded
    return [(hello, 4), (reset, 37), *[(_STEP_ONE, 47)] * steps]


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
        "gym-socket's one step, vector step and frames beside minimal Python implementations "
        "of the same bytes",
        extra=[
            ("--cpu", str, "last"),
            ("--batches", str, str(VECTOR_N)),
            ("--cases", case_names(CASES), CASES),
        ],
    )
    cases = args.cases
    pin = _chosen_cpu(args.cpu)
    if pin is not None:
        os.sched_setaffinity(0, {pin})
    results: list[Result] = []
    with EchoServer() as echo, ServerProcess(["CartPole-v1", FRAMES_ENV]) as server:
        assert server.process is not None
        if pin is not None:
            _pin_threads(server.process.pid, pin)
            _pin_threads(_pid(echo), pin)
        if "step" in cases:
            results += _one_step(settings, server, pin)
        if "vector" in cases:
            for n in (int(size) for size in args.batches.split(",")):
                results += _vector(settings, server, pin, n)
        if "sb3" in cases:
            results += _sb3(settings, server, pin)
        if "frames" in cases:
            results += _frames(settings, server, echo, pin)
    report = {"machine": machine() | {"pinned_cpu": pin}, "results": [vars(r) for r in results]}
    print_table(report)
    return 0


#: The cases, in the order they run (``--cases`` picks some).
CASES = ("step", "vector", "sb3", "frames")

#: The frames env as the suite serves it.
FRAMES_ENV = "bench/Frames-v0=envwire.testing.envs:FramesEnv@inline"

Rounds = dict[str, list[dict[str, float]]]


def _one_step(settings: Settings, server: ServerProcess, pin: int | None) -> list[Result]:
    """CartPole one step: the baseline pair beside envwire's server and ``envwire.make``."""
    names = {
        "minimal": "minimal Python: CartPole one step, same bytes",
        "envwire": "envwire: CartPole one step, extended path",
    }
    with minimal_server(pin) as (port, pid):
        check_requests(_one_step_requests(8), port, server.ports["gym-socket"])
        minimal = MinimalClient(port)
        minimal.reset()
        remote = envwire.make(server.url("gym-socket", "CartPole-v1"))
        remote.reset(seed=0)
        server_pid = _pid(server)

        cases = _one_step_cases(remote, minimal, settings.seconds, pid, server_pid)
        try:
            rounds = alternate(cases, settings.runs)
        finally:
            minimal.close()
            remote.close()
    return _results(names, rounds, {"reply_bytes": 47}, "step")


def _vector(
    settings: Settings, server: ServerProcess, pin: int | None, n: int = VECTOR_N
) -> list[Result]:
    """make_vec N=n of CartPole: the baseline pair and envwire's, beside in-process
    SyncVectorEnv; the rates in env steps/s, the CPU per batch."""
    names = {
        "sync": f"in-process SyncVectorEnv N={n}",
        "minimal": f"minimal Python: CartPole vector step N={n}, same bytes",
        "envwire": f"envwire: make_vec CartPole N={n}",
    }
    url = server.url("gym-socket", "CartPole-v1")
    with minimal_case_server("vector", pin) as (port, pid):
        check_requests(vector_requests(32, n), port, server.ports["gym-socket"])
        local = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * n)
        local.reset(seed=0)
        minimal = VectorClient(port, cartpole_vector(n))
        minimal.reset(seed=0)
        remote = envwire.make_vec(url, n)
        remote.reset(seed=0)
        envs: dict[str, tuple[gymnasium.vector.VectorEnv[Any, Any, Any] | VectorClient, int | None]]
        envs = {"sync": (local, None), "minimal": (minimal, pid), "envwire": (remote, _pid(server))}
        try:
            rounds = _batch_rounds(envs, np.zeros(n, np.int64), settings)
        finally:
            for env, _ in envs.values():
                env.close()
    return _results(names, rounds, {"reply_bytes": cartpole_vector(n).reply}, "batch", "sync")


def _sb3(settings: Settings, server: ServerProcess, pin: int | None) -> list[Result]:
    """SB3's VecEnv N=8 of CartPole (actions ``i % 2``): the baseline pair and envwire's
    ``make_vec_env``, beside SB3's local DummyVecEnv; no results without the sb3 extra."""
    try:
        from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

        from envwire.adapters.training.sb3 import make_vec_env
    except ImportError as exc:
        print(f"SB3 case skipped: the sb3 extra is not installed ({exc})")
        return []
    n = SB3_N
    names = {
        "dummy": f"SB3 DummyVecEnv, local, N={n}",
        "minimal": f"minimal Python: SB3 VecEnv N={n}, same bytes",
        "envwire": f"envwire: SB3 make_vec_env CartPole N={n}",
    }
    with minimal_case_server("sb3", pin) as (port, pid):
        check_requests(sb3_requests(64), port, server.ports["gym-socket"])
        local = DummyVecEnv([lambda: gymnasium.make("CartPole-v1")] * n)
        minimal = Sb3Client(port)
        remote = make_vec_env(server.url("gym-socket", "CartPole-v1"), n, monitor=False)
        for vec_env in (local, remote):
            vec_env.seed(0)
            vec_env.reset()
        minimal.reset(0)
        envs: dict[str, tuple[VecEnv | Sb3Client, int | None]] = {
            "dummy": (local, None),
            "minimal": (minimal, pid),
            "envwire": (remote, _pid(server)),
        }
        try:
            rounds = _batch_rounds(envs, np.arange(n) % 2, settings)
        finally:
            for env, _ in envs.values():
                env.close()
    return _results(names, rounds, {"reply_bytes": f">= {SB3_FIXED}"}, "batch", "dummy")


def _batch_rounds(
    envs: dict[str, tuple[Any, int | None]], actions: np.ndarray[Any, Any], settings: Settings
) -> Rounds:
    """Rounds of each vector env's steps with ``actions`` (with its server's pid, None for a
    local one): env steps/s, and CPU per batch."""

    def batches(env: Any, server_pid: int | None) -> Callable[[], dict[str, float]]:
        def step() -> bool:
            env.step(actions)
            return False

        return lambda: _stepping(step, env.reset, settings.seconds, server_pid)

    rounds = alternate({key: batches(*pair) for key, pair in envs.items()}, settings.runs)
    for measured in rounds.values():
        for figures in measured:
            figures["rate"] *= len(actions)
    return rounds


def _frames(
    settings: Settings, server: ServerProcess, echo: EchoServer, pin: int | None
) -> list[Result]:
    """84x84x4 uint8 frames one step: the baseline pair and envwire's, beside the echo of the
    same bytes."""
    names = {
        "echo": "echo: 84x84x4 frame step bytes",
        "minimal": "minimal Python: 84x84x4 frames one step, same bytes",
        "envwire": "envwire: 84x84x4 uint8 frames one step",
    }
    sizes = (len(frames_requests(1)[-1][0]), FRAMES_REPLY)
    with minimal_case_server("frames", pin) as (port, pid):
        check_requests(frames_requests(8), port, server.ports["gym-socket"])
        minimal = FramesClient(port)
        minimal.reset()
        remote = envwire.make(server.url("gym-socket", "bench/Frames-v0"))
        remote.reset(seed=0)
        server_pid = _pid(server)

        cases = {
            "echo": lambda: {"rate": echo_rate(echo.port, *sizes, settings.seconds)},
            **_one_step_cases(remote, minimal, settings.seconds, pid, server_pid),
        }
        try:
            rounds = alternate(cases, settings.runs)
        finally:
            minimal.close()
            remote.close()
    notes = {"request_bytes": sizes[0], "reply_bytes": sizes[1]}
    return _results(names, rounds, notes, "step", "echo")


def _one_step_cases(
    remote: Any, minimal: Any, seconds: float, pid: int | None, server_pid: int | None
) -> dict[str, Callable[[], dict[str, float]]]:
    """The rounds' cases of one step with action 1: the minimal client against its server
    (``pid``) and envwire's env against envwire's (``server_pid``)."""

    def remote_step() -> bool:
        _, _, terminated, truncated, _ = remote.step(1)
        return bool(terminated or truncated)

    def minimal_step() -> bool:
        _, _, terminated, truncated = minimal.step()
        return bool(terminated or truncated)

    return {
        "minimal": lambda: _stepping(minimal_step, minimal.reset, seconds, pid),
        "envwire": lambda: _stepping(remote_step, remote.reset, seconds, server_pid),
    }


def _pid(server: ServerProcess | EchoServer) -> int:
    assert server.process is not None and server.process.pid is not None
    return server.process.pid


def _ratios(
    rounds: Rounds, key: str, base: str, figure: Callable[[dict[str, float]], float]
) -> Result:
    """``key``'s figure over ``base``'s, per round: a Result holding the median and spread."""
    values = [figure(a) / figure(b) for a, b in zip(rounds[key], rounds[base], strict=True)]
    return Result("", 0.0, ratio=statistics.median(values), spread=(min(values), max(values)))


def _results(
    names: dict[str, str],
    rounds: Rounds,
    notes: dict[str, Any],
    per: str,
    base: str | None = None,
) -> list[Result]:
    """Steps/s and CPU per ``per`` of each pair, each pair's steps/s over ``base``'s (a case
    with no server), and envwire's steps/s and CPU over the baseline pair's, per round."""
    results = []
    med = {
        key: {k: statistics.median(r[k] for r in rounds[key]) for k in rounds[key][0]}
        for key in rounds
    }
    rate = operator.itemgetter("rate")

    def cpu(figures: dict[str, float]) -> float:
        return figures["client"] + figures["server"]

    for key, name in names.items():
        if base is None or key == base:
            results.append(Result(name, med[key]["rate"], notes=notes))
        else:
            over = _ratios(rounds, key, base, rate)
            results.append(
                Result(
                    name,
                    med[key]["rate"],
                    baseline=names[base],
                    ratio=over.ratio,
                    spread=over.spread,
                    notes=notes,
                )
            )
        for side in ("client", "server"):
            if side in med[key] and (key != base or med[key][side]):
                results.append(Result(f"  CPU per {per}, {side}", med[key][side], "us"))
    over = _ratios(rounds, "envwire", "minimal", rate)
    results.append(
        Result(
            "envwire over minimal: steps/s",
            med["envwire"]["rate"],
            baseline=names["minimal"],
            ratio=over.ratio,
            spread=over.spread,
        )
    )
    over = _ratios(rounds, "envwire", "minimal", cpu)
    results.append(
        Result(
            f"envwire over minimal: CPU per {per}, client + server",
            cpu(med["envwire"]),
            "us",
            baseline=names["minimal"],
            ratio=over.ratio,
            spread=over.spread,
        )
    )
    return results


if __name__ == "__main__":
    sys.exit(main())
