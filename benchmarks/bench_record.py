"""The recorder under load: N CartPole clients stepping as fast as they can, recorded or not.

Run: ``python benchmarks/bench_record.py [--seconds S] [--runs R] [--clients N] [--quick]
[--overflow wait|drop]``.

Each round starts ``envwire serve CartPole-v1`` twice, alternating the order round by round:
once without recording (the baseline) and once with ``--record`` to a fresh folder. N client
processes step CartPole over gym-socket with random actions for S seconds, counting their
steps and finished episodes. The recorded server is then stopped (SIGTERM: it writes what is
queued) and its dataset loaded with Minari.

Reported: steps/s of the clients together (recorded vs not: the ratio is the cost of
recording at full speed), episodes finished by the clients, episodes in the dataset, and the
share recorded (1.0 is every finished episode). Needs the ``minari`` extra.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time
from typing import Any

from envwire.testing import ServerProcess
from harness import Result, machine, print_table

CART = "CartPole-v1"


def _client(url: str, seconds: float, start: Any, results: Any) -> None:
    """Step CartPole with random actions for ``seconds`` once ``start`` is set; report
    ``(steps, finished episodes)``."""
    import gymnasium

    import envwire

    env = envwire.make(url)
    assert isinstance(env, gymnasium.Env)  # not a TypedClient: that is OpenEnv only
    env.action_space.seed(os.getpid())
    env.reset(seed=os.getpid())
    steps = episodes = 0
    start.wait()
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        if terminated or truncated:
            episodes += 1
            env.reset()
    env.close()
    results.put((steps, episodes))


def _run(clients: int, seconds: float, record: str | None, overflow: str) -> dict[str, float]:
    """One server, ``clients`` clients for ``seconds``: steps/s, finished, recorded."""
    args = ["--http", "off", "--grpc", "off"]
    if record is not None:
        args += ["--record", record]
        if overflow != "wait":
            args += ["--record-overflow", overflow]
    ctx = multiprocessing.get_context("spawn")
    with ServerProcess([CART], args, front_ends=("gym-socket",)) as server:
        url = server.url("gym-socket", CART)
        start, results = ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_client, args=(url, seconds, start, results))
                 for _ in range(clients)]  # fmt: skip
        for proc in procs:
            proc.start()
        time.sleep(1.0)  # every client connected and reset
        began = time.perf_counter()
        start.set()
        counts = [results.get(timeout=seconds + 120) for _ in procs]
        elapsed = time.perf_counter() - began
        for proc in procs:
            proc.join(30)
        stopped = time.perf_counter()
        server.stop(timeout=300)  # SIGTERM: the recorder writes what is queued
        drain = time.perf_counter() - stopped
    steps = sum(c[0] for c in counts)
    finished = sum(c[1] for c in counts)
    out = {"steps_per_s": steps / min(elapsed, seconds), "finished": finished, "drain_s": drain}
    if record is not None:
        os.environ["MINARI_DATASETS_PATH"] = record
        import minari

        try:
            out["recorded"] = minari.load_dataset(CART).total_episodes
        except (FileNotFoundError, ValueError):
            out["recorded"] = 0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--overflow", choices=["wait", "drop"], default="wait")
    parser.add_argument("--quick", action="store_true", help="a smoke run (2 s, 1 run)")
    args = parser.parse_args()
    seconds, runs = (2.0, 1) if args.quick else (args.seconds, args.runs)
    plain: list[dict[str, float]] = []
    recorded: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as scratch:
        for round_no in range(runs):
            order = [False, True] if round_no % 2 == 0 else [True, False]
            for recording in order:
                if recording:
                    folder = os.path.join(scratch, f"run{round_no}")
                    recorded.append(_run(args.clients, seconds, folder, args.overflow))
                else:
                    plain.append(_run(args.clients, seconds, None, args.overflow))
    ratios = [r["steps_per_s"] / p["steps_per_s"] for r, p in zip(recorded, plain, strict=True)]
    shares = [r["recorded"] / max(r["finished"], 1) for r in recorded]
    base = f"{args.clients} CartPole clients at full speed, not recorded"
    label = f"{args.clients} CartPole clients at full speed, recorded ({args.overflow})"
    results = [
        Result(base, statistics.median(p["steps_per_s"] for p in plain)),
        Result(
            label,
            statistics.median(r["steps_per_s"] for r in recorded),
            baseline=base,
            ratio=statistics.median(ratios),
            spread=(min(ratios), max(ratios)),
            notes={
                "finished": [int(r["finished"]) for r in recorded],
                "recorded": [int(r["recorded"]) for r in recorded],
                "drain_s": [round(r["drain_s"], 1) for r in recorded],
            },
        ),
        Result(
            "episodes recorded of episodes finished",
            statistics.median(shares),
            unit="share",
            spread=(min(shares), max(shares)),
            target=1.0 if args.overflow == "wait" else None,
        ),
    ]
    print_table({"results": [vars(r) for r in results], "machine": machine()})
    for n, (p, r) in enumerate(zip(plain, recorded, strict=True)):
        print(
            f"round {n}: not recorded {p['steps_per_s']:,.0f} steps/s; recorded "
            f"{r['steps_per_s']:,.0f} steps/s, {int(r['recorded'])} of {int(r['finished'])} "
            f"episodes in the dataset, {r['drain_s']:.1f} s to stop"
        )


if __name__ == "__main__":
    main()
