"""Echo: the smallest typed env; it sends back every message with its length.

Wire shapes (OpenEnv's echo env): action ``{"message": str}``; observation
``{"echoed_message": str, "message_length": int}`` with ``reward`` = length x 0.1 and ``done``
always false. Reset answers "Echo environment ready!" with length 0 and reward 0.0. It also
offers one MCP tool, ``echo_message``.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import Field

from envwire.kinds.typed import (
    Action,
    EnvMetadata,
    Observation,
    State,
    Transform,
    TypedEnv,
    tool,
)
from envwire.kinds.typed.gymenv import TypedGymEnv, as_gymnasium

__all__ = ["EchoAction", "EchoEnv", "EchoObservation", "gymnasium_env"]

READY = "Echo environment ready!"


class EchoAction(Action):
    """A message to echo."""

    message: str = Field(description="The text to send back")


class EchoObservation(Observation):
    """The echoed message and its length."""

    echoed_message: str = Field(description="The message, as received")
    message_length: int = Field(default=0, description="Its length in characters")


class EchoEnv(TypedEnv[EchoAction, EchoObservation, State]):
    """Echoes every message back; reward is 0.1 per character."""

    action_type = EchoAction
    observation_type = EchoObservation

    def __init__(self, *, transform: Transform[Any] | None = None) -> None:
        super().__init__(transform=transform)
        self._episode_id: str | None = None
        self._steps = 0

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: object
    ) -> EchoObservation:
        self._episode_id, self._steps = episode_id or str(uuid.uuid4()), 0
        return EchoObservation(echoed_message=READY, message_length=0, done=False, reward=0.0)

    def step(
        self, action: EchoAction, timeout_s: float | None = None, **kwargs: object
    ) -> EchoObservation:
        self._steps += 1
        length = len(action.message)
        # length / 10 rather than length * 0.1: 13 * 0.1 is 1.3000000000000003.
        return EchoObservation(
            echoed_message=action.message, message_length=length, reward=length / 10
        )

    @property
    def state(self) -> State:
        # Built on demand: the hot path (step) only counts.
        return State(episode_id=self._episode_id, step_count=self._steps)

    def get_metadata(self) -> EnvMetadata:
        return EnvMetadata(
            name="envwire/Echo-v0",
            description="Echoes every message back; reward is 0.1 per character",
            readme_content=__doc__,
            version="1.0.0",
            author="envwire",
        )

    @tool
    def echo_message(self, message: str) -> str:
        """Return the message unchanged (no step is taken)."""
        return message


def gymnasium_env(*, transform: Transform[Any] | None = None) -> TypedGymEnv:
    """The Gymnasium registration's entry point: an :class:`EchoEnv` behind its adapter."""
    return as_gymnasium(EchoEnv(transform=transform))
