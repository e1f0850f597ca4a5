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
  in-process ``SyncVectorEnv`` with the same N and the minimal implementation of the same bytes;
- ``parallel``: ``make_vec(url, N, workers=2)`` of a CPU-bound env (``BurnEnv``, a step of
  200 µs of CPU) at N = 8 and 2, beside in-process ``SyncVectorEnv`` and Gymnasium's
  ``AsyncVectorEnv`` (N = 8 also beside the minimal implementation, ``bench_parallel_minimal``);
  the same with an agent computing during the step (``step_async``); and
  dm_control's cartpole-swingup at N = 8 (with the ``dm-control`` extra, skipped without);
- ``sb3``: SB3's ``VecEnv.step()`` over gym-socket (``envwire.adapters.training.sb3``) at
  N = 8, beside SB3's local ``DummyVecEnv`` and the minimal implementation of the same bytes
  (``bench_sb3.sb3_cases``; needs the ``sb3`` extra, skipped without);
- ``frames``: 84x84x4 uint8 observations, beside an echo of the same bytes (and the echo
  stepping the frames env) and the minimal implementation of the same bytes;
- ``idle``: server memory per idle session over 2,000 gym-socket sessions (env excluded);
- ``dm_env_rpc`` and ``openenv``: the cases of ``bench_dmenvrpc.py`` and ``bench_openenv.py``
  (their peers: a reference dm_env_rpc servicer, openenv-core's own server).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

import envwire
from bench_dmenvrpc import bench_grpc_cases
from bench_openenv import bench_openenv_cases
from bench_parallel_minimal import PARALLEL_LAYOUT, parallel_server
from bench_pool import calibrate
from bench_sb3 import sb3_cases
from envwire.client.gymsocket import DEFAULT_FLAGS
from envwire.protocols.gymsocket import Flags
from envwire.registry import parse_env_arg
from envwire.testing import ServerProcess
from envwire.testing.envs import BurnEnv, FramesEnv
from harness import (
    EchoServer,
    Progress,
    Result,
    Settings,
    alternate,
    case_names,
    checked_cases,
    comma_list,
    compare,
    echo_rate,
    gym_socket_step_bytes,
    machine,
    print_table,
    rate,
    step_loop,
)
from minimal_cases import (
    FramesClient,
    VectorClient,
    cartpole_vector,
    check_requests,
    frames_requests,
    minimal_case_server,
)

__all__ = [
    "bench_batched",
    "bench_frames",
    "bench_gym_socket",
    "bench_idle",
    "bench_parallel",
    "main",
    "run",
]

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
        least = f"  minimal Python of the same bytes, N={n}"
        cases: dict[str, gymnasium.vector.VectorEnv[Any, Any, Any] | VectorClient]
        cases = {base: local, ours: remote}
        try:
            with minimal_case_server("vector", None) as (port, _):
                cases[least] = VectorClient(port, cartpole_vector(n))
                cases[least].reset(seed=0)
                steppers = {k: _stepper(e, actions, settings.seconds, n) for k, e in cases.items()}
                values = alternate(steppers, settings.runs)
        finally:
            for env in cases.values():
                env.close()
        results.append(compare(values, base))
        results.append(compare(values, ours, base, target=BATCH_TARGETS.get(n)))
        results.append(compare(values, least, base))
        progress.step(f"batched N={n}")
    return results


# --- parallel stepping: copies split over worker processes ----------------------------------

#: The step of the CPU-bound env (``BurnEnv``), in µs of CPU.
BURN_STEP_US = 200.0

#: What ``make_vec(url, 8, workers=K)`` of that env should reach, of each baseline, by K:
#: 2 on a 2-core machine, 8 on a 16-core one (``--workers 8``).
PARALLEL_TARGETS = {
    2: {"SyncVectorEnv": 1.3, "AsyncVectorEnv": 1.2},
    8: {"AsyncVectorEnv": 0.9},
}

#: dm_control's cartpole-swingup, served when the ``dm-control`` extra is installed.
DM_CARTPOLE = "dm_control/cartpole-swingup"


def _agent_stepper(
    env: Any, actions: Any, think: Callable[[], object], seconds: float, n: int
) -> Callable[[], float]:
    """Env steps/s of an agent that computes (``think``) once per batch: while the copies step
    where the vector env can (``step_async``, think, ``step_wait``), else after each step."""
    if hasattr(env, "step_async"):

        def once() -> None:
            env.step_async(actions)
            think()
            env.step_wait()

    else:

        def once() -> None:
            env.step(actions)
            think()

    return lambda: n * rate(once, seconds, warmup=10)


def _vector_rounds(
    settings: Settings,
    make: Callable[[], Any],
    remote: dict[str, Any],
    n: int,
    think: Callable[[], object] | None = None,
) -> dict[str, list[float]]:
    """Alternating rounds of ``remote``'s vector envs (keyed by name) beside in-process
    ``SyncVectorEnv`` (``sync``) and Gymnasium's ``AsyncVectorEnv`` (``async``, a process per
    copy) of N copies of ``make``'s env; with ``think``, an agent's compute per batch. Closes
    every env."""
    envs: dict[str, gymnasium.vector.VectorEnv[Any, Any, Any]]
    envs = {"sync": gymnasium.vector.SyncVectorEnv([make] * n)}
    try:
        envs["async"] = gymnasium.vector.AsyncVectorEnv([make] * n)
        envs |= remote
        actions = envs["sync"].action_space.sample()
        for env in envs.values():
            env.reset(seed=0)
        s = settings.seconds
        if think is None:
            cases = {name: _stepper(env, actions, s, n) for name, env in envs.items()}
        else:
            cases = {name: _agent_stepper(env, actions, think, s, n) for name, env in envs.items()}
        return alternate(cases, settings.runs)
    finally:
        for env in {**remote, **envs}.values():
            env.close()


def _parallel_results(
    values: dict[str, list[float]], label: str, n: int, workers: int, targets: bool = False
) -> list[Result]:
    """Every case of :func:`_vector_rounds` beside ``SyncVectorEnv``, and ``workers=K`` beside
    ``AsyncVectorEnv`` too (with :data:`PARALLEL_TARGETS` when ``targets``)."""
    k = f"workers={workers}"
    names = {
        "sync": f"{label}: in-process SyncVectorEnv",
        "async": f"{label}: Gymnasium AsyncVectorEnv ({n} processes)",
        "workers=1": f"{label}: make_vec workers=1",
        k: f"{label}: make_vec {k}",
        "minimal": f"  {label}: minimal Python of the same bytes, 2 worker processes",
    }
    goals = PARALLEL_TARGETS.get(workers, {}) if targets else {}
    named = {names[key]: rounds for key, rounds in values.items()}
    results = [compare(named, names["sync"])]
    for key in dict.fromkeys(("async", "workers=1", k, "minimal")):
        if names[key] in named:
            target = goals.get("SyncVectorEnv") if key == k else None
            results.append(compare(named, names[key], names["sync"], target=target))
    results.append(
        compare(
            named,
            names[k],
            names["async"],
            target=goals.get("AsyncVectorEnv"),
            label="  the same, of AsyncVectorEnv",
        )
    )
    return results


def _burn(work: int, seconds: float) -> Callable[[], object]:
    """An agent's compute: ``seconds`` of CPU, as BurnEnv's arithmetic (``work`` rounds take
    :data:`BURN_STEP_US` µs)."""
    rounds = max(1, round(work * seconds * 1e6 / BURN_STEP_US))

    def think() -> int:
        x = 1
        for _ in range(rounds):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        return x

    return think


def bench_parallel(settings: Settings, server: Any, work: int) -> list[Result]:
    """Copies split over K worker processes (``make_vec(url, N, workers=K)``, K =
    ``settings.workers``) of a CPU-bound env (``BurnEnv`` of ``work`` rounds: a step of
    :data:`BURN_STEP_US` µs of CPU), beside in-process ``SyncVectorEnv`` and Gymnasium's
    ``AsyncVectorEnv``, in alternating rounds:

    - N = 8 (AsyncVectorEnv: 8 processes), with ``workers=1`` too, and with K = 2 the minimal
      implementation of the same bytes (its 2 worker processes);
    - N = 2: both sides two processes, one copy in each;
    - N = 8 with an agent that computes for as long as 4 copies' steps per batch, while the
      copies step where the vector env allows it (``step_async``/``step_wait``), else after;
    - dm_control's cartpole-swingup at N = 8, when the server has it (the ``dm-control``
      extra); else a printed reason.
    """
    k = settings.workers
    url = server.url("gym-socket", "bench/Burn")
    burn = functools.partial(BurnEnv, work=work, horizon=2**62)
    results: list[Result] = []
    for n, workers in ((8, sorted({1, k})), (2, [2])):
        remote: dict[str, Any] = {
            f"workers={w}": envwire.make_vec(url, n, workers=w) for w in workers
        }
        label = f"Burn {BURN_STEP_US:g} us N={n}"
        if n != 8 or k != 2:
            values = _vector_rounds(settings, burn, remote, n)
        else:  # beside the minimal implementation of the same bytes (bench_parallel_minimal)
            with parallel_server(work) as (port, _):
                remote["minimal"] = VectorClient(port, PARALLEL_LAYOUT)
                values = _vector_rounds(settings, burn, remote, n)
        results += _parallel_results(values, label, n, max(workers), targets=n == 8)
    think = _burn(work, 4 * BURN_STEP_US * 1e-6)
    remote = {f"workers={k}": envwire.make_vec(url, 8, workers=k)}
    values = _vector_rounds(settings, burn, remote, 8, think=think)
    label = "Burn N=8, agent computing 4 steps' worth (async)"
    results += _parallel_results(values, label, 8, k)
    if DM_CARTPOLE not in server.env_ids:
        print(f"skipped {DM_CARTPOLE}: dm_control is not installed (the dm-control extra)")
        return results
    dm_url = server.url("gym-socket", DM_CARTPOLE)
    remote = {f"workers={w}": envwire.make_vec(dm_url, 8, workers=w) for w in sorted({1, k})}
    values = _vector_rounds(settings, parse_env_arg(DM_CARTPOLE).make, remote, 8)
    return results + _parallel_results(values, "dm_control cartpole-swingup N=8", 8, k)


def bench_frames(settings: Settings, server: Any, echo: EchoServer) -> list[Result]:
    """84x84x4 uint8 observations beside an echo of the same bytes (and the echo stepping the
    frames env) and the minimal implementation of the same bytes, in alternating rounds."""
    sizes = gym_socket_step_bytes(FramesEnv())
    env = envwire.make(server.url("gym-socket", "bench/Frames-v0"))
    env.reset(seed=0)
    base, ours = "echo: 84x84x4 frame step bytes", "gym-socket: 84x84x4 uint8 frames"
    floor = "echo stepping the frames env per message"
    least = "  minimal Python of the same bytes, frames"
    try:
        with minimal_case_server("frames", None) as (port, _):
            check_requests(frames_requests(8), port, server.ports["gym-socket"])
            minimal = FramesClient(port)
            minimal.reset()

            def minimal_step() -> None:
                _, _, terminated, truncated = minimal.step()
                if terminated or truncated:
                    minimal.reset()

            try:
                values = alternate(
                    {
                        base: _echo(echo, sizes, settings.seconds),
                        floor: _echo(echo, sizes, settings.seconds, env="bench/Frames-v0"),
                        ours: _remote_rate(env, settings.seconds),
                        least: lambda: rate(minimal_step, settings.seconds),
                    },
                    settings.runs,
                )
            finally:
                minimal.close()
    finally:
        env.close()
    notes = {"request_bytes": sizes[0], "reply_bytes": sizes[1]}
    return [
        compare(values, base, unit="round trips/s", notes=notes),
        compare(values, ours, base, target=0.7, notes=notes),
        compare(values, least, base, notes=notes),
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


#: The suite's cases, in the order they run (``--cases`` picks some).
CASES = ("gym-socket", "batched", "sb3", "parallel", "frames", "idle", *EXTRA_CASES)


def run(
    settings: Settings, *, progress_bar: bool = True, cases: Sequence[str] = CASES
) -> dict[str, Any]:
    """Run the suite's ``cases`` (all by default); the report as a dict."""
    checked_cases(cases, CASES)
    envs = [
        "CartPole-v1",
        "process/CartPole-v1=CartPole-v1@process",
        "bench/Frames-v0=envwire.testing.envs:FramesEnv@inline",
    ]
    work = calibrate(BURN_STEP_US)
    if importlib.util.find_spec("dm_control") is not None:
        envs.append(DM_CARTPOLE)
    steps = 1 + len(cases) + (len(settings.sizes) - 1 if "batched" in cases else 0)
    progress = Progress(steps, progress_bar)
    results: list[Result] = []
    limit = max(settings.idle_sessions + 100, 1024)
    # every idle session comes from this one address: lift the per-address share with the rest
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "bench.toml"
        config.write_text(
            f"[server]\nmax_connections = {limit}\nmax_connections_per_address = {limit}\n"
            # BurnEnv calibrated to this machine: the env of the parallel cases
            '\n[[env]]\nid = "bench/Burn"\nentry_point = "envwire.testing.envs:BurnEnv"\n'
            f"kwargs = {{ work = {work}, horizon = {2**62} }}\n"
        )
        args = ["--capacity", str(limit), "--config", str(config)]
        with EchoServer() as echo, ServerProcess(envs, args) as server:
            progress.step("echo server and envwire serve up")
            served: dict[str, Callable[[], list[Result]]] = {
                "gym-socket": lambda: bench_gym_socket(settings, server, echo),
                "batched": lambda: bench_batched(settings, server, progress),
                "sb3": lambda: sb3_cases(
                    settings, server, sizes=(8,), schemes=("gym-socket",), minimal=True
                ),
                "parallel": lambda: bench_parallel(settings, server, work),
                "frames": lambda: bench_frames(settings, server, echo),
                "idle": lambda: bench_idle(settings, server),
            }
            for name, served_case in served.items():
                if name in cases:
                    results += served_case()
                    progress.step(name)
    for name, case in EXTRA_CASES.items():
        if name in cases:
            results += case(settings)
            progress.step(name)
    return {
        "machine": machine(),
        "settings": asdict(settings) | {"sizes": list(settings.sizes), "cases": list(cases)},
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
    parser.add_argument(
        "--cases",
        type=case_names(CASES),
        default=CASES,
        help=f"the cases to run, comma-separated (default: all of {','.join(CASES)})",
    )
    parser.add_argument(
        "--sizes",
        type=lambda text: tuple(int(n) for n in comma_list(text)),
        help="the batched case's N, comma-separated (default: 1,8,16,64,256,1024)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="K of the parallel cases' make_vec(url, N, workers=K) (default 2; 8 on 16 cores)",
    )
    args = parser.parse_args()
    if args.quick:
        settings = Settings(seconds=0.2, runs=1, sizes=(1, 8, 16, 256), idle_sessions=100)
    else:
        settings = Settings(seconds=args.seconds, runs=args.runs)
    settings.workers = args.workers
    if args.sizes:
        settings.sizes = args.sizes
    report = run(settings, progress_bar=not args.no_progress, cases=args.cases)
    print_table(report)
    with open(args.json, "w") as out:
        json.dump(report, out, indent=2)
    print(f"report: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
