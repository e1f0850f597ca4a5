"""Observation transforms: functions from an observation to an observation.

A typed env given ``transform=...`` has it applied by its host to every observation that
``reset`` and ``step`` return, before the observation is sent. Transforms may change the
observation in place or return a new one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from envwire.kinds.typed.models import Observation

__all__ = ["Compose", "RewardScaling", "Transform"]

ObsT = TypeVar("ObsT", bound=Observation)

#: Anything that maps an observation to an observation.
Transform = Callable[[ObsT], ObsT]


class Compose:
    """Apply several transforms in order."""

    def __init__(self, *transforms: Transform[Observation]) -> None:
        self.transforms = transforms

    def __call__(self, observation: Observation) -> Observation:
        for transform in self.transforms:
            observation = transform(observation)
        return observation

    def __repr__(self) -> str:
        return f"Compose({', '.join(map(repr, self.transforms))})"


class RewardScaling:
    """Divide the reward by ``divisor`` and clip it to ``[low, high]``; None stays None.

    The default (divide by 10, clip to [0, 1]) is the reward-scaling example of the OpenEnv
    guide.
    """

    def __init__(self, divisor: float = 10.0, low: float = 0.0, high: float = 1.0) -> None:
        if divisor == 0:
            raise ValueError("RewardScaling: divisor must not be 0")
        if low > high:
            raise ValueError(f"RewardScaling: low {low} is above high {high}")
        self.divisor, self.low, self.high = divisor, low, high

    def __call__(self, observation: ObsT) -> ObsT:
        if observation.reward is not None:
            scaled = float(observation.reward) / self.divisor
            observation.reward = min(max(scaled, self.low), self.high)
        return observation

    def __repr__(self) -> str:
        return f"RewardScaling(divisor={self.divisor}, low={self.low}, high={self.high})"
