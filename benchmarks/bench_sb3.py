"""SB3's VecEnv interface over the wire: envwire's ``SB3VecEnv`` beside SB3's ``DummyVecEnv``.

Run: ``python benchmarks/bench_sb3.py [--seconds S] [--runs R] [--quick]``. CartPole env steps/s
through SB3's ``step()`` with fixed actions (no policy), for N = 8 and 64 copies: a local
``DummyVecEnv`` (the baseline) and
``envwire.adapters.training.sb3.make_vec_env`` over gym-socket and
dm_env_rpc against a real ``envwire serve`` process. Needs the ``sb3`` extra (skips without).
"""

from __future__ import annotations

import statistics
from typing import Any

import gymnasium
import numpy as np

from envwire.testing import ServerProcess
from harness import Result, Settings, machine, parse_settings, print_table, rate

SIZES = (8, 64)


def steps_per_second(env: Any, settings: Settings) -> float:
    """Env steps/s (vector steps x copies) of ``env.step`` over ``settings``, median of runs."""
    env.seed(0)
    env.reset()
    actions = np.arange(env.num_envs) % 2

    def measure() -> float:
        return rate(lambda: env.step(actions), settings.seconds) * env.num_envs

    try:
        return statistics.median(measure() for _ in range(settings.runs))
    finally:
        env.close()


def main() -> None:
    _, settings = parse_settings(__doc__)
    try:
        from stable_baselines3.common.vec_env import DummyVecEnv

        from envwire.adapters.training.sb3 import make_vec_env
    except ImportError as exc:
        print(f"bench_sb3: skipped, the sb3 extra is not installed ({exc})")
        return
    results = []
    with ServerProcess(["CartPole-v1"], front_ends=("gym-socket", "grpc")) as server:
        for n in SIZES:
            local = DummyVecEnv([lambda: gymnasium.make("CartPole-v1")] * n)
            baseline = steps_per_second(local, settings)
            results.append(Result(f"SB3 DummyVecEnv, local, N={n}", baseline))
            for scheme in ("gym-socket", "grpc"):
                remote = make_vec_env(server.url(scheme, "CartPole-v1"), n, monitor=False)
                value = steps_per_second(remote, settings)
                name = f"SB3VecEnv over {scheme}, N={n}"
                results.append(Result(name, value, baseline="DummyVecEnv", ratio=value / baseline))
    print_table({"results": [vars(r) for r in results], "machine": machine()})


if __name__ == "__main__":
    main()
