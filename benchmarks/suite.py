"""The speed suite: every figure beside a baseline measured in the same run.

Run ``python benchmarks/suite.py [--quick] [--seconds S] [--runs R] [--json FILE]``: a progress
bar on stderr, a table on stdout, and a JSON report (the machine, every rate and every ratio).

Cases (each a rate in steps/s, env steps for batched cases):

- ``echo``: a raw blocking Python TCP echo, for each payload size a case below carries (sizes
  taken from the gym-socket codec, see :func:`harness.gym_socket_step_bytes`);
- ``gym-socket``: one client stepping CartPole one step at a time (inline and in a worker
  process);
- ``batched``: ``make_vec`` CartPole at N = 1, 16, 64, 256, 1024, beside Gymnasium's
  in-process ``SyncVectorEnv`` with the same N;
- ``frames``: 84x84x4 uint8 observations, beside an echo of the same bytes;
- ``idle``: server memory per idle session over 2,000 gym-socket sessions (env excluded);
- ``dm_env_rpc`` and ``openenv``: the cases of ``bench_dmenvrpc.py`` and ``bench_openenv.py``
  (their peers: a reference dm_env_rpc servicer, openenv-core's own server).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import gymnasium
import numpy as np

import envwire
from bench_dmenvrpc import bench_grpc_cases
from bench_openenv import bench_openenv_cases
from envwire.testing import ServerProcess
from envwire.testing.envs import FramesEnv
from harness import (
    EchoServer,
    Progress,
    Result,
    Settings,
    echo_rate,
    gym_socket_step_bytes,
    machine,
    median,
    print_table,
    rate,
)

__all__ = ["bench_batched", "bench_frames", "bench_gym_socket", "bench_idle", "main", "run"]

#: The cases measured after the gym-socket ones, each taking the Settings.
EXTRA_CASES: dict[str, Callable[[Settings], list[Result]]] = {
    "dm_env_rpc": bench_grpc_cases,
    "openenv": bench_openenv_cases,
}


def _step_loop(env: Any) -> Callable[[], Any]:
    action = env.action_space.sample()

    def one() -> None:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()

    return one


def bench_gym_socket(settings: Settings, server: Any, echo: EchoServer) -> list[Result]:
    """One client stepping CartPole, beside the echo of the same payload."""

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
    sizes = gym_socket_step_bytes(gymnasium.make("CartPole-v1"))
    baseline = median(settings, lambda: echo_rate(echo.port, *sizes, settings.seconds))
    inline = median(settings, ours("CartPole-v1"))
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
        process = median(settings, ours("process/CartPole-v1"))
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
    results = []
    for n in settings.sizes:
        actions = np.zeros(n, np.int64)
        local = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * n)
        local.reset(seed=0)
        remote = envwire.make_vec(server.url("gym-socket", "CartPole-v1"), n)
        remote.reset(seed=0)
        try:
            base = n * median(settings, _stepper(local, actions, settings.seconds))
            ours = n * median(settings, _stepper(remote, actions, settings.seconds))
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
    request, reply = gym_socket_step_bytes(FramesEnv())
    env = envwire.make(server.url("gym-socket", "bench/Frames-v0"))
    env.reset(seed=0)
    try:
        ours = median(settings, lambda: rate(_step_loop(env), settings.seconds))
    finally:
        env.close()
    base = median(settings, lambda: echo_rate(echo.port, request, reply, settings.seconds))
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
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def bench_idle(settings: Settings, server: Any) -> list[Result]:
    """Server memory per idle gym-socket session, env excluded."""
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


def run(settings: Settings, *, progress_bar: bool = True) -> dict[str, Any]:
    """Run the suite; the report as a dict."""
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
    for name, case in EXTRA_CASES.items():
        results += case(settings)
        progress.step(name)
    return {
        "machine": machine(),
        "settings": asdict(settings) | {"sizes": list(settings.sizes)},
        "results": [asdict(r) for r in results],
    }


def main() -> int:
    """Run the suite, print the table, write the JSON report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run: short, small, 1 run")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per measurement")
    parser.add_argument("--runs", type=int, default=3, help="measurements per figure (median)")
    parser.add_argument("--json", default="envwire-bench.json", help="where to write the report")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args()
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


if __name__ == "__main__":
    sys.exit(main())
