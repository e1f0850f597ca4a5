"""A ``create_app`` app whose env raises on request: a step whose message is ``"raise"``, and a
reset with seed 13. Served by envwire and by openenv-core's own server, it shows how each
reports an env's exception."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State


class SayAction(Action):
    message: str


class HeardObservation(Observation):
    heard: str


class FaultyEnvironment(Environment[SayAction, HeardObservation, State]):
    """Echoes each message; raises ``ValueError`` where the module's docstring says."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> HeardObservation:
        if seed == 13:
            raise ValueError("seed 13 is unlucky")
        self._state = State(episode_id=episode_id, step_count=0)
        return HeardObservation(heard="")

    def step(
        self, action: SayAction, timeout_s: float | None = None, **kwargs: Any
    ) -> HeardObservation:
        if action.message == "raise":
            raise ValueError("asked to raise: 'raise'")
        self._state.step_count += 1
        return HeardObservation(heard=action.message, reward=1.0)

    @property
    def state(self) -> State:
        return self._state


app = create_app(FaultyEnvironment, SayAction, HeardObservation, max_concurrent_envs=8)
