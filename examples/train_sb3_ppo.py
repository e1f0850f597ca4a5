"""Train Stable-Baselines3 PPO on CartPole-v1 through a running envwire server, then run the
same script locally, and print both wall times side by side.

    envwire serve CartPole-v1                 # in another shell: gym-socket on port 5001
    python examples/train_sb3_ppo.py          # or --url grpc://127.0.0.1:50051/CartPole-v1

Both runs use the same seeds and the deterministic CPU settings (one torch thread,
``torch.use_deterministic_algorithms``), so they train exactly the same policy: the script checks
that the parameters are identical and that the mean evaluation return reaches 475. Only the wall
time differs, and the ratio is what the wire costs. The exit status is 1 when the parameters
differ, or when a full run (``--steps`` 100,000 or more) does not solve CartPole; a shorter run
prints its figures without judging the return. A short local warm-up run comes first and is
not counted: the first training in a process pays torch's one-time start-up costs, which would
otherwise be charged to whichever run came first. Training takes minutes: each run prints a
progress line every 10 seconds (steps done, steps/s, mean return of its recent episodes).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from _progress import Progress  # beside this script
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env as local_make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy

from envwire.adapters.training.sb3 import make_vec_env

#: CartPole-v1's own reward threshold.
SOLVED = 475.0
#: Steps RL Zoo's settings take to reach it; a shorter run is a smoke run, not judged by it.
FULL_RUN = 100_000

#: µs the client spins for each reply before it sleeps (``--busy-poll-us``; 0: always sleep):
#: PPO waits for every step's reply, and spinning saves a wake-up per step.
BUSY_POLL_US = 1000.0


def linear(start: float) -> Callable[[float], float]:
    """A schedule falling linearly from ``start`` to 0 over training."""
    return lambda remaining: remaining * start


def train(
    name: str,
    make_env: Callable[[int, int], Any],
    steps: int,
    seed: int,
    *,
    evaluate: bool = True,
) -> dict[str, Any]:
    """Train PPO for ``steps`` steps on ``make_env(n_envs, seed)``, then (with ``evaluate``)
    run 20 evaluation episodes; the wall time is training's alone."""
    env = make_env(8, seed)
    # RL Zoo's tuned CartPole-v1 hyperparameters
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=linear(1e-3),
        clip_range=linear(0.2),
        seed=seed,
        device="cpu",
    )
    progress = Progress(name, steps)
    start = time.perf_counter()
    # the callback only reads: the run stays identical to one without it
    model.learn(steps, callback=progress)
    wall = time.perf_counter() - start
    progress.print(model.num_timesteps)
    env.close()
    returns: list[float] = []
    if evaluate:
        print(f"{name}: evaluating 20 episodes", flush=True)
        evaluation = make_env(4, seed + 1000)
        returns, _ = evaluate_policy(
            model, evaluation, n_eval_episodes=20, return_episode_rewards=True
        )
        evaluation.close()
    return {
        "wall": wall,
        "steps": model.num_timesteps,
        "returns": np.asarray(returns, np.float64),
        "params": {k: v.clone() for k, v in model.policy.state_dict().items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="gym-socket://127.0.0.1:5001/CartPole-v1")
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1, help="server worker processes")
    parser.add_argument(
        "--busy-poll-us",
        type=float,
        default=BUSY_POLL_US,
        help="µs to spin for each reply before sleeping, saving a wake-up per step (0: off)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)

    def local(n: int, seed: int) -> Any:
        return local_make_vec_env("CartPole-v1", n_envs=n, seed=seed)

    train("warm-up", local, 2_048, args.seed, evaluate=False)  # not counted: see the docstring
    runs = {
        "envwire": train(
            "envwire",
            lambda n, seed: make_vec_env(
                args.url, n, seed=seed, workers=args.workers, busy_poll_us=args.busy_poll_us
            ),
            args.steps,
            args.seed,
        ),
        "local": train("local", local, args.steps, args.seed),
    }
    print(f"PPO, CartPole-v1, {args.steps:,} steps, 8 envs, seed {args.seed}")
    print(f"{'run':<9} {'wall time':>10} {'steps/s':>9} {'mean return (20 episodes)':>26}")
    for name, run in runs.items():
        mean, std = run["returns"].mean(), run["returns"].std()
        print(
            f"{name:<9} {run['wall']:>9.1f}s {args.steps / run['wall']:>9,.0f} "
            f"{mean:>19.1f} ± {std:.1f}"
        )
    remote, local = runs["envwire"], runs["local"]
    same = all(torch.equal(remote["params"][k], local["params"][k]) for k in local["params"])
    print(f"wall time ratio envwire / local: {remote['wall'] / local['wall']:.2f}")
    print(f"identical policy parameters: {'yes' if same else 'NO'}")
    print(f"identical evaluation returns: {np.array_equal(remote['returns'], local['returns'])}")
    solved = remote["returns"].mean() >= SOLVED
    if args.steps >= FULL_RUN:
        print(f"solved (mean return >= {SOLVED:g}): {'yes' if solved else 'NO'}")
    else:
        print(f"solved: not judged ({args.steps:,} steps; it takes about {FULL_RUN:,})")
    # the wire must train what local stepping trains; a short run is no failure
    if not same or (args.steps >= FULL_RUN and not solved):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
