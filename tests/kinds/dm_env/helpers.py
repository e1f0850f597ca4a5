"""Rollouts of Gymnasium forms of dm_env envs, and Shimmy's conversion as the reference."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from envwire.kinds.dm_env import control

__all__ = ["assert_same_results", "rollout", "shimmy_env"]


def shimmy_env(name: str) -> Any:
    """Shimmy's conversion of the suite env ``name`` (the reference)."""
    # Loading first chooses a rendering backend that works here; importing Shimmy imports
    # dm_control's suite, which would otherwise try GLFW, which needs a display.
    env = control.load(name)
    compatibility = pytest.importorskip(
        "shimmy.dm_control_compatibility", reason="the dm-control extra is not installed"
    )
    return compatibility.DmControlCompatibilityV0(env)


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
