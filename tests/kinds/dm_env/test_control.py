"""dm_control's suite by name, and our Gymnasium form against Shimmy's for the same seeds."""

from __future__ import annotations

import pytest

from envwire.errors import ConfigError
from envwire.kinds.dm_env import DmEnvGym, control

from .helpers import assert_same_results, rollout, shimmy_env

pytest.importorskip("dm_control", reason="the dm-control extra is not installed")

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
