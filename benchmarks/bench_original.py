"""gym-socket: envwire's server beside the original gym-socket-api server, on its own protocol,
and beside a minimal hand-written Python server of the same bytes.

Run: ``python benchmarks/bench_original.py --original DIR --python PATH [--seconds S] [--runs R]
[--quick] [--cpu N]``. ``DIR`` is a checkout of the original server (the public ``gym-socket-api``
repository: ``__main__.py``, ``server.py``, ``handler.py``, ``proto.py``) and ``PATH`` a Python
that can run it (the old ``gym`` package and numpy < 2 installed). Without both, or when the
checkout or the Python is missing, it prints why it skips and exits 0 (CI has neither).

Three servers run in processes of their own, with their default settings: the original (a
handler process per connection), ``envwire serve``, and the minimal server of
:mod:`minimal_original` (the least Python that answers envwire's client with the seed's bytes
and steps a real CartPole). The client is this process: envwire's client with handshake flags 0
(the seed's JSON path, the only one the original speaks), stepping CartPole one step at a time,
the same client against each server in alternating rounds. The figures: each server's steps/s
and its ratio over the original's (target: 1.2 for envwire), with the spread, and the CPU per
step of the client and of each server (``/proc/<pid>/stat``, user + system, over the round; a
server's child processes included). Where envwire misses 1.2 and the minimal server misses it
too, the target is bounded by what any Python server of these bytes costs. The processes float
over the cores by default; ``--cpu N`` puts the client and every server (their threads and
child processes) on CPU ``N``, so that a step's wall time is the CPU all of them spend on it.

Before the rounds, the minimal server and envwire's answer the same flags-0 session (spaces, a
reset, 64 steps, a reset after each episode's end) from the same seeded state, and the benchmark
checks that the replies are the same bytes; then one handshake, reset and step go to each of the
three servers over a plain socket, to check that the original answers our client's bytes with
its defaults, and to report the bytes of each server's replies (the same layout from all; the
observation's JSON text, and so the reply's length, varies by a byte or two with the values).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import envwire
from envwire import messages as m
from envwire.protocols.gymsocket import ClientConnection, Flags
from envwire.protocols.gymsocket.packets import NeedData
from envwire.testing import ServerProcess
from harness import (
    Result,
    Settings,
    alternate,
    compare,
    cpu_seconds,
    descendants,
    machine,
    print_table,
    step_loop,
)
from minimal_original import SEEDED_ENV, check_same_bytes, minimal_original_server

__all__ = ["main", "original_server", "step_bytes"]

_HERE = Path(__file__).resolve().parent

#: The files a checkout of the original server has.
_ORIGINAL_FILES = ("__main__.py", "server.py", "handler.py", "proto.py")


def _skip_reason(original: str | None, python: str | None) -> str | None:
    """Why the comparison cannot run here, or None when it can."""
    if original is None or python is None:
        return "needs --original DIR (a gym-socket-api checkout) and --python PATH (its venv)"
    missing = [f for f in _ORIGINAL_FILES if not (Path(original) / f).is_file()]
    if missing:
        return f"no gym-socket-api checkout at {original} (missing {', '.join(missing)})"
    if not Path(python).is_file():
        return f"no Python at {python}"
    probe = subprocess.run(
        [python, "-c", "import gym, numpy"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        return f"{python} cannot import gym and numpy: {probe.stderr.strip()[-200:]}"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def original_server(checkout: str, python: str, timeout: float = 30.0) -> Iterator[tuple[int, int]]:
    """The original server (its defaults but the port) in a process group of its own; yields
    (its port, its pid) once it accepts connections, and ends the group (its per-connection
    handler processes included) on exit."""
    port = _free_port()
    process = subprocess.Popen(
        [python, "__main__.py", "--port", str(port)],
        cwd=checkout,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the original server exited with {process.returncode}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the original server did not listen within {timeout:g} s")
            time.sleep(0.1)
        yield port, process.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _exchange(sock: socket.socket, codec: ClientConnection, request: bytes) -> tuple[object, int]:
    """Send ``request``, read until its reply parses: (the reply, its bytes)."""
    sock.sendall(request)
    size = 0
    while True:
        event = codec.next_event()
        if not isinstance(event, NeedData):
            return event, size
        data = sock.recv(65536)
        if not data:
            raise RuntimeError("the server closed the connection")
        size += len(data)
        codec.receive_data(data)


def step_bytes(port: int, env_id: str = "CartPole-v1") -> dict[str, Any]:
    """One flags-0 handshake, reset and step over a plain socket: what each reply was and its
    size in bytes (RuntimeError when the server does not answer as the seed says)."""
    codec = ClientConnection(Flags(0))
    with socket.create_connection(("127.0.0.1", port), 30) as sock:
        opened, handshake = _exchange(sock, codec, codec.send_handshake(env_id))
        if getattr(opened, "error", "") != "":
            raise RuntimeError(f"handshake refused: {opened}")
        spaces = []
        for which in (m.SpaceKind.ACTION, m.SpaceKind.OBSERVATION):
            described, _ = _exchange(sock, codec, codec.send_request(m.GetSpace(which)))
            if not isinstance(described, m.SpaceReply):
                raise RuntimeError(f"expected a space reply, got {described!r}")
            spaces.append(described.space)
        codec.set_spaces(*spaces)
        _, reset = _exchange(sock, codec, codec.send_request(m.Reset()))
        request = codec.send_request(m.Step(0))
        stepped, step = _exchange(sock, codec, request)
    if not isinstance(stepped, m.StepReply):
        raise RuntimeError(f"expected a step reply, got {stepped!r}")
    return {
        "handshake_reply_bytes": handshake,
        "reset_reply_bytes": reset,
        "step_request_bytes": len(request),
        "step_reply_bytes": step,
    }


def _with_descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (the original's handler processes are started by
    its threads)."""
    return [pid, *descendants(pid)]


def _pin(pid: int, cpu: int) -> None:
    """Every thread of ``pid`` and of the processes below it onto ``cpu`` (threads they start
    later inherit it)."""
    for each in _with_descendants(pid):
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{each}/task"):
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(task), {cpu})


def _measure(env: Any, seconds: float, server: int) -> Callable[[], dict[str, float]]:
    """A round of ``env``'s steps for about ``seconds`` (after 50 unmeasured): steps/s, and
    CPU µs per step of this process (the client) and of ``server`` with its descendants."""
    step = step_loop(env)

    def measure() -> dict[str, float]:
        for _ in range(50):
            step()
        before = {pid: cpu_seconds(pid) for pid in _with_descendants(server)}
        count, began, client = 0, time.perf_counter(), time.process_time()
        deadline = began + seconds
        while True:
            step()
            count += 1
            if count % 16 == 0 and time.perf_counter() >= deadline:
                break
        wall = time.perf_counter() - began
        client_cpu = time.process_time() - client
        spent = sum(max(0.0, cpu_seconds(pid) - was) for pid, was in before.items())
        return {
            "rate": count / wall,
            "client": 1e6 * client_cpu / count,
            "server": 1e6 * spent / count,
        }

    return measure


def _results(names: dict[str, str], rounds: dict[str, list[dict[str, float]]]) -> list[Result]:
    """Each server's steps/s, with the ratio over the original's (against the target 1.2),
    and its CPU per step (client, server, both), with the ratio over the original's; then
    envwire's steps/s and server CPU over the minimal's. Every ratio is per round."""
    values = {
        f"{key} {figure}": [r[figure] for r in measured]
        for key, measured in rounds.items()
        for figure in ("rate", "client", "server")
    }
    for key, measured in rounds.items():
        values[f"{key} total"] = [r["client"] + r["server"] for r in measured]

    def row(label: str, key: str, base: str | None = None, **options: Any) -> Result:
        result = compare(values, key, base, **options)
        result.name, result.notes = label, {}
        return result

    results = []
    for key, name in names.items():
        original = key == "original"
        results.append(row(name, f"{key} rate", None if original else "original rate", target=1.2))
        for figure, label in (("client", "client"), ("server", "server"), ("total", "both")):
            base = None if original else f"original {figure}"
            results.append(row(f"  CPU per step, {label}", f"{key} {figure}", base, unit="us"))
    results.append(row("envwire over minimal: steps/s", "envwire rate", "minimal rate"))
    results.append(
        row("envwire over minimal: server CPU", "envwire server", "minimal server", unit="us")
    )
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--original", help="a checkout of gym-socket-api")
    parser.add_argument("--python", help="a Python that runs it (gym, numpy < 2)")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a smoke run (0.3 s, 1 round)")
    parser.add_argument(
        "--cpu",
        type=int,
        default=None,
        help="run the client and every server on this one CPU (default: they float)",
    )
    args = parser.parse_args()
    reason = _skip_reason(args.original, args.python)
    if reason is not None:
        print(f"bench_original: skipped: {reason}")
        return 0
    settings = Settings(seconds=0.3, runs=1) if args.quick else Settings(args.seconds, args.runs)
    names = {
        "original": "original gym-socket-api server, CartPole one step (flags 0)",
        "envwire": "envwire serve, CartPole one step (flags 0)",
        "minimal": "minimal Python server, same bytes (flags 0)",
    }
    load = os.getloadavg()
    with (
        original_server(args.original, args.python) as (port, original_pid),
        ServerProcess(["CartPole-v1", SEEDED_ENV], cwd=_HERE) as server,
        minimal_original_server() as (minimal_port, minimal_pid),
    ):
        assert server.process is not None
        compared = check_same_bytes(minimal_port, server.ports["gym-socket"])
        ports = {"original": port, "envwire": server.ports["gym-socket"], "minimal": minimal_port}
        sizes = {key: step_bytes(each) for key, each in ports.items()}
        pids = {"original": original_pid, "envwire": server.process.pid, "minimal": minimal_pid}
        envs = {
            key: envwire.make(f"gym-socket://127.0.0.1:{each}/CartPole-v1", flags=Flags(0))
            for key, each in ports.items()
        }
        try:
            if args.cpu is not None:  # once every connection is open: the original's handler too
                for pid in (os.getpid(), *pids.values()):
                    _pin(pid, args.cpu)
            cases = {}
            for key, env in envs.items():
                env.reset()
                cases[key] = _measure(env, settings.seconds, pids[key])
            rounds = alternate(cases, settings.runs)
        finally:
            for env in envs.values():
                env.close()
    results = _results(names, rounds)
    report = {"results": [vars(r) for r in results], "machine": machine() | {"cpu": args.cpu}}
    print_table(report)
    print(f"the minimal server's {compared} replies equal envwire's, byte for byte")
    for key, size in sizes.items():
        print(f"{key}: " + ", ".join(f"{k} {v}" for k, v in size.items()))
    after = os.getloadavg()
    pinned = "floating" if args.cpu is None else f"all on CPU {args.cpu}"
    print(f"load average (1 min): {load[0]:.2f} before, {after[0]:.2f} after; {pinned}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
