"""Train RLlib's PPO for a few iterations on CartPole-v1 served by a running envwire server.

    envwire serve CartPole-v1                  # in another shell: gym-socket on port 5001
    python examples/train_rllib_ppo.py         # or --url grpc://127.0.0.1:50051/CartPole-v1

Each env runner (a Ray actor, its own process) opens one vector session of
``--envs-per-runner`` copies on the server and steps them with one message per step.
Needs the ``rllib`` extra (Ray pins its own Gymnasium release: use a virtualenv of its own).
Starting Ray and building the algorithm takes a while; then each iteration prints a line.
"""

from __future__ import annotations

import argparse
import time

import ray
from ray.rllib.algorithms.ppo import PPOConfig

from envwire.adapters.training.rllib import register


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="gym-socket://127.0.0.1:5001/CartPole-v1")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--runners", type=int, default=1, help="env runner actors")
    parser.add_argument("--envs-per-runner", type=int, default=8)
    args = parser.parse_args()

    print("starting Ray and building PPO (a minute or so)", flush=True)
    ray.init(num_cpus=2, include_dashboard=False)
    config = (
        PPOConfig()
        .environment(register(), env_config={"url": args.url})
        .env_runners(
            num_env_runners=args.runners,
            num_envs_per_env_runner=args.envs_per_runner,
            gym_env_vectorize_mode="vector_entry_point",
        )
        .training(train_batch_size_per_learner=2000, minibatch_size=250, num_epochs=6, lr=3e-4)
        .debugging(seed=0)
    )
    algo = config.build_algo()
    print(f"training: {args.iterations} iterations", flush=True)
    start = time.perf_counter()
    for iteration in range(1, args.iterations + 1):
        runners = algo.train()["env_runners"]
        print(
            f"iteration {iteration:>3}/{args.iterations}: "
            f"mean return {runners['episode_return_mean']:6.1f}, "
            f"{runners['num_env_steps_sampled_lifetime']:>7,.0f} env steps, "
            f"{time.perf_counter() - start:6.1f}s",
            flush=True,
        )
    algo.stop()
    ray.shutdown()


if __name__ == "__main__":
    main()
