"""The guess env's Action, Observation and State."""

from __future__ import annotations

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class GuessAction(Action):
    number: int = Field(ge=0, le=100)


class GuessObservation(Observation):
    hint: str
    guesses: int = 0


class GuessState(State):
    secret: int = -1
