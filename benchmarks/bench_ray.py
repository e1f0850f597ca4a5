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

Each figure is the median of ``--runs`` rounds in which the cases of one comparison take turns
(``harness.alternate``); a ratio is the median of the rounds' own ratios, printed with their
spread.
"""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.connection
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import numpy as np

import envwire
from envwire.testing import ServerProcess
from harness import (
    Result,
    Settings,
    alternate,
    compare,
    machine,
    parse_settings,
    print_table,
    rate,
)

__all__ = ["bench_batched_ray", "bench_call_cost", "bench_one_step_ray", "main"]

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


PIPE = "pipe round trip to a child process (@process's floor)"
ACTOR_CALL = "no-op Ray actor call (@ray's floor)"


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

    def call_once() -> None:
        ray.get(actor.ping.remote(b"x"), timeout=30)

    try:
        call_once()
        got = alternate(
            {
                PIPE: functools.partial(rate, pipe_once, settings.seconds),
                ACTOR_CALL: functools.partial(rate, call_once, settings.seconds),
            },
            settings.runs,
        )
    finally:
        process.kill()
        process.join(5)
        ray.kill(actor)
    pipe = compare(got, PIPE, unit="calls/s")
    call = compare(got, ACTOR_CALL, PIPE, unit="calls/s")
    call.notes |= {"actor call ms": 1000 / call.value, "pipe round trip ms": 1000 / pipe.value}
    return [pipe, call]


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
        for where in ("process", "ray"):
            url = server.url("gym-socket", f"{where}/CartPole-v1")
            envs[f"gym-socket one step, CartPole @{where}"] = envwire.make(url, timeout=60)
        for env in envs.values():
            env.reset(seed=0)
        cases: dict[str, Callable[[], float]] = {
            name: functools.partial(rate, _one_step(env), settings.seconds, 20)
            for name, env in envs.items()
        }
        got = alternate(cases, settings.runs)
    finally:
        for env in envs.values():
            env.close()
    process, on_ray = list(got)
    return [compare(got, process), compare(got, on_ray, process)]


def _env_steps(env: Any, actions: np.ndarray[Any, Any], seconds: float) -> float:
    """Env steps/s (vector steps/s x copies) of ``env.step(actions)``."""
    return len(actions) * rate(functools.partial(env.step, actions), seconds, 10)


def bench_batched_ray(
    settings: Settings, server: ServerProcess, sizes: Sequence[int]
) -> list[Result]:
    """CartPole batched over gym-socket, ``workers=2``: Ray actors and worker processes beside
    an in-process ``SyncVectorEnv`` of the same N (env steps/s: vector steps x N)."""
    results = []
    for n in sizes:
        actions = np.zeros(n, np.int64)
        local = f"in-process SyncVectorEnv N={n}"
        envs: dict[str, Any] = {}
        try:
            envs[local] = gymnasium.vector.SyncVectorEnv(
                [lambda: gymnasium.make("CartPole-v1")] * n
            )
            for where, label in (("process", "worker processes"), ("ray", "Ray actors")):
                url = server.url("gym-socket", f"{where}/CartPole-v1")
                name = f"gym-socket batched N={n}, workers={WORKERS}, {label}"
                envs[name] = envwire.make_vec(url, n, workers=WORKERS, timeout=60)
            for env in envs.values():
                env.reset(seed=0)
            cases: dict[str, Callable[[], float]] = {
                name: functools.partial(_env_steps, env, actions, settings.seconds)
                for name, env in envs.items()
            }
            got = alternate(cases, settings.runs)
        finally:
            for env in envs.values():
                env.close()
        results += [compare(got, name, None if name == local else local) for name in got]
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
