"""A dataset recorded with ``envwire serve --record`` rebuilds its env with Minari's
``recover_environment()`` where the env has a Gymnasium spec (Gymnasium ids, ``gymnasium.Env``
classes, with their kwargs), and says why not where it has none."""

from __future__ import annotations

from pathlib import Path

import minari
import pytest

import envwire
from envwire.testing import ServerProcess, wait_until

GRID = """
import gymnasium as gym
import numpy as np


class Grid(gym.Env):
    action_space = gym.spaces.Discrete(2)

    def __init__(self, rows=4):
        self.rows = rows
        self.observation_space = gym.spaces.Box(0, rows, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.full(1, self.rows, np.float32), 1.0, True, False, {}


def make_grid(rows=4):
    return Grid(rows)
"""

CONFIG = """
[[env]]
id = "my/Grid-v0"
entry_point = "mypkg.envs:Grid"
kwargs = { rows = 8 }
max_episode_steps = 50

[[env]]
id = "my/Made-v0"
entry_point = "mypkg.envs:make_grid"

[[env]]
id = "CartPole-v1"
kwargs = { max_episode_steps = 20, sutton_barto_reward = true }
"""


def _play(url: str) -> None:
    with envwire.make(url) as env:
        env.reset(seed=0)
        while True:
            _, _, terminated, truncated, _ = env.step(0)
            if terminated or truncated:
                return


def _load(dataset_id: str) -> minari.MinariDataset:
    def written() -> bool:
        try:
            return minari.load_dataset(dataset_id).total_episodes >= 1
        except (FileNotFoundError, ValueError):
            return False

    assert wait_until(written, 30)
    return minari.load_dataset(dataset_id)


def test_recorded_datasets_recover_their_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "envs.py").write_text(GRID)
    (tmp_path / "envwire.toml").write_text(CONFIG)
    args = ["--config", "envwire.toml", "--record", "datasets"]
    with ServerProcess([], args, cwd=tmp_path) as server:
        for env_id in ("my/Grid-v0", "my/Made-v0", "CartPole-v1"):
            _play(server.url("gym-socket", env_id))
        monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
        monkeypatch.syspath_prepend(str(tmp_path))  # where the user's module is
        grid, made, cart = (_load(i) for i in ("my/Grid-v0", "my/Made-v0", "CartPole-v1"))

    env = grid.recover_environment()
    assert env.unwrapped.rows == 8 and env.spec is not None and env.spec.max_episode_steps == 50
    env.reset(seed=0)
    assert env.step(0)[0].tolist() == [8.0]
    cart_env = cart.recover_environment()
    assert cart_env.spec is not None and cart_env.spec.max_episode_steps == 20
    assert cart_env.unwrapped.spec.kwargs["sutton_barto_reward"] is True
    assert made.env_spec is None  # a factory: what it makes is known only once it is called
    with pytest.raises(ValueError, match="env_spec is None"):
        made.recover_environment()
