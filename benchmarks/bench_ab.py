"""SB3's ``VecEnv`` over gym-socket against two envwire servers at once: two checkouts weighed.

Run: ``python benchmarks/bench_ab.py [--a SRC] [--b SRC] [--seconds S] [--runs R] [--quick]``.
A and B are each an ``envwire serve`` process of CartPole-v1 whose package is the one in SRC (a
checkout's ``src`` directory, put first on the server's ``PYTHONPATH``; without it, the package
this interpreter imports): ``git worktree add /tmp/base HEAD~1``, then ``--a /tmp/base/src
--b src``, weighs the last commit's server side. In the same alternating rounds: SB3's local
``DummyVecEnv`` of 8 CartPoles (the baseline) and the minimal implementation of the same bytes
(``minimal_cases.py``). Each round of each takes 200 batches to warm, then ``--seconds`` of
batches of actions ``i % 2``. Printed: each figure's ratio to ``DummyVecEnv`` (the median of the
rounds' ratios), B over A (the same, round by round), and the CPU a batch of the client and of
each server (``/proc``, medians of the rounds).
"""

from __future__ import annotations

import contextlib
import functools
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np

from envwire.testing import ServerProcess
from harness import (
    Result,
    alternate,
    compare,
    cpu_seconds,
    machine,
    parse_settings,
    print_table,
    rate,
)
from minimal_cases import SB3_N, Sb3Client, minimal_case_server

WARM = 200


def _round(step: Callable[[], Any], seconds: float, pid: int | None) -> tuple[float, float, float]:
    """Batches/s of ``step`` over ``seconds`` (after :data:`WARM`), and the client's and the
    server's (``pid``'s) CPU µs a batch."""
    for _ in range(WARM):
        step()
    server, client = cpu_seconds(pid) if pid else 0.0, time.process_time()
    start = time.perf_counter()
    batches = rate(step, seconds, warmup=0)
    count = batches * (time.perf_counter() - start)
    client = (time.process_time() - client) / count * 1e6
    server = ((cpu_seconds(pid) - server) / count * 1e6) if pid else 0.0
    return batches, client, server


def _server(stack: contextlib.ExitStack, src: str | None) -> ServerProcess:
    """``envwire serve CartPole-v1`` of the package in ``src`` (None: this interpreter's)."""
    saved = os.environ.get("PYTHONPATH")
    if src is not None:
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.abspath(src), saved]))
    try:
        return stack.enter_context(ServerProcess(["CartPole-v1"]))
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def main() -> None:
    args, settings = parse_settings(
        __doc__.splitlines()[0], extra=[("--a", str, None), ("--b", str, None)]
    )
    try:
        from stable_baselines3.common.vec_env import DummyVecEnv

        from envwire.adapters.training.sb3 import make_vec_env
    except ImportError as exc:
        print(f"skipped: the sb3 extra is not installed ({exc})")
        return
    actions = np.arange(SB3_N) % 2
    names = {"dummy": "SB3 DummyVecEnv, local, N=8", "minimal": "minimal Python, N=8"}
    with contextlib.ExitStack() as stack:
        cases: dict[str, tuple[Callable[[], Any], int | None]] = {}
        local = DummyVecEnv([lambda: gymnasium.make("CartPole-v1")] * SB3_N)
        local.seed(0)
        local.reset()
        stack.callback(local.close)
        cases[names["dummy"]] = (lambda: local.step(actions), None)
        for key, src in (("a", args.a), ("b", args.b)):
            server = _server(stack, src)
            remote = make_vec_env(server.url("gym-socket", "CartPole-v1"), SB3_N, monitor=False)
            stack.callback(remote.close)
            remote.seed(0)
            remote.reset()
            names[key] = f"SB3VecEnv, server {key.upper()} ({src or 'installed'})"
            assert server.process is not None
            cases[names[key]] = (functools.partial(remote.step, actions), server.process.pid)
        port, pid = stack.enter_context(minimal_case_server("sb3", None))
        minimal = Sb3Client(port)
        stack.callback(minimal.close)
        minimal.reset(0)
        cases[names["minimal"]] = (lambda: minimal.step(actions), pid)
        rounds = alternate(
            {
                name: functools.partial(_round, step, settings.seconds, server_pid)
                for name, (step, server_pid) in cases.items()
            },
            settings.runs,
        )
    rates = {name: [batches * SB3_N for batches, _, _ in got] for name, got in rounds.items()}
    cpu = {name: [(client, server) for _, client, server in got] for name, got in rounds.items()}
    results = [compare(rates, names["dummy"])]
    results += [compare(rates, names[key], names["dummy"]) for key in ("a", "b", "minimal")]
    results.append(compare(rates, names["b"], names["a"], label="B over A"))
    for name in list(cases)[1:]:
        client = statistics.median(c for c, _ in cpu[name])
        server_cpu = statistics.median(s for _, s in cpu[name])
        results.append(Result(f"client CPU a batch, {name}", client, "us"))
        results.append(Result(f"server CPU a batch, {name}", server_cpu, "us"))
    print_table({"results": [vars(r) for r in results], "machine": machine()})


if __name__ == "__main__":
    main()
