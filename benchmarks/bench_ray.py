"""Envs in Ray actors (``isolation = "ray"``) beside worker processes and an in-process vector env.

Run: ``python benchmarks/bench_ray.py [--seconds S] [--runs R] [--quick]``. Needs the ``ray``
extra (skips without). One run starts a local Ray (2 CPUs) and a real ``envwire serve`` on it,
then measures, every figure beside a baseline of the same run:

- the cost of one call: a no-op Ray actor call round trip beside a ``multiprocessing`` pipe
  round trip to a child process (what ``@process`` pays per call), both from this process;
- CartPole one step at a time over gym-socket, with the env in a Ray actor (``@ray``) beside a
  worker process (``@process``);
- CartPole batched, N = 256 copies split over ``workers=2`` (one actor call per vector step per
  worker), over gym-socket: Ray actors, and worker processes, beside Gymnasium's in-process
  ``SyncVectorEnv`` with the same N (in a full run also N = 64 and 1024, to show where the
  batch amortizes the actor call).

Each figure is the median of ``--runs`` rounds in which the cases of one comparison take turns.
"""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.connection
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import numpy as np

import envwire
from envwire.testing import ServerProcess
from harness import Result, Settings, machine, parse_settings, print_table, rate

__all__ = ["alternating", "bench_batched_ray", "bench_call_cost", "bench_one_step_ray", "main"]

#: Served by the benchmark's server: CartPole in Ray actors and in worker processes.
ENVS = ("ray/CartPole-v1=CartPole-v1@ray", "process/CartPole-v1=CartPole-v1@process")
WORKERS = 2


def _pipe_echo(conn: multiprocessing.connection.Connection) -> None:
    while True:
        conn.send(conn.recv())


class _Echo:
    """A Ray actor that answers at once: the floor of any actor call."""

    def ping(self, value: Any) -> Any:
        return value


def alternating(settings: Settings, cases: dict[str, Callable[[], float]]) -> dict[str, float]:
    """The median rate of each case over ``settings.runs`` rounds, the cases taking turns in
    each round: on a shared machine the load swings between rounds, so each case sees the same
    swings rather than one of them catching a quiet minute."""
    rounds: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(settings.runs):
        for name, measure in cases.items():
            rounds[name].append(measure())
    return {name: statistics.median(values) for name, values in rounds.items()}


def bench_call_cost(settings: Settings) -> list[Result]:
    """Round trips/s of a no-op Ray actor call beside a pipe to a child process."""
    import ray

    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_pipe_echo, args=(child,), daemon=True)
    process.start()
    actor: Any = ray.remote(num_cpus=0)(_Echo)
    actor = actor.remote()

    def pipe_once() -> None:
        parent.send(b"x")
        parent.recv()

    try:
        ray.get(actor.ping.remote(b"x"), timeout=60)
        got = alternating(
            settings,
            {
                "pipe": lambda: rate(pipe_once, settings.seconds),
                "ray": lambda: rate(
                    lambda: ray.get(actor.ping.remote(b"x"), timeout=30), settings.seconds
                ),
            },
        )
    finally:
        process.kill()
        process.join(5)
        ray.kill(actor)
    pipe, call = got["pipe"], got["ray"]
    return [
        Result("pipe round trip to a child process (@process's floor)", pipe, "calls/s"),
        Result(
            "no-op Ray actor call (@ray's floor)",
            call,
            "calls/s",
            baseline="pipe round trip",
            ratio=call / pipe,
            notes={"actor call ms": 1000 / call, "pipe round trip ms": 1000 / pipe},
        ),
    ]


def _one_step(env: Any) -> Callable[[], None]:
    def one() -> None:
        _, _, terminated, truncated, _ = env.step(0)
        if terminated or truncated:
            env.reset()

    return one


def bench_one_step_ray(settings: Settings, server: ServerProcess) -> list[Result]:
    """CartPole one step at a time over gym-socket: a Ray actor beside a worker process."""
    envs: dict[str, Any] = {}
    try:
        for name in ("process", "ray"):
            envs[name] = envwire.make(server.url("gym-socket", f"{name}/CartPole-v1"), timeout=60)
            envs[name].reset(seed=0)
        got = alternating(
            settings,
            {
                name: functools.partial(rate, _one_step(env), settings.seconds, 20)
                for name, env in envs.items()
            },
        )
    finally:
        for env in envs.values():
            env.close()
    return [
        Result("gym-socket one step, CartPole @process", got["process"]),
        Result(
            "gym-socket one step, CartPole @ray",
            got["ray"],
            baseline="@process",
            ratio=got["ray"] / got["process"],
        ),
    ]


def bench_batched_ray(
    settings: Settings, server: ServerProcess, sizes: Sequence[int]
) -> list[Result]:
    """CartPole batched over gym-socket, ``workers=2``: Ray actors and worker processes beside
    an in-process ``SyncVectorEnv`` of the same N (env steps/s: vector steps x N)."""
    results = []
    for n in sizes:
        actions = np.zeros(n, np.int64)
        envs: dict[str, Any] = {}
        try:
            envs["local"] = gymnasium.vector.SyncVectorEnv(
                [lambda: gymnasium.make("CartPole-v1")] * n
            )
            for name in ("process", "ray"):
                url = server.url("gym-socket", f"{name}/CartPole-v1")
                envs[name] = envwire.make_vec(url, n, workers=WORKERS, timeout=60)
            for env in envs.values():
                env.reset(seed=0)
            got = alternating(
                settings,
                {
                    name: functools.partial(
                        rate, functools.partial(env.step, actions), settings.seconds, 10
                    )
                    for name, env in envs.items()
                },
            )
        finally:
            for env in envs.values():
                env.close()
        base = n * got["local"]
        results.append(Result(f"in-process SyncVectorEnv N={n}", base))
        for name, label in (("process", "worker processes"), ("ray", "Ray actors")):
            results.append(
                Result(
                    f"gym-socket batched N={n}, workers={WORKERS}, {label}",
                    n * got[name],
                    baseline=f"in-process SyncVectorEnv N={n}",
                    ratio=n * got[name] / base,
                )
            )
    return results


def main() -> None:
    args, settings = parse_settings(
        __doc__.split("\n\n")[0], quick="a smoke run (0.3 s, 1 run, N=256)"
    )
    try:
        import ray
    except ImportError as exc:
        print(f"bench_ray: skipped, the ray extra is not installed ({exc})")
        return
    sizes = (256,) if args.quick else (64, 256, 1024)
    # a fresh local Ray of 2 CPUs, never another user's cluster; the server joins it
    ray.init(address="local", num_cpus=2, include_dashboard=False, namespace="envwire")
    try:
        address = str(ray.get_runtime_context().gcs_address)
        results = bench_call_cost(settings)
        with ServerProcess(ENVS, ("--ray-address", address), start_timeout=120) as server:
            results += bench_one_step_ray(settings, server)
            results += bench_batched_ray(settings, server, sizes)
    finally:
        ray.shutdown()
    print_table({"results": [vars(r) for r in results], "machine": machine()})


if __name__ == "__main__":
    main()
