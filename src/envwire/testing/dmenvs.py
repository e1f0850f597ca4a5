"""A small ``dm_env.Environment`` with every kind of spec envwire serves from dm_env envs.

:class:`GridEnv` (``envwire.testing.dmenvs:GridEnv``) is what dm_control's suite lacks for tests:
nested dict observations whose keys are not in sorted order, ``DiscreteArray`` and ``int32``
leaves, per-element bounds, ``float32`` rewards, episodes that terminate (discount 0) and
episodes that are cut by a time limit (LAST with discount 1), discounts other than 0 and 1 when
asked (``gamma``), and a ``seed`` method.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dm_env
import numpy as np
import numpy.typing as npt
from dm_env import specs

__all__ = ["GridEnv"]


class GridEnv(dm_env.Environment):  # type: ignore[misc]  # dm_env ships no types
    """Walk along ``cells`` cells to the last one.

    Observations: ``position`` (float32 [2], bounds per element), ``arm.angle`` (float64
    scalar) and ``arm.touch`` (bool [3]), ``count`` (int64 scalar, unbounded), ``cell``
    (``DiscreteArray``, int32). Actions: ``move`` (``DiscreteArray(3)``, int32: 0 left, 1 stay,
    2 right) and ``force`` (float32 [2] in [-1, 1], added to ``position``). Reward: float32,
    1.0 on reaching the last cell. Reaching it terminates (discount 0); ``limit`` steps
    without reaching it end the episode with discount 1 (a truncation). Other steps have
    discount ``gamma``.

    Args:
        cells: how many cells there are.
        limit: steps before the episode is cut.
        gamma: the discount of steps that do not end the episode.
    """

    def __init__(self, cells: int = 5, limit: int = 20, gamma: float = 1.0) -> None:
        self.cells, self.limit, self.gamma = cells, limit, gamma
        self._random = np.random.RandomState(0)
        self._needs_reset = True
        self._cell = 0
        self._t = 0
        self._position = np.zeros(2, np.float32)

    def seed(self, seed: int) -> None:
        """Seed the random start cell of the next episodes."""
        self._random = np.random.RandomState(seed)

    def observation_spec(self) -> dict[str, Any]:
        return {
            "position": specs.BoundedArray(
                (2,), np.float32, [-1.0, -2.0], [1.0, 2.0], name="position"
            ),
            "arm": {
                "angle": specs.Array((), np.float64, name="angle"),
                "touch": specs.Array((3,), bool, name="touch"),
            },
            "count": specs.Array((), np.int64, name="count"),
            "cell": specs.DiscreteArray(self.cells, np.int32, name="cell"),
        }

    def action_spec(self) -> dict[str, Any]:
        return {
            "move": specs.DiscreteArray(3, np.int32, name="move"),
            "force": specs.BoundedArray((2,), np.float32, -1.0, 1.0, name="force"),
        }

    def reward_spec(self) -> specs.Array:
        return specs.Array((), np.float32, name="reward")

    def reset(self) -> dm_env.TimeStep:
        self._needs_reset = False
        self._cell = int(self._random.randint(0, self.cells - 1))
        self._t = 0
        self._position = self._random.uniform(-0.5, 0.5, 2).astype(np.float32)
        return dm_env.restart(self._observation())

    def step(self, action: Mapping[str, npt.NDArray[Any]]) -> dm_env.TimeStep:
        if self._needs_reset:
            return self.reset()
        move = int(action["move"]) - 1
        self._cell = min(max(self._cell + move, 0), self.cells - 1)
        limits = np.array([1.0, 2.0], np.float32)
        force = np.asarray(action["force"], np.float32)
        self._position = np.clip(self._position + force / 4, -limits, limits)
        self._t += 1
        observation = self._observation()
        if self._cell == self.cells - 1:
            self._needs_reset = True
            return dm_env.termination(np.float32(1.0), observation)
        if self._t >= self.limit:
            self._needs_reset = True
            return dm_env.truncation(np.float32(0.0), observation)
        return dm_env.transition(np.float32(-0.01), observation, discount=self.gamma)

    def _observation(self) -> dict[str, Any]:
        return {
            "position": self._position.copy(),
            "arm": {
                "angle": np.float64(self._t) / 10.0,
                "touch": np.array([self._cell == 0, _odd(self._t), False]),
            },
            "count": np.int64(self._t),
            "cell": np.int32(self._cell),
        }


def _odd(t: int) -> bool:
    """A bool that changes from step to step."""
    return t % 2 == 1
