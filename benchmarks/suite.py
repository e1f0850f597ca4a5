"""The speed suite: every figure beside a baseline measured in the same run.

Run ``python benchmarks/suite.py [--quick] [--seconds S] [--runs R] [--json FILE]``: a progress
bar on stderr, a table on stdout, and a JSON report (the machine, every rate and every ratio).
Figures and their baselines are measured in ``--runs`` alternating rounds
(:func:`harness.alternate`); a ratio is the median of the rounds' ratios, printed with their spread.

Cases (each a rate in steps/s, env steps for batched cases):

- ``echo``: a plain blocking Python TCP loop (:class:`harness.EchoServer`) carrying exactly the
  request and reply bytes of a case below (sizes from the gym-socket codec, see
  :func:`harness.gym_socket_step_bytes`); and the same loop stepping the env once per message
  in its server (CartPole, the frames env): the floor for any Python server of that env;
- ``gym-socket``: one client stepping CartPole one step at a time, on the extended path and on
  the seed's JSON path (flags 0), each beside the echo of its own bytes (the extended path also
  beside the echo stepping CartPole), and in a worker process;
- ``batched``: ``make_vec`` CartPole at N = 1, 8, 16, 64, 256, 1024, beside Gymnasium's
  in-process ``SyncVectorEnv`` with the same N;
- ``sb3``: SB3's ``VecEnv.step()`` over gym-socket (``envwire.adapters.training.sb3``) at
  N = 8, beside SB3's local ``DummyVecEnv`` (``bench_sb3.sb3_cases``; needs the ``sb3`` extra,
  skipped without);
- ``frames``: 84x84x4 uint8 observations, beside an echo of the same bytes (and the echo
  stepping the frames env);
- ``idle``: server memory per idle session over 2,000 gym-socket sessions (env excluded);
- ``dm_env_rpc`` and ``openenv``: the cases of ``bench_dmenvrpc.py`` and ``bench_openenv.py``
  (their peers: a reference dm_env_rpc servicer, openenv-core's own server).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

import envwire
from bench_dmenvrpc import bench_grpc_cases
from bench_openenv import bench_openenv_cases
from bench_sb3 import sb3_cases
from envwire.client.gymsocket import DEFAULT_FLAGS
from envwire.protocols.gymsocket import Flags
from envwire.testing import ServerProcess
from envwire.testing.envs import FramesEnv
from harness import (
    EchoServer,
    Progress,
    Result,
    Settings,
    alternate,
    compare,
    echo_rate,
    gym_socket_step_bytes,
    machine,
    print_table,
    rate,
    step_loop,
)

__all__ = ["bench_batched", "bench_frames", "bench_gym_socket", "bench_idle", "main", "run"]

#: The ratio to SyncVectorEnv each batch size should reach: training libraries run 4-16 envs
#: a process, where a batch's fixed cost (the round trip, both codecs) weighs most.
BATCH_TARGETS = {8: 0.45, 16: 0.6, 64: 0.8, 256: 0.9}

#: The cases measured after the gym-socket ones, each taking the Settings.
EXTRA_CASES: dict[str, Callable[[Settings], list[Result]]] = {
    "dm_env_rpc": bench_grpc_cases,
    "openenv": bench_openenv_cases,
}


def _remote_rate(env: Any, seconds: float) -> Callable[[], float]:
    step = step_loop(env)
    return lambda: rate(step, seconds)


def _echo(
    echo: EchoServer, sizes: tuple[int, int], seconds: float, env: str = ""
) -> Callable[[], float]:
    return lambda: echo_rate(echo.port, *sizes, seconds, env=env)


def bench_gym_socket(settings: Settings, server: Any, echo: EchoServer) -> list[Result]:
    """One client stepping CartPole, on envwire's extended path (raw tensors) and on the
    seed's JSON path (flags 0), each beside the echo of its own step's bytes, in rounds."""
    s = settings.seconds
    cartpole = gymnasium.make("CartPole-v1")
    names = {
        "extended": "gym-socket: CartPole one step, extended path",
        "seed": "gym-socket: CartPole one step, seed JSON path (flags 0)",
        "process": "gym-socket: CartPole in a worker process, extended path",
    }
    echoes = {
        "extended": "echo: CartPole step bytes, extended path",
        "seed": "echo: CartPole step bytes, seed JSON path",
    }
    floor = "echo stepping CartPole per message, extended path bytes"
    envs = {
        "extended": envwire.make(server.url("gym-socket", "CartPole-v1")),
        "seed": envwire.make(server.url("gym-socket", "CartPole-v1"), flags=Flags(0)),
    }
    if "process/CartPole-v1" in getattr(server, "env_ids", ()):
        envs["process"] = envwire.make(server.url("gym-socket", "process/CartPole-v1"))
    cases: dict[str, Callable[[], float]] = {}
    sizes: dict[str, tuple[int, int]] = {}
    for path, flags in (("extended", DEFAULT_FLAGS), ("seed", Flags(0))):
        sizes[path] = gym_socket_step_bytes(cartpole, flags)
        cases[echoes[path]] = _echo(echo, sizes[path], s)
        cases[names[path]] = _remote_rate(envs[path], s)
    cases[floor] = _echo(echo, sizes["extended"], s, env="CartPole-v1")
    if "process" in envs:
        cases[names["process"]] = _remote_rate(envs["process"], s)
    for path, env in envs.items():
        env.reset(seed=None if path == "seed" else 0)  # the seed's Reset takes no seed
    try:
        values = alternate(cases, settings.runs)
    finally:
        for env in envs.values():
            env.close()
    results = []
    for path in ("extended", "seed"):
        request, reply = sizes[path]
        notes = {"request_bytes": request, "reply_bytes": reply}
        results.append(compare(values, echoes[path], unit="round trips/s", notes=notes))
        results.append(compare(values, names[path], echoes[path], target=0.4, notes=notes))
        if path == "extended":
            # The floor with the env's own work: what any Python server of CartPole reaches.
            results.append(compare(values, floor, echoes[path], notes=notes))
            label = "  the same, of the echo stepping CartPole"
            results.append(compare(values, names[path], floor, label=label))
    if "process" in envs:
        results.append(compare(values, names["process"], echoes["extended"]))
    return results


def _stepper(env: Any, actions: Any, seconds: float, n: int) -> Callable[[], float]:
    return lambda: n * rate(lambda: env.step(actions), seconds)


def bench_batched(settings: Settings, server: Any, progress: Progress) -> list[Result]:
    """make_vec CartPole at each N beside in-process SyncVectorEnv, in alternating rounds."""
    results = []
    for n in settings.sizes:
        actions = np.zeros(n, np.int64)
        local = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * n)
        local.reset(seed=0)
        remote = envwire.make_vec(server.url("gym-socket", "CartPole-v1"), n)
        remote.reset(seed=0)
        base, ours = f"in-process SyncVectorEnv N={n}", f"gym-socket batched N={n}"
        try:
            values = alternate(
                {
                    base: _stepper(local, actions, settings.seconds, n),
                    ours: _stepper(remote, actions, settings.seconds, n),
                },
                settings.runs,
            )
        finally:
            remote.close()
            local.close()
        results.append(compare(values, base))
        results.append(compare(values, ours, base, target=BATCH_TARGETS.get(n)))
        progress.step(f"batched N={n}")
    return results


def bench_frames(settings: Settings, server: Any, echo: EchoServer) -> list[Result]:
    """84x84x4 uint8 observations beside an echo of the same bytes, in alternating rounds."""
    sizes = gym_socket_step_bytes(FramesEnv())
    env = envwire.make(server.url("gym-socket", "bench/Frames-v0"))
    env.reset(seed=0)
    base, ours = "echo: 84x84x4 frame step bytes", "gym-socket: 84x84x4 uint8 frames"
    floor = "echo stepping the frames env per message"
    try:
        values = alternate(
            {
                base: _echo(echo, sizes, settings.seconds),
                floor: _echo(echo, sizes, settings.seconds, env="bench/Frames-v0"),
                ours: _remote_rate(env, settings.seconds),
            },
            settings.runs,
        )
    finally:
        env.close()
    notes = {"request_bytes": sizes[0], "reply_bytes": sizes[1]}
    return [
        compare(values, base, unit="round trips/s", notes=notes),
        compare(values, ours, base, target=0.8, notes=notes),
        compare(values, floor, base, notes=notes),
        compare(values, ours, floor, label="  the same, of the echo stepping the frames env"),
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
    progress = Progress(5 + len(settings.sizes) + len(EXTRA_CASES), progress_bar)
    results: list[Result] = []
    limit = max(settings.idle_sessions + 100, 1024)
    # every idle session comes from this one address: lift the per-address share with the rest
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "bench.toml"
        config.write_text(
            f"[server]\nmax_connections = {limit}\nmax_connections_per_address = {limit}\n"
        )
        args = ["--capacity", str(limit), "--config", str(config)]
        with EchoServer() as echo, ServerProcess(envs, args) as server:
            progress.step("echo server and envwire serve up")
            results += bench_gym_socket(settings, server, echo)
            progress.step("gym-socket one step at a time")
            results += bench_batched(settings, server, progress)
            results += sb3_cases(settings, server, sizes=(8,), schemes=("gym-socket",))
            progress.step("SB3 VecEnv N=8")
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
    parser.add_argument(
        "--runs", type=int, default=5, help="alternating rounds per figure (the median counts)"
    )
    parser.add_argument("--json", default="envwire-bench.json", help="where to write the report")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args()
    if args.quick:
        settings = Settings(seconds=0.2, runs=1, sizes=(1, 8, 16, 256), idle_sessions=100)
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
