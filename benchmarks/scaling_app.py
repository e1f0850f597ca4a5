"""A sleeping openenv-core app, for ``bench_scaling.py``'s smoke run without the harness.

The scaling harness's own env sleeps for the ``wait_seconds`` of each step's action and names
its session; this one does the same for the smoke run, so that ``bench_scaling.py --quick``
goes through the same path as a full run (``envwire serve`` reading an openenv-core app
module, the session held over the WebSocket while its step sleeps in the env) where the
harness is not checked out. ``envwire serve smoke/Nap-v0=scaling_app:app --app-dir
benchmarks`` serves it.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

__all__ = ["NapAction", "NapEnvironment", "NapObservation", "app"]


class NapAction(Action):  # type: ignore[misc]
    """Sleep this long in the step."""

    wait_seconds: float = 0.0


class NapObservation(Observation):  # type: ignore[misc]
    """How long the step slept, and which session it was (each session has its own env)."""

    waited_seconds: float = 0.0
    session: str = ""
    step_count: int = 0


class NapEnvironment(Environment[NapAction, NapObservation, State]):  # type: ignore[misc]
    """An env whose step sleeps: a session that waits, like one waiting on a slow simulator."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._session = uuid.uuid4().hex[:12]
        self._state = State(episode_id=self._session, step_count=0)

    def reset(self, seed: Any = None, episode_id: Any = None, **kw: Any) -> NapObservation:
        """A fresh episode of the same session."""
        self._state = State(episode_id=self._session, step_count=0)
        return NapObservation(session=self._session)

    def step(self, action: NapAction, timeout_s: Any = None, **kw: Any) -> NapObservation:
        """Sleep ``action.wait_seconds`` (a blocking sleep, as the harness's env does)."""
        if action.wait_seconds > 0:
            time.sleep(action.wait_seconds)
        self._state.step_count += 1
        return NapObservation(
            waited_seconds=action.wait_seconds,
            session=self._session,
            step_count=self._state.step_count,
        )

    @property
    def state(self) -> State:
        """The episode's state: its id and the steps taken."""
        return self._state


# The smoke run opens at most a few dozen sessions at once; 256 leaves room without inviting
# a run that would need the harness's 20,000.
app = create_app(NapEnvironment, NapAction, NapObservation, env_name="nap", max_concurrent_envs=256)
