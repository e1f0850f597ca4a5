"""``make_vec(url, 8, workers=2)`` of a CPU-bound env beside a minimal hand-written Python
implementation of the same bytes, and beside in-process ``SyncVectorEnv``.

Run: ``python benchmarks/bench_parallel_minimal.py [--seconds S] [--runs R] [--quick]``.

The case is the suite's ``parallel`` one (``bench_parallel``): :class:`BurnEnv` (a step of
200 µs of pure-Python CPU) served by ``envwire serve`` in worker processes, the client
``envwire.make_vec(url, 8, workers=2)``, its 8 copies split over 2 processes. The baseline is
the least Python that does the same over gym-socket's vector path with envwire's client flags:

- a server that answers the handshake (with its options), the vector reset and the vector
  step and nothing else, reading each request into a preallocated buffer, writing each half of
  the actions to one of two worker processes over a pipe as a fixed frame (a tag byte and the
  actions' 32 bytes), reading each one's fixed 104-byte reply (observations, rewards,
  terminations, truncations) and writing the reply from fixed headers and those bytes with one
  ``sendall``;
- two worker processes, each stepping Gymnasium's ``SyncVectorEnv`` of 4 BurnEnvs (seeds
  offset as envwire's are, so the 8 copies equal one ``SyncVectorEnv``);
- a client that sends a fixed header and the actions' bytes with one ``sendall``, reads the
  reply into one buffer and copies the four arrays out of it with ``np.frombuffer``.

Before the rounds, both servers answer the same requests from the same state, and the
benchmark checks that their replies are the same bytes. The figures: env steps/s over
``SyncVectorEnv``'s, and CPU per batch of each process (client, server, each worker: ``/proc``).
Where envwire misses its target (1.3x ``SyncVectorEnv`` on 2 cores) and the baseline misses it
too, the target is bounded by the machine.
"""

from __future__ import annotations

import contextlib
import functools
import json
import multiprocessing
import os
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

import envwire
from bench_pool import calibrate
from envwire.testing import ServerProcess
from envwire.testing.envs import BurnEnv
from harness import (
    Result,
    alternate,
    cpu_seconds,
    descendants,
    machine,
    parse_settings,
    print_table,
    serve_forever,
    spawned_server,
)
from harness import read_exactly as _read
from minimal_cases import VectorClient, read_vector_hello, vector_bytes

__all__ = ["PARALLEL_LAYOUT", "main", "parallel_requests", "parallel_server"]

N, HALF = 8, 4
BURN_STEP_US = 200.0
HORIZON = 2**62
ENV_ID = b"bench/Burn"
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_EMPTY_INFO = _U32.pack(2) + b"{}"
_LAYOUT = PARALLEL_LAYOUT = vector_bytes(ENV_ID, N, 2, np.int64, 2)
_HELLO, _STEP_HEAD, REPLY = _LAYOUT.hello, _LAYOUT.step_head, _LAYOUT.reply
_OBS_HEAD, _REW_HEAD, _BOOL_HEAD = _LAYOUT.obs_head, _LAYOUT.rew_head, _LAYOUT.bool_head
_RESET_REPLY = _LAYOUT.reset_reply
_VRESET, _VSTEP = 9, 10
#: A worker's step reply: 4 observations of 2 int64, 4 rewards, 4 terminations, 4 truncations.
_SLICE_OBS, _SLICE_REW, _SLICE_REPLY = 16 * HALF, 8 * HALF, 16 * HALF + 8 * HALF + 2 * HALF


def _reset_request(seed: int | None) -> bytes:
    options = json.dumps({"seed": seed, "options": None}, separators=(",", ":")).encode()
    return bytes([_VRESET]) + _U32.pack(len(options)) + options


def parallel_requests(steps: int) -> list[tuple[bytes, int]]:
    """The handshake, a reset with seed 0 and ``steps`` steps of varied actions, with the
    size of each reply: what both servers must answer alike."""
    rng = np.random.default_rng(0)
    step = [_STEP_HEAD + rng.integers(0, 2, N).astype(np.int64).tobytes() for _ in range(steps)]
    return [(_HELLO, 4), (_reset_request(0), _RESET_REPLY), *[(s, REPLY) for s in step]]


# --- the worker processes -------------------------------------------------------------------


def _worker_main(sock: socket.socket, work: int) -> None:
    """One worker: a SyncVectorEnv of 4 BurnEnvs, stepped by fixed frames on ``fd``:
    ``S`` + 4 int64 actions (reply: the 104 bytes of a step), ``R`` + an int64 seed, -1 for
    none (reply: the 64 bytes of the observations)."""
    fd = sock.detach()
    envs = gymnasium.vector.SyncVectorEnv(
        [functools.partial(BurnEnv, work=work, horizon=HORIZON)] * HALF
    )
    call = bytearray(1 + 8 * HALF)
    view = memoryview(call)
    actions = np.frombuffer(call, np.int64, HALF, 1)
    while _read_fd(fd, view):
        if call[0] == ord("S"):
            obs, rewards, terminated, truncated, _ = envs.step(actions)
            reply = b"".join((obs.data, rewards.data, terminated.data, truncated.data))
        else:
            (seed,) = _I64.unpack_from(call, 1)
            obs, _ = envs.reset(seed=None if seed < 0 else seed)
            reply = obs.tobytes()
        os.write(fd, reply)


def _read_fd(fd: int, view: memoryview) -> bool:
    """Fill ``view`` from ``fd``; False at EOF."""
    got = 0
    while got < len(view):
        size = os.readv(fd, [view[got:]])
        if not size:
            return False
        got += size
    return True


# --- the server -----------------------------------------------------------------------------


def _serve(client: socket.socket, fds: list[int]) -> None:
    """One make_vec connection: the handshake (with its options), vector resets and steps."""
    if not read_vector_hello(client):
        return
    header = bytearray(6)
    header_view = memoryview(header)
    body = bytearray(9 + 8 * N)  # a step's action field
    body_view = memoryview(body)
    calls = [bytearray(1 + 8 * HALF) for _ in fds]
    for call in calls:
        call[0] = ord("S")
    replies = [memoryview(bytearray(_SLICE_REPLY)) for _ in fds]
    first, second = replies
    r_obs, r_rew, r_term = _SLICE_OBS, _SLICE_OBS + _SLICE_REW, _SLICE_OBS + _SLICE_REW + HALF
    while _read(client, header_view):
        if header[0] == _VSTEP:
            _read(client, body_view)
            for i, (fd, call) in enumerate(zip(fds, calls, strict=True)):
                start = 9 + 8 * HALF * i
                call[1:] = body_view[start : start + 8 * HALF]
                os.write(fd, call)
            for fd, reply in zip(fds, replies, strict=True):
                _read_fd(fd, reply)
            client.sendall(
                b"".join(
                    (
                        _OBS_HEAD,
                        first[:r_obs],
                        second[:r_obs],
                        _REW_HEAD,
                        first[r_obs:r_rew],
                        second[r_obs:r_rew],
                        _BOOL_HEAD,
                        first[r_rew:r_term],
                        second[r_rew:r_term],
                        _BOOL_HEAD,
                        first[r_term:],
                        second[r_term:],
                        _EMPTY_INFO,
                    )
                )
            )
        else:  # the reset: its options' JSON, 1 byte of it already read
            rest = bytearray(_U32.unpack_from(header, 1)[0] - 1)
            _read(client, memoryview(rest))
            seed = json.loads(bytes(header[5:]) + rest)["seed"]
            for i, fd in enumerate(fds):
                # the call's fixed size: the seed, padded (-1: none)
                os.write(fd, b"R" + _I64.pack(-1 if seed is None else seed + HALF * i) + bytes(24))
            parts = [memoryview(bytearray(_SLICE_OBS)) for _ in fds]
            for fd, part in zip(fds, parts, strict=True):
                _read_fd(fd, part)
            client.sendall(b"".join((_OBS_HEAD, *parts, _EMPTY_INFO)))


def _server_main(conn: Any, work: int) -> None:
    ctx = multiprocessing.get_context("spawn")
    fds = []
    for _ in range(2):
        mine, theirs = socket.socketpair()
        ctx.Process(target=_worker_main, args=(theirs, work), daemon=True).start()
        theirs.close()
        fds.append(mine.detach())
    serve_forever(conn, functools.partial(_serve, fds=fds))


def parallel_server(work: int) -> contextlib.AbstractContextManager[tuple[int, int]]:
    """The baseline server (and its two workers) in processes of their own: yields (port,
    the server's pid)."""
    # not a daemon: daemons may not start processes (it and its workers are killed at the end)
    return spawned_server(_server_main, (work,), "minimal parallel server", daemon=False)


# --- measuring ------------------------------------------------------------------------------


def _batches(
    env: Any, actions: np.ndarray[Any, Any], seconds: float, pid: int | None
) -> Callable[[], dict[str, float]]:
    """Batches for ``seconds``: env steps/s, and CPU µs per batch of the client, of the server
    (``pid``) and of the busiest and the other of its other processes (the workers)."""

    def measure() -> dict[str, float]:
        for _ in range(50):
            env.step(actions)
        others = [] if pid is None else [p for p in descendants(pid) if cpu_seconds(p) > 0]
        pids = ([] if pid is None else [pid]) + others
        before = {p: cpu_seconds(p) for p in pids}
        count, began, client = 0, time.perf_counter(), time.process_time()
        while time.perf_counter() - began < seconds:
            env.step(actions)
            count += 1
        wall = time.perf_counter() - began
        figures = {"rate": N * count / wall, "client": 1e6 * (time.process_time() - client) / count}
        spent = [1e6 * (cpu_seconds(p) - before[p]) / count for p in pids]
        if pid is not None:
            figures["server"] = spent[0]
            for i, value in enumerate(sorted(spent[1:], reverse=True)[:2]):
                figures[f"worker {i + 1}"] = value
        return figures

    return measure


def _check_requests(requests: list[tuple[bytes, int]], ports: tuple[int, int]) -> None:
    """Both servers answer ``requests`` (each with the size of its reply) with the same bytes."""
    replies: list[list[bytes]] = []
    for port in ports:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.settimeout(60)
        got = []
        for request, size in requests:
            sock.sendall(request)
            data = memoryview(bytearray(size))
            if not _read(sock, data):
                raise ConnectionError("closed")
            got.append(bytes(data))
        sock.close()
        replies.append(got)
    if replies[0] != replies[1]:
        differ = [i for i, (a, b) in enumerate(zip(*replies, strict=True)) if a != b]
        raise AssertionError(f"the replies to requests {differ} differ")


def main() -> int:
    _, settings = parse_settings(
        "make_vec(url, 8, workers=2) of a 200 us env beside a minimal Python implementation of "
        "the same bytes and in-process SyncVectorEnv"
    )
    work = calibrate(BURN_STEP_US)
    names = {
        "sync": f"in-process SyncVectorEnv N={N}, BurnEnv {BURN_STEP_US:g} us",
        "minimal": "minimal Python: 2 worker processes, same bytes",
        "envwire": "envwire: make_vec workers=2",
    }
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "bench.toml"
        config.write_text(
            '[[env]]\nid = "bench/Burn"\nentry_point = "envwire.testing.envs:BurnEnv"\n'
            f"kwargs = {{ work = {work}, horizon = {HORIZON} }}\n"
        )
        with (
            ServerProcess(["CartPole-v1"], ["--config", str(config)]) as server,
            parallel_server(work) as (port, pid),
        ):
            assert server.process is not None
            _check_requests(parallel_requests(16), (port, server.ports["gym-socket"]))
            burn = functools.partial(BurnEnv, work=work, horizon=HORIZON)
            local = gymnasium.vector.SyncVectorEnv([burn] * N)
            minimal = VectorClient(port, _LAYOUT)
            remote = envwire.make_vec(server.url("gym-socket", "bench/Burn"), N, workers=2)
            actions = np.zeros(N, np.int64)
            for env in (local, minimal, remote):
                env.reset(seed=0)
            cases = {
                "sync": _batches(local, actions, settings.seconds, None),
                "minimal": _batches(minimal, actions, settings.seconds, pid),
                "envwire": _batches(remote, actions, settings.seconds, server.process.pid),
            }
            try:
                rounds = alternate(cases, settings.runs)
            finally:
                for env in (local, minimal, remote):
                    env.close()
    results = []
    for key, name in names.items():
        rates = [r["rate"] for r in rounds[key]]
        if key == "sync":
            results.append(Result(name, statistics.median(rates)))
        else:
            ratios = [r / s["rate"] for r, s in zip(rates, rounds["sync"], strict=True)]
            results.append(
                Result(
                    name,
                    statistics.median(rates),
                    baseline=names["sync"],
                    ratio=statistics.median(ratios),
                    spread=(min(ratios), max(ratios)),
                    target=1.3,
                )
            )
        for side in ("client", "server", "worker 1", "worker 2"):
            if side in rounds[key][0]:
                value = statistics.median(r[side] for r in rounds[key])
                results.append(Result(f"  CPU per batch, {side}", value, "us"))
    print_table({"machine": machine(), "results": [vars(r) for r in results]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
