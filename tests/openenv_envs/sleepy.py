"""An ``Environment[Act, Obs, State]`` whose step sleeps as long as its action asks: a stand-in
for OpenEnv's envs whose steps run for minutes (its julia env allows its code 120 s)."""

from __future__ import annotations

import time
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State


class SleepAction(Action):
    seconds: float


class SleptObservation(Observation):
    slept: float


class SleepyEnvironment(Environment[SleepAction, SleptObservation, State]):
    """Each step sleeps ``action.seconds`` and reports how long it slept."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> SleptObservation:
        self._state = State(episode_id=episode_id, step_count=0)
        return SleptObservation(slept=0.0)

    def step(
        self, action: SleepAction, timeout_s: float | None = None, **kwargs: Any
    ) -> SleptObservation:
        started = time.monotonic()
        time.sleep(action.seconds)
        self._state.step_count += 1
        return SleptObservation(slept=round(time.monotonic() - started, 1), reward=1.0)

    @property
    def state(self) -> State:
        return self._state
