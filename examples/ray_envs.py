"""envwire envs from Ray: episodes in Ray tasks, a vector env in a Ray actor, and an RLlib env
creator registered with Tune, all talking to a running envwire server.

    envwire serve CartPole-v1                 # in another shell: gym-socket on port 5001
    python examples/ray_envs.py               # or --url grpc://127.0.0.1:50051/CartPole-v1

Each Ray task or actor opens its own connection (an envwire client env is a plain object made
where it is used: build it inside the task, not on the driver). The server may itself run its
envs on a Ray cluster (``envwire serve CartPole-v1@ray``); the clients do not change. Needs the
``ray`` extra (``pip install 'envwire[ray]'``); RLlib training itself is in
``examples/train_rllib_ppo.py``.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
import ray

import envwire


@ray.remote
def episode(url: str, seed: int) -> tuple[float, int]:
    """One CartPole episode in a Ray task, always pushing left: (return, length)."""
    env = envwire.make(url)
    try:
        env.reset(seed=seed)
        total, steps, done = 0.0, 0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(0)
            total, steps, done = total + float(reward), steps + 1, terminated or truncated
        return total, steps
    finally:
        env.close()


@ray.remote
class Sampler:
    """A vector env in a Ray actor, as an RL library's rollout worker holds one."""

    def __init__(self, url: str, num_envs: int) -> None:
        self.envs = envwire.make_vec(url, num_envs)
        self.envs.reset(seed=0)

    def sample(self, steps: int) -> dict[str, Any]:
        """``steps`` batched steps with random actions; their rewards as one array."""
        rewards = []
        for _ in range(steps):
            _, reward, _, _, _ = self.envs.step(self.envs.action_space.sample())
            rewards.append(reward)
        return {"rewards": np.stack(rewards), "num_envs": self.envs.num_envs}

    def close(self) -> None:
        self.envs.close()


def rllib_env_creator(config: dict[str, Any]) -> Any:
    """What RLlib calls on each env runner with the ``env_config``: a remote env."""
    return envwire.make(config["url"])


@ray.remote
def make_like_an_env_runner(config: dict[str, Any]) -> str:
    """Build an env with the creator in a Ray worker, as RLlib's env runners do; its spaces."""
    env = rllib_env_creator(config)
    try:
        env.reset(seed=0)
        return f"{env.action_space} / {env.observation_space}"
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="gym-socket://127.0.0.1:5001/CartPole-v1")
    parser.add_argument("--episodes", type=int, default=4)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument(
        "--ray-address",
        help="a Ray cluster to run the tasks on ('local' starts one; default: Ray's own choice, "
        "RAY_ADDRESS or the cluster `ray start` made, else a local one)",
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for Ray")
    args = parser.parse_args()

    ray.init(address=args.ray_address, include_dashboard=False)
    try:
        results = ray.get(
            [episode.remote(args.url, seed) for seed in range(args.episodes)],
            timeout=args.timeout,
        )
        for seed, (total, steps) in enumerate(results):
            print(f"task episode seed={seed}: return {total:.0f} in {steps} steps")

        sampler = Sampler.remote(args.url, args.num_envs)  # type: ignore[attr-defined]
        batch = ray.get(sampler.sample.remote(50), timeout=args.timeout)
        ray.get(sampler.close.remote(), timeout=args.timeout)
        print(
            f"actor make_vec: {batch['num_envs']} copies x 50 steps, "
            f"reward sum {batch['rewards'].sum():.0f}"
        )

        from ray.tune.registry import register_env

        register_env("envwire-cartpole", rllib_env_creator)
        spaces = ray.get(make_like_an_env_runner.remote({"url": args.url}), timeout=args.timeout)
        print(f"RLlib env creator 'envwire-cartpole' registered; in a Ray worker: {spaces}")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
