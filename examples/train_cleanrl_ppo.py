"""Train PPO on CartPole-v1 with a CleanRL-style loop (one file, torch, Gymnasium's vector API),
over a running envwire server or, with ``--local``, on an in-process ``SyncVectorEnv``.

    envwire serve CartPole-v1                       # in another shell: gym-socket on port 5001
    python examples/train_cleanrl_ppo.py            # 8 copies stepped by the server
    python examples/train_cleanrl_ppo.py --local    # the same training, 8 local copies

Both runs use the same seeds, ``SameStep`` autoreset and one torch thread, so they see the same
batches and end with the same parameters: only the wall time differs. One torch thread is a
deliberate choice where the server shares the machine: torch's intra-op threads would otherwise
compete with the server's for the same cores, and a policy this small gains nothing from them.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np
import torch
from torch import nn

import envwire

__all__ = [
    "BUSY_POLL_US",
    "Agent",
    "Rollout",
    "advantages",
    "make_local",
    "make_remote",
    "train",
    "update",
]


def make_local(num_envs: int) -> gymnasium.vector.VectorEnv[Any, Any, Any]:
    """``num_envs`` in-process CartPole-v1 copies, ``SameStep`` autoreset (the baseline)."""
    return gymnasium.vector.SyncVectorEnv(
        [lambda: gymnasium.make("CartPole-v1")] * num_envs,
        autoreset_mode=gymnasium.vector.AutoresetMode.SAME_STEP,
    )


#: µs the client spins for each reply before it sleeps: PPO waits for every step's reply (the
#: next action needs it), and on a machine with a core to spare, spinning instead of sleeping
#: saves a wake-up per step (benchmarks/README.md, "Training wall time"). 0: always sleep.
BUSY_POLL_US = 1000.0


def make_remote(
    url: str, busy_poll_us: float = BUSY_POLL_US
) -> Callable[[int], gymnasium.vector.VectorEnv[Any, Any, Any]]:
    """A factory of ``num_envs`` copies of ``url``'s env stepped by the server, one message
    each way per step, ``SameStep`` autoreset like :func:`make_local`."""
    return lambda num_envs: envwire.make_vec(
        url, num_envs, autoreset_mode="SameStep", busy_poll_us=busy_poll_us
    )


def _layer(inputs: int, outputs: int, gain: float) -> nn.Linear:
    """A linear layer with orthogonal weights (``gain``) and zero biases, PPO's usual start."""
    layer = nn.Linear(inputs, outputs)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class Agent(nn.Module):
    """Separate actor and critic MLPs (two tanh layers of 64) over a flat observation."""

    def __init__(self, observations: int, actions: int) -> None:
        super().__init__()
        root2 = float(np.sqrt(2.0))
        self.critic = nn.Sequential(
            _layer(observations, 64, root2),
            nn.Tanh(),
            _layer(64, 64, root2),
            nn.Tanh(),
            _layer(64, 1, 1.0),
        )
        self.actor = nn.Sequential(
            _layer(observations, 64, root2),
            nn.Tanh(),
            _layer(64, 64, root2),
            nn.Tanh(),
            _layer(64, actions, 0.01),
        )

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """The critic's estimate for each row of ``obs``."""
        return self.critic(obs).squeeze(-1)  # type: ignore[no-any-return]

    def act(
        self, obs: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """An action for each row (sampled unless given), its log-probability, the policy's
        entropy and the critic's value."""
        dist = torch.distributions.Categorical(logits=self.actor(obs))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.value(obs)


#: PPO's fixed settings (CleanRL's CartPole defaults): discount, GAE lambda, clip range, value
#: and entropy loss weights, gradient norm limit.
GAMMA, LAMBDA, CLIP, VF_COEF, ENT_COEF, MAX_NORM = 0.99, 0.95, 0.2, 0.5, 0.01, 0.5


class Rollout:
    """One rollout's tensors, ``steps x num_envs``: ``done[t]`` says that ``obs[t]`` begins a
    new episode (the step before it ended one)."""

    def __init__(self, steps: int, num_envs: int, obs_dim: int) -> None:
        self.obs = torch.zeros((steps, num_envs, obs_dim))
        self.action = torch.zeros((steps, num_envs), dtype=torch.long)
        self.logp = torch.zeros((steps, num_envs))
        self.reward = torch.zeros((steps, num_envs))
        self.done = torch.zeros((steps, num_envs))
        self.value = torch.zeros((steps, num_envs))


def advantages(rollout: Rollout, next_value: torch.Tensor, next_done: torch.Tensor) -> torch.Tensor:
    """Generalized advantage estimates, backwards over the rollout; an ended episode's
    successor is not bootstrapped (CleanRL's convention: truncation counts as an end)."""
    steps = rollout.reward.shape[0]
    result = torch.zeros_like(rollout.reward)
    carry = torch.zeros_like(next_value)
    for t in reversed(range(steps)):
        last = t == steps - 1
        follows = 1.0 - (next_done if last else rollout.done[t + 1])
        after = next_value if last else rollout.value[t + 1]
        delta = rollout.reward[t] + GAMMA * after * follows - rollout.value[t]
        carry = delta + GAMMA * LAMBDA * follows * carry
        result[t] = carry
    return result


def update(
    agent: Agent,
    optimizer: torch.optim.Optimizer,
    rollout: Rollout,
    adv: torch.Tensor,
    *,
    epochs: int,
    minibatches: int,
) -> None:
    """``epochs`` passes of clipped-objective minibatch updates over the rollout."""
    batch = adv.numel()
    obs = rollout.obs.reshape(batch, -1)
    action, logp_old = rollout.action.reshape(batch), rollout.logp.reshape(batch)
    flat_adv = adv.reshape(batch)
    target = flat_adv + rollout.value.reshape(batch)
    size = batch // minibatches
    for _ in range(epochs):
        order = torch.randperm(batch)
        for begin in range(0, batch, size):
            idx = order[begin : begin + size]
            _, logp, entropy, value = agent.act(obs[idx], action[idx])
            ratio = (logp - logp_old[idx]).exp()
            a = flat_adv[idx]
            a = (a - a.mean()) / (a.std() + 1e-8)
            policy_loss = torch.max(-a * ratio, -a * ratio.clamp(1.0 - CLIP, 1.0 + CLIP)).mean()
            value_loss = 0.5 * ((value - target[idx]) ** 2).mean()
            loss = policy_loss + VF_COEF * value_loss - ENT_COEF * entropy.mean()
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), MAX_NORM)
            optimizer.step()


def train(
    make_envs: Callable[[int], gymnasium.vector.VectorEnv[Any, Any, Any]],
    steps: int,
    seed: int = 0,
    *,
    num_envs: int = 8,
    rollout_steps: int = 128,
    minibatches: int = 4,
    epochs: int = 4,
    lr: float = 2.5e-4,
) -> dict[str, Any]:
    """PPO for ``steps`` env steps (rounded down to whole rollouts of ``num_envs x
    rollout_steps``, at least one).

    Returns the wall time of training (from the first reset to the last update), the env
    steps done, the returns of every finished episode in order, and the final parameters.
    """
    torch.manual_seed(seed)
    envs = make_envs(num_envs)
    obs_dim = int(np.prod(envs.single_observation_space.shape or ()))
    agent = Agent(obs_dim, int(envs.single_action_space.n))  # type: ignore[attr-defined]
    optimizer = torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5)
    updates = max(steps // (num_envs * rollout_steps), 1)
    rollout = Rollout(rollout_steps, num_envs, obs_dim)

    start = time.perf_counter()
    raw_obs, _ = envs.reset(seed=seed)
    obs = torch.as_tensor(raw_obs, dtype=torch.float32)
    done = torch.zeros(num_envs)
    running = np.zeros(num_envs)
    returns: list[float] = []
    for index in range(updates):
        optimizer.param_groups[0]["lr"] = lr * (1.0 - index / updates)
        for t in range(rollout_steps):
            rollout.obs[t], rollout.done[t] = obs, done
            with torch.no_grad():
                action, logp, _, value = agent.act(obs)
            rollout.action[t], rollout.logp[t], rollout.value[t] = action, logp, value
            raw_obs, reward, terminated, truncated, _ = envs.step(action.numpy())
            ended = np.logical_or(terminated, truncated)
            running += reward
            returns.extend(running[ended].tolist())
            running[ended] = 0.0
            rollout.reward[t] = torch.as_tensor(reward, dtype=torch.float32)
            # SameStep: ``raw_obs`` already begins the next episode where one ended
            obs = torch.as_tensor(raw_obs, dtype=torch.float32)
            done = torch.as_tensor(ended, dtype=torch.float32)
        with torch.no_grad():
            adv = advantages(rollout, agent.value(obs), done)
        update(agent, optimizer, rollout, adv, epochs=epochs, minibatches=minibatches)
    wall = time.perf_counter() - start
    envs.close()
    return {
        "wall": wall,
        "steps": updates * num_envs * rollout_steps,
        "returns": returns,
        "params": {k: v.clone() for k, v in agent.state_dict().items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="gym-socket://127.0.0.1:5001/CartPole-v1")
    parser.add_argument("--local", action="store_true", help="local copies instead of the server")
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument(
        "--busy-poll-us", type=float, default=BUSY_POLL_US, help="spin for replies (0: off)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    make_envs = make_local if args.local else make_remote(args.url, args.busy_poll_us)
    run = train(make_envs, args.steps, args.seed)
    name = "local" if args.local else args.url
    recent = run["returns"][-20:]
    mean = float(np.mean(recent)) if recent else float("nan")
    print(f"PPO (CleanRL-style), CartPole-v1, {run['steps']:,} steps, 8 envs, {name}")
    print(f"wall time {run['wall']:.1f}s, {run['steps'] / run['wall']:,.0f} steps/s")
    print(f"episodes {len(run['returns'])}, mean return of the last 20: {mean:.1f}")


if __name__ == "__main__":
    main()
