"""dm_env specs in their Gymnasium form, by Shimmy's rules."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from dm_env import specs
from gymnasium import spaces

from envwire.errors import ConfigError
from envwire.kinds.dm_env.specs import DmSpecs, one_number, space_of, to_dm, to_gym
from envwire.testing.dmenvs import GridEnv


def test_each_spec_kind_has_shimmys_space() -> None:
    bounded = specs.BoundedArray((2,), np.float32, [-1.0, -2.0], 3.0)
    assert space_of(bounded) == spaces.Box(
        np.array([-1, -2], np.float32), np.array([3, 3], np.float32), (2,), np.float32
    )
    assert space_of(specs.DiscreteArray(4, np.int32)) == spaces.Discrete(4)
    assert space_of(specs.Array((3,), np.int16)) == spaces.Box(-32768, 32767, (3,), np.int16)
    assert space_of(specs.Array((), np.float64)) == spaces.Box(-np.inf, np.inf, (), np.float64)
    assert space_of(specs.Array((2, 2), bool)) == spaces.Box(0, 1, (2, 2), bool)
    nested = space_of({"b": bounded, "a": (specs.Array((), np.uint8), bounded)})
    assert isinstance(nested, spaces.Dict)
    assert list(nested.spaces) == ["a", "b"]  # Gymnasium sorts plain mappings, as for Shimmy
    assert nested["a"] == spaces.Tuple([spaces.Box(0, 255, (), np.uint8), space_of(bounded)])


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        (specs.StringArray(()), "has no Gymnasium space"),
        ({1: specs.Array((), np.float32)}, "key 1 is not a string"),
        ({"x": {"y": specs.StringArray((2,))}}, r"obs\['x'\]\['y'\]"),
    ],
)
def test_specs_without_a_space_are_refused_by_name(spec: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        space_of(spec, "obs")


def test_rewards_and_discounts_must_be_one_number() -> None:
    one_number(specs.Array((1,), np.float32), "reward spec", "rewards")
    with pytest.raises(ConfigError, match=r"reward spec .* is not one number"):
        one_number(specs.Array((2,), np.float32), "reward spec", "rewards")
    with pytest.raises(ConfigError, match="is not one number"):
        one_number({"a": specs.Array((), np.float32)}, "discount spec", "discounts")


def test_values_follow_the_specs_both_ways() -> None:
    env = GridEnv()
    found = DmSpecs.of(env)
    observation = env.reset().observation
    gym_observation = to_gym(observation, found.observation)
    assert space_of(found.observation).contains(gym_observation)
    assert isinstance(gym_observation["cell"], np.int64)
    assert gym_observation["count"].dtype == np.int64 and gym_observation["count"].shape == ()
    action = space_of(found.action).sample()
    dm_action = to_dm(action, found.action)
    for key, spec in found.action.items():
        spec.validate(dm_action[key])  # dtype and shape exactly as the env's spec says
    ordered = collections.OrderedDict(b=specs.Array((), np.float32), a=specs.Array((), np.int8))
    back = to_dm({"a": 1, "b": 2.5}, ordered)
    assert isinstance(back, collections.OrderedDict) and list(back) == ["b", "a"]
    pair = to_dm((1, [2.0]), [specs.Array((), np.int8), specs.Array((1,), np.float32)])
    assert isinstance(pair, list) and pair[1].dtype == np.float32
