"""A generic-typed env: its models are the type arguments of ``Environment[...]``; no app."""

from __future__ import annotations

from typing import Any, Literal

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State


class MoveAction(Action):
    direction: Literal["left", "right"]


class PositionObservation(Observation):
    position: int


class WalkState(State):
    position: int = 0


class WalkEnvironment(Environment[MoveAction, PositionObservation, WalkState]):
    """Walk on a line from ``start`` (a reset keyword); reaching +3 ends the episode."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = WalkState()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, start: int = 0
    ) -> PositionObservation:
        self._state = WalkState(episode_id=episode_id, position=start)
        return PositionObservation(position=start)

    def step(
        self, action: MoveAction, timeout_s: float | None = None, **kwargs: Any
    ) -> PositionObservation:
        self._state.step_count += 1
        self._state.position += 1 if action.direction == "right" else -1
        done = self._state.position >= 3
        obs = PositionObservation(position=self._state.position, reward=float(done), done=done)
        if timeout_s is not None:
            obs.metadata["timeout_s"] = timeout_s
        return obs

    @property
    def state(self) -> WalkState:
        return self._state
