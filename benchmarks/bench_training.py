"""Training wall time over the wire: the two PPO examples, each over gym-socket and locally.

Run: ``python benchmarks/bench_training.py [--steps N] [--runs R] [--quick]``. Trains
``examples/train_sb3_ppo.py`` (SB3's PPO, RL Zoo's CartPole-v1 settings, 8 copies: a local
``DummyVecEnv`` against ``envwire.adapters.training.sb3.make_vec_env``) and
``examples/train_cleanrl_ppo.py`` (a CleanRL-style loop, 8 copies: a local ``SyncVectorEnv``
against ``envwire.make_vec``) for ``--steps`` env steps each, against a real ``envwire serve``
process, in alternating rounds (:func:`harness.alternate`). A figure is training steps per
second of wall time; a ratio is the median of the rounds' own ratios of the run over the wire
to the local one, so ``1 / ratio`` is the wall time ratio (target: at most 1.1, a ratio of at
least 0.91). Both runs of a round use the same seed, one torch thread and deterministic
algorithms, so they train the same policy: the script says so when the parameters differ. A
local warm-up run of each example (up to 2,048 steps) comes first and is not counted.
``--quick``: 512 steps, 1 round (a smoke run). Needs torch, and the ``sb3`` extra for the SB3
example: a missing part skips its cases with a printed reason.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envwire.testing import ServerProcess
from harness import Result, alternate, compare, machine, parse_settings, print_table

__all__ = ["TARGET", "main", "training_cases"]

#: Steps/s over the wire against local, at least: a wall time at most 1.1 times local.
TARGET = 1 / 1.1

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _examples() -> dict[str, Any]:
    """The example modules that import here, by name, printing why any other does not."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))  # the examples import their helper beside them
    found: dict[str, Any] = {}
    try:
        import torch
    except ImportError as exc:
        print(f"training cases skipped: torch is not installed ({exc})")
        return found
    torch.set_num_threads(1)  # as both examples do: the server shares the cores
    torch.use_deterministic_algorithms(True)
    # By name: the examples are scripts found through the path set above, not modules mypy checks.
    try:
        found["CleanRL PPO"] = importlib.import_module("train_cleanrl_ppo")
    except ImportError as exc:
        print(f"CleanRL PPO cases skipped: {exc}")
    try:
        found["SB3 PPO"] = importlib.import_module("train_sb3_ppo")
    except ImportError as exc:
        print(f"SB3 PPO cases skipped: the sb3 extra is not installed ({exc})")
    return found


def _runner(
    example: Any, name: str, url: str | None, steps: int, runs: dict[str, Any]
) -> Callable[[], float]:
    """One training run of ``example`` (locally where ``url`` is None) as training steps per
    second of wall time; its result is kept in ``runs[name]`` for the parameter check."""

    def measure() -> float:
        if example.__name__ == "train_sb3_ppo":
            if url is None:
                from stable_baselines3.common.env_util import make_vec_env as local

                def make(n: int, seed: int) -> Any:
                    return local("CartPole-v1", n_envs=n, seed=seed)
            else:
                from envwire.adapters.training.sb3 import make_vec_env

                def make(n: int, seed: int) -> Any:
                    return make_vec_env(url, n, seed=seed, busy_poll_us=example.BUSY_POLL_US)

            run = example.train(name, make, steps, 0, evaluate=False)
        else:
            factory = example.make_local if url is None else example.make_remote(url)
            run = example.train(factory, steps, 0)
        runs[name] = run
        return float(run["steps"] / run["wall"])

    return measure


def training_cases(steps: int, rounds: int, url: str) -> list[Result]:
    """Each example locally (the baseline) and over ``url``, in alternating rounds."""
    results: list[Result] = []
    for label, example in _examples().items():
        local, remote = f"{label}, local, 8 envs", f"{label} over gym-socket, 8 envs"
        runs: dict[str, Any] = {}
        # a run not counted first: the first training in a process pays torch's one-time
        # start-up costs, which would otherwise fall on the first round's first case
        _runner(example, "warm-up", None, min(steps, 2_048), runs)()
        values = alternate(
            {
                local: _runner(example, local, None, steps, runs),
                remote: _runner(example, remote, url, steps, runs),
            },
            rounds,
        )
        import torch

        same = all(
            torch.equal(runs[local]["params"][key], runs[remote]["params"][key])
            for key in runs[local]["params"]
        )
        if not same:
            print(f"{label}: the last round's parameters differ between local and remote")
        results.append(compare(values, local))
        results.append(compare(values, remote, local, target=TARGET))
    return results


def main() -> None:
    args, settings = parse_settings(
        __doc__, "a smoke run (512 steps, 1 round)", extra=[("--steps", int, 20_000)]
    )
    steps = 512 if args.quick else args.steps
    with ServerProcess(["CartPole-v1"], front_ends=("gym-socket",)) as server:
        results = training_cases(steps, settings.runs, server.url("gym-socket", "CartPole-v1"))
    if results:
        print_table({"results": [vars(r) for r in results], "machine": machine()})
        for r in results:
            if r.ratio:
                print(f"{r.name}: wall time {1 / r.ratio:.2f}x local")


if __name__ == "__main__":
    main()
