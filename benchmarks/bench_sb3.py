"""SB3's VecEnv interface over the wire: envwire's ``SB3VecEnv`` beside SB3's ``DummyVecEnv``.

Run: ``python benchmarks/bench_sb3.py [--seconds S] [--runs R] [--quick]``. CartPole env steps/s
through SB3's ``step()`` with fixed actions (no policy), for N = 8 and 64 copies: a local
``DummyVecEnv`` (the baseline) and ``envwire.adapters.training.sb3.make_vec_env`` over
gym-socket and dm_env_rpc against a real ``envwire serve`` process, in alternating rounds
(:func:`harness.alternate`): a ratio is the median of the rounds' own ratios. Needs the ``sb3``
extra (skips without). ``suite.py`` runs the N = 8 gym-socket case through :func:`sb3_cases`,
beside the minimal Python implementation of the same bytes (``minimal_cases.Sb3Client``, as
``bench_minimal.py`` measures it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import numpy as np

from envwire.testing import ServerProcess
from harness import Result, Settings, alternate, compare, machine, parse_settings, print_table, rate
from minimal_cases import SB3_N, Sb3Client, minimal_case_server

__all__ = ["SIZES", "TARGETS", "main", "sb3_cases"]

SIZES = (8, 64)
#: The ratio to DummyVecEnv each N should reach (training libraries run 4-16 envs a process).
TARGETS = {8: 0.45}


def _stepper(env: Any, seconds: float) -> Callable[[], float]:
    """Env steps/s (vector steps x copies) of ``env.step`` over ``seconds``."""
    actions = np.arange(env.num_envs) % 2
    return lambda: rate(lambda: env.step(actions), seconds) * env.num_envs


def sb3_cases(
    settings: Settings,
    server: Any,
    sizes: Sequence[int] = SIZES,
    schemes: Sequence[str] = ("gym-socket", "grpc"),
    minimal: bool = False,
) -> list[Result]:
    """``SB3VecEnv`` over each scheme beside a local ``DummyVecEnv`` of the same N, in
    alternating rounds; with ``minimal``, at N = 8 also the minimal implementation of the
    gym-socket bytes (its own server process); no results (and a line saying why) without the
    ``sb3`` extra."""
    try:
        from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

        from envwire.adapters.training.sb3 import make_vec_env
    except ImportError as exc:
        print(f"SB3 cases skipped: the sb3 extra is not installed ({exc})")
        return []
    results = []
    for n in sizes:
        base = f"SB3 DummyVecEnv, local, N={n}"
        least = f"  minimal Python of the same bytes, N={n}"
        envs: dict[str, VecEnv | Sb3Client] = {
            base: DummyVecEnv([lambda: gymnasium.make("CartPole-v1")] * n)
        }
        for scheme in schemes:
            remote = make_vec_env(server.url(scheme, "CartPole-v1"), n, monitor=False)
            envs[f"SB3VecEnv over {scheme}, N={n}"] = remote
        with contextlib.ExitStack() as servers:
            if minimal and n == SB3_N:
                port, _ = servers.enter_context(minimal_case_server("sb3", None))
                envs[least] = Sb3Client(port)
            try:
                for env in envs.values():
                    if isinstance(env, Sb3Client):
                        env.reset(0)
                    else:
                        env.seed(0)
                        env.reset()
                values = alternate(
                    {name: _stepper(env, settings.seconds) for name, env in envs.items()},
                    settings.runs,
                )
            finally:
                for env in envs.values():
                    env.close()
        results.append(compare(values, base))
        for name in list(envs)[1:]:
            target = None if name == least else TARGETS.get(n)
            results.append(compare(values, name, base, target=target))
    return results


def main() -> None:
    _, settings = parse_settings(__doc__)
    with ServerProcess(["CartPole-v1"], front_ends=("gym-socket", "grpc")) as server:
        results = sb3_cases(settings, server)
    if results:
        print_table({"results": [vars(r) for r in results], "machine": machine()})


if __name__ == "__main__":
    main()
