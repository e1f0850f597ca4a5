"""dm_env envs as Gymnasium envs: Shimmy's rules, seeding, and Shimmy itself as the reference."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import dm_env
import numpy as np
import pytest
from dm_env import specs
from gymnasium.utils.env_checker import check_env

from envwire.errors import ConfigError
from envwire.kinds.dm_env import DmEnvGym, as_gymnasium, seed_dm_env
from envwire.testing.dmenvs import GridEnv


def _check_env(env: Any) -> None:
    with warnings.catch_warnings():
        # dm_env's unbounded Arrays are Boxes with infinite bounds, which check_env remarks on
        warnings.filterwarnings("ignore", message=".*(infinity|precision lowered).*")
        check_env(env, skip_render_check=True)


def test_time_steps_become_shimmys_five_values() -> None:
    env = as_gymnasium(GridEnv(cells=3, limit=4))
    observation, info = env.reset(seed=1)
    assert env.observation_space.contains(observation)
    to_go = 2 - int(observation["cell"])
    assert info == {"timestep.discount": None, "timestep.step_type": dm_env.StepType.FIRST}
    stay = {"move": 1, "force": np.zeros(2, np.float32)}
    right = {"move": 2, "force": np.zeros(2, np.float32)}
    _, reward, terminated, truncated, info = env.step(stay)
    assert (reward, terminated, truncated) == (pytest.approx(-0.01), False, False)
    assert info["timestep.step_type"] == dm_env.StepType.MID
    results = [env.step(right) for _ in range(to_go)]
    assert results[-1][1:4] == (1.0, True, False)  # reached the last cell: discount 0
    assert results[-1][4]["timestep.discount"] == 0.0
    env.reset(seed=1)
    results = [env.step(stay) for _ in range(4)]
    assert [r[2:4] for r in results] == [(False, False)] * 3 + [(False, True)]  # cut, discount 1
    assert results[-1][4] == {"timestep.discount": 1.0, "timestep.step_type": dm_env.StepType.LAST}


def test_seeds_reach_the_env_and_check_env_passes() -> None:
    env = as_gymnasium(GridEnv(cells=50))
    first = [env.reset(seed=7)[0]["cell"] for _ in range(2)]
    other = env.reset(seed=8)[0]["cell"]
    assert first[0] == first[1] and first[0] != other
    _check_env(as_gymnasium(GridEnv()))


class _Plain(dm_env.Environment):  # type: ignore[misc]
    """No seed method, nothing to seed."""

    def reset(self) -> dm_env.TimeStep:
        return dm_env.restart(np.zeros(1))

    def step(self, action: Any) -> dm_env.TimeStep:
        return dm_env.transition(0.0, np.zeros(1))

    def observation_spec(self) -> specs.Array:
        return specs.Array((1,), np.float64)

    def action_spec(self) -> specs.Array:
        return specs.DiscreteArray(2)


def test_an_env_that_cannot_be_seeded_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    assert not seed_dm_env(_Plain(), 3)
    env = as_gymnasium(_Plain())
    with caplog.at_level(logging.WARNING, "envwire.kinds.dm_env"):
        env.reset(seed=1)
        env.reset(seed=2)
    messages = [record.message for record in caplog.records]
    assert messages == ["_Plain has no way to be seeded; seeds are ignored"]


def test_what_has_no_gymnasium_form_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"is not a dm_env\.Environment"):
        as_gymnasium(object())

    class Pairs(_Plain):
        def reward_spec(self) -> specs.Array:
            return specs.Array((2,), np.float64, name="reward")

    with pytest.raises(ConfigError, match=r"Pairs reward spec .* is not one number"):
        DmEnvGym(Pairs())
    with pytest.raises(ConfigError, match="cannot render in mode 'rgb_array'"):
        DmEnvGym(_Plain(), render_mode="rgb_array")
