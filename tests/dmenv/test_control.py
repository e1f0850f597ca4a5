"""dm_control's suite by name, and our Gymnasium form against Shimmy's for the same seeds."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from envwire.dmenv import DmEnvGym, control
from envwire.errors import ConfigError

pytest.importorskip("dm_control", reason="the dm-control extra is not installed")
pytest.importorskip("shimmy", reason="the dm-control extra is not installed")

#: Suite envs the tests run: cartpole's keys happen to be sorted, walker's are not, and walker
#: has a scalar observation.
SUITE = ("dm_control/cartpole-swingup", "dm_control/walker-walk")


def test_names_are_split_and_checked() -> None:
    assert control.split_name("dm_control/ball_in_cup-catch") == ("ball_in_cup", "catch")
    assert "dm_control/cartpole-swingup_sparse" in control.suite_names()
    with pytest.raises(ConfigError, match="did you mean 'dm_control/cartpole-swingup'"):
        control.split_name("dm_control/cartpole-swingpu")
    with pytest.raises(ConfigError, match="names look like"):
        control.split_name("dm_control/cartpole")


def shimmy_env(name: str) -> Any:
    """Shimmy's conversion of the suite env ``name`` (the reference)."""
    from shimmy.dm_control_compatibility import DmControlCompatibilityV0

    return DmControlCompatibilityV0(control.load(name))


def rollout(env: Any, seed: int, steps: int) -> list[Any]:
    """Reset with ``seed`` and take seeded random actions until the episode ends or ``steps``."""
    actions = np.random.default_rng(seed)
    observation, info = env.reset(seed=seed)
    results: list[Any] = [(observation, info)]
    for _ in range(steps):
        low, high = env.action_space.low, env.action_space.high
        result = env.step(actions.uniform(low, high).astype(env.action_space.dtype))
        results.append(result)
        if result[2] or result[3]:
            break
    return results


def assert_same_results(ours: list[Any], reference: list[Any]) -> None:
    """Observations, rewards, terminations, truncations and infos, exactly."""
    assert len(ours) == len(reference)
    for mine, theirs in zip(ours, reference, strict=True):
        assert mine[0].keys() == theirs[0].keys()
        for key in mine[0]:
            np.testing.assert_array_equal(mine[0][key], theirs[0][key])
            assert np.asarray(mine[0][key]).dtype == np.asarray(theirs[0][key]).dtype
        assert tuple(mine[1:]) == tuple(theirs[1:])


@pytest.mark.parametrize("name", SUITE)
def test_episodes_equal_shimmys(name: str) -> None:
    ours, reference = DmEnvGym(control.load(name)), shimmy_env(name)
    assert ours.observation_space == reference.observation_space
    assert ours.action_space == reference.action_space
    for seed in (0, 5):
        steps = 1000 if seed == 0 and name.endswith("swingup") else 60  # once to the time limit
        assert_same_results(rollout(ours, seed, steps), rollout(reference, seed, steps))
    ours.close()
    reference.close()
