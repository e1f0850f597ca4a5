"""The built-in Nim env: the public example's rules, as an ordinary Gymnasium env."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import envwire  # noqa: F401  (registers the built-ins)
from envwire.envs.nim import NimEnv, strong_move
from envwire.errors import InvalidActionError
from envwire.registry import default_catalog


def test_registered_and_in_the_catalog() -> None:
    env = gymnasium.make("envwire/Nim-v0")
    assert env.observation_space == gymnasium.spaces.Discrete(11)
    assert env.action_space == gymnasium.spaces.Discrete(3, start=1)
    assert "envwire/Nim-v0" in default_catalog()
    check_env(env.unwrapped)
    check_env(gymnasium.make("envwire/Nim-v0", opponent="random").unwrapped)


def play(env: NimEnv, seed: int, choose: object) -> tuple[list[int], float, dict[str, object]]:
    obs, _ = env.reset(seed=seed)
    seen = [int(obs)]
    while True:
        obs, reward, terminated, truncated, info = env.step(np.int64(choose(int(obs))))  # type: ignore[operator]
        seen.append(int(obs))
        assert not truncated
        if terminated:
            return seen, reward, info


@pytest.mark.parametrize("opponent", ["strong", "random"])
def test_perfect_play_always_wins(opponent: str) -> None:
    env = NimEnv(opponent=opponent)  # type: ignore[arg-type]
    for seed in range(30):
        seen, reward, info = play(env, seed, lambda left: strong_move(left) or 1)
        assert seen[0] == 10
        assert reward == 1.0
        assert info["outcome"] == 1


def test_the_strong_opponent_punishes_mistakes() -> None:
    env = NimEnv()
    for seed in range(10):
        seen, reward, info = play(env, seed, lambda left: 1)
        assert reward == 0.0
        assert info["outcome"] == 0
        assert seen == [10, 8, 4, 0]  # 10-1=9 -> takes 1; 8-1=7 -> takes 3; 4-1=3 -> takes 3


def test_same_seed_same_game() -> None:
    first = play(NimEnv(opponent="random"), 7, lambda left: 1)
    again = play(NimEnv(opponent="random"), 7, lambda left: 1)
    assert first == again


def test_taking_too_many_is_refused_and_changes_nothing() -> None:
    env = NimEnv(objects=2)
    env.reset(seed=0)
    with pytest.raises(InvalidActionError, match="only 2 are left"):
        env.step(np.int64(3))
    with pytest.raises(InvalidActionError, match="take 1 to 3"):
        env.step(np.int64(0))
    assert env.left == 2
    _, reward, terminated, _, info = env.step(np.int64(2))
    assert (reward, terminated, info["outcome"]) == (1.0, True, 1)
