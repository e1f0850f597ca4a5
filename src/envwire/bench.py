"""``envwire bench``: the speed suite, every figure beside a baseline measured in the same run.

Cases (each a rate in steps/s, env steps for batched cases):

- ``echo``: a raw blocking Python TCP echo, for each payload size a case below carries;
- ``gym-socket``: one client stepping CartPole one step at a time;
- ``batched``: ``make_vec`` CartPole at N = 1, 16, 64, 256, 1024, beside Gymnasium's
  in-process ``SyncVectorEnv`` with the same N;
- ``frames``: 84x84x4 uint8 observations, beside an echo of the same bytes;
- ``idle``: server memory per idle session over 2,000 gym-socket sessions (env excluded).

Front ends that add bench cases register them in :data:`EXTRA_CASES`. The JSON report holds the
machine, every rate and every ratio.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import socket
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "EXTRA_CASES",
    "EchoServer",
    "Result",
    "Settings",
    "echo_rate",
    "machine",
    "main",
    "print_table",
    "rate",
]

CARTPOLE_STEP_BYTES = (19, 47)  # request, reply bytes of one extended gym-socket CartPole step


@dataclass
class Result:
    """One measured figure, with the baseline it is compared to."""

    name: str
    value: float
    unit: str = "steps/s"
    baseline: str | None = None
    ratio: float | None = None
    target: float | None = None
    notes: dict[str, Any] = field(default_factory=dict)


#: Extra cases front ends contribute: name -> "module:function" taking the Settings and
#: returning a list of Results.
EXTRA_CASES: dict[str, str] = {
    "dm_env_rpc": "envwire.client.dmenvrpc_bench:bench_grpc_cases",
    "openenv": "envwire.server.openenv.bench:bench_openenv_cases",
}


def rate(call: Callable[[], Any], seconds: float, warmup: int = 50) -> float:
    """Calls per second of ``call`` over about ``seconds``, after ``warmup`` calls."""
    for _ in range(warmup):
        call()
    count, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        call()
        count += 1
        now = time.perf_counter()
        if now >= deadline:
            return count / (now - start)


def _echo_main(conn: Any) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    conn.send(listener.getsockname()[1])
    while True:
        client, _ = listener.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := client.recv(1 << 20):
            client.sendall(data)
        client.close()


class EchoServer:
    """A blocking Python TCP echo server in its own process: the physical baseline."""

    def __enter__(self) -> EchoServer:
        parent, child = multiprocessing.Pipe()
        ctx = multiprocessing.get_context("spawn")
        self.process = ctx.Process(target=_echo_main, args=(child,), daemon=True)
        self.process.start()
        if not parent.poll(30):
            raise RuntimeError("the echo server did not start")
        self.port = int(parent.recv())
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.kill()
        self.process.join(5)


def echo_rate(port: int, request_bytes: int, reply_bytes: int, seconds: float) -> float:
    """Round trips/s sending ``request_bytes`` and reading ``reply_bytes`` back (the echo
    returns what it gets, so each direction carries the larger of the two)."""
    size = max(request_bytes, reply_bytes)
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


@dataclass
class Settings:
    """How long and how big the suite runs."""

    seconds: float = 2.0
    runs: int = 3
    sizes: Sequence[int] = (1, 16, 64, 256, 1024)
    idle_sessions: int = 2000


def _median(settings: Settings, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(settings.runs))


class Progress:
    """A one-line progress bar on stderr."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        self.total, self.done, self.enabled = total, 0, enabled

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        bar = "#" * filled + "-" * (width - filled)
        sys.stderr.write(f"\r[{bar}] {self.done}/{self.total} {label[:40]:<40}")
        sys.stderr.flush()
        if self.done >= self.total:
            sys.stderr.write("\n")


def _step_loop(env: Any) -> Callable[[], Any]:
    action = env.action_space.sample()

    def one() -> None:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()

    return one


def bench_gym_socket(settings: Settings, server: Any, echo: EchoServer) -> list[Result]:
    """One client stepping CartPole, beside the echo of the same payload."""
    import envwire

    def ours(env_id: str) -> Callable[[], float]:
        def measure() -> float:
            env = envwire.make(server.url("gym-socket", env_id))
            env.reset(seed=0)
            try:
                return rate(_step_loop(env), settings.seconds)
            finally:
                env.close()

        return measure

    echo_name = "echo: TCP round trip, CartPole step size"
    baseline = _median(
        settings, lambda: echo_rate(echo.port, *CARTPOLE_STEP_BYTES, settings.seconds)
    )
    inline = _median(settings, ours("CartPole-v1"))
    results = [
        Result(echo_name, baseline, "round trips/s"),
        Result(
            "gym-socket: CartPole, one step at a time",
            inline,
            baseline=echo_name,
            ratio=inline / baseline,
            target=2 / 3,
        ),
    ]
    if "process/CartPole-v1" in getattr(server, "env_ids", ()):
        process = _median(settings, ours("process/CartPole-v1"))
        results.append(
            Result(
                "gym-socket: CartPole in a worker process",
                process,
                baseline=echo_name,
                ratio=process / baseline,
            )
        )
    return results


def _stepper(env: Any, actions: Any, seconds: float) -> Callable[[], float]:
    return lambda: rate(lambda: env.step(actions), seconds)


def bench_batched(settings: Settings, server: Any, progress: Progress) -> list[Result]:
    """make_vec CartPole at each N beside in-process SyncVectorEnv."""
    import gymnasium

    import envwire

    results = []
    for n in settings.sizes:
        actions = np.zeros(n, np.int64)
        local = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * n)
        local.reset(seed=0)
        remote = envwire.make_vec(server.url("gym-socket", "CartPole-v1"), n)
        remote.reset(seed=0)
        try:
            base = n * _median(settings, _stepper(local, actions, settings.seconds))
            ours = n * _median(settings, _stepper(remote, actions, settings.seconds))
        finally:
            remote.close()
            local.close()
        results.append(Result(f"in-process SyncVectorEnv N={n}", base))
        results.append(
            Result(
                f"gym-socket batched N={n}",
                ours,
                baseline=f"in-process SyncVectorEnv N={n}",
                ratio=ours / base,
                target=0.9 if n == 256 else None,
            )
        )
        progress.step(f"batched N={n}")
    return results


def bench_frames(settings: Settings, server: Any, echo: EchoServer) -> list[Result]:
    """84x84x4 uint8 observations beside an echo of the same bytes."""
    import envwire

    frame = 84 * 84 * 4
    reply = 1 + 1 + 4 + 4 + 12 + frame + 8 + 2 + 6  # status, obs type, field, ndim, dims, ...
    env = envwire.make(server.url("gym-socket", "bench/Frames-v0"))
    env.reset(seed=0)
    try:
        ours = _median(settings, lambda: rate(_step_loop(env), settings.seconds))
    finally:
        env.close()
    base = _median(settings, lambda: echo_rate(echo.port, 12, reply, settings.seconds))
    return [
        Result("echo: TCP round trip, 84x84x4 frame size", base, "round trips/s"),
        Result(
            "gym-socket: 84x84x4 uint8 frames",
            ours,
            baseline="echo: TCP round trip, 84x84x4 frame size",
            ratio=ours / base,
            target=0.8,
        ),
    ]


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def _env_kib(count: int) -> float:
    """KiB per CartPole instance, measured in a fresh process (to exclude envs)."""
    code = (
        "import gymnasium, os\n"
        "def rss():\n"
        "    lines = open('/proc/self/status').read().splitlines()\n"
        "    return int(next(x for x in lines if x.startswith('VmRSS')).split()[1])\n"
        "envs = [gymnasium.make('CartPole-v1') for _ in range(10)]\n"
        f"before = rss(); envs += [gymnasium.make('CartPole-v1') for _ in range({count})]\n"
        f"print((rss() - before) / {count})\n"
    )
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def bench_idle(settings: Settings, server: Any) -> list[Result]:
    """Server memory per idle gym-socket session, env excluded."""
    import envwire

    pid = server.process.pid
    warm = [envwire.make(server.url("gym-socket", "CartPole-v1")) for _ in range(10)]
    time.sleep(0.5)
    before = _rss_kib(pid)
    envs = []
    try:
        for _ in range(settings.idle_sessions):
            envs.append(envwire.make(server.url("gym-socket", "CartPole-v1")))
        time.sleep(1.0)
        after = _rss_kib(pid)
    finally:
        for env in envs + warm:
            env.close()
    per_session = (after - before) / settings.idle_sessions
    per_env = _env_kib(settings.idle_sessions)
    without_env = per_session - per_env
    return [
        Result(
            f"idle sessions: server KiB per session ({settings.idle_sessions} sessions)",
            per_session,
            "KiB",
        ),
        Result("idle sessions: KiB per CartPole env (measured apart)", per_env, "KiB"),
        Result(
            "idle sessions: server KiB per session, env excluded",
            without_env,
            "KiB",
            notes={"target_kib": 50},
        ),
    ]


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }


def run(settings: Settings, *, progress_bar: bool = True) -> dict[str, Any]:
    """Run the suite; the report as a dict."""
    from envwire.testing.server import ServerProcess

    envs = [
        "CartPole-v1",
        "process/CartPole-v1=CartPole-v1@process",
        "bench/Frames-v0=envwire.testing.envs:FramesEnv@inline",
    ]
    progress = Progress(4 + len(settings.sizes) + len(EXTRA_CASES), progress_bar)
    results: list[Result] = []
    limit = max(settings.idle_sessions + 100, 1024)
    args = ["--capacity", str(limit)]
    with EchoServer() as echo, ServerProcess(envs, args) as server:
        progress.step("echo server and envwire serve up")
        results += bench_gym_socket(settings, server, echo)
        progress.step("gym-socket one step at a time")
        results += bench_batched(settings, server, progress)
        results += bench_frames(settings, server, echo)
        progress.step("84x84x4 frames")
        results += bench_idle(settings, server)
        progress.step("idle sessions")
    for name, target in EXTRA_CASES.items():
        import importlib

        module_name, _, function = target.partition(":")
        case = getattr(importlib.import_module(module_name), function)
        results += case(settings)
        progress.step(name)
    return {
        "machine": machine(),
        "settings": asdict(settings) | {"sizes": list(settings.sizes)},
        "results": [asdict(r) for r in results],
    }


def print_table(report: dict[str, Any]) -> None:
    """The report as a table on stdout."""
    rows = report["results"]
    width = max(len(r["name"]) for r in rows)
    print(f"{'case':<{width}}  {'value':>14}  {'ratio':>6}  {'target':>6}")
    for r in rows:
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else ""
        target = f">={r['target']:.2f}" if r["target"] is not None else ""
        value = f"{r['value']:,.1f} {r['unit'].split('/')[0] if r['unit'] == 'KiB' else ''}"
        if r["unit"] != "KiB":
            value = f"{r['value']:,.0f}/s"
        print(f"{r['name']:<{width}}  {value:>14}  {ratio:>6}  {target:>6}")
    machine = report["machine"]
    print(f"machine: {machine['cpus']} cores, {machine['processor']}, Python {machine['python']}")


def main(argv: Sequence[str] | None = None) -> int:
    """``envwire bench``: run the suite, print the table, write the JSON report."""
    parser = argparse.ArgumentParser(prog="envwire bench", description=__doc__)
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The bench options (shared by ``envwire bench`` and ``benchmarks/bench_suite.py``)."""
    parser.add_argument("--quick", action="store_true", help="a smoke run: short, small, 1 run")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per measurement")
    parser.add_argument("--runs", type=int, default=3, help="measurements per figure (median)")
    parser.add_argument("--json", default="envwire-bench.json", help="where to write the report")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run_from_args(args: argparse.Namespace) -> int:
    """Run with parsed options."""
    if args.quick:
        settings = Settings(seconds=0.2, runs=1, sizes=(1, 16, 256), idle_sessions=100)
    else:
        settings = Settings(seconds=args.seconds, runs=args.runs)
    report = run(settings, progress_bar=not args.no_progress)
    print_table(report)
    with open(args.json, "w") as out:
        json.dump(report, out, indent=2)
    print(f"report: {args.json}")
    return 0
