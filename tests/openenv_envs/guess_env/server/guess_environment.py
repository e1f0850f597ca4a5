"""Guess a number in 0..100: an ``Environment`` subclass without type arguments."""

from __future__ import annotations

import random
import uuid
from typing import Any

from openenv.core.env_server.interfaces import Environment

from ..models import GuessAction, GuessObservation, GuessState  # noqa: TID252 (the package may be mounted anywhere)


class GuessEnvironment(Environment):  # type: ignore[type-arg]
    """The hint says higher or lower; the seed picks the secret."""

    def __init__(self) -> None:
        super().__init__()
        self._state = GuessState(episode_id=None, step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> GuessObservation:
        secret = random.Random(seed).randint(0, 100)
        self._state = GuessState(
            episode_id=episode_id or str(uuid.uuid4()), step_count=0, secret=secret
        )
        return GuessObservation(hint="guess a number in 0..100", reward=0.0)

    def step(  # type: ignore[override]
        self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any
    ) -> GuessObservation:
        self._state.step_count += 1
        secret = self._state.secret
        if action.number == secret:
            return GuessObservation(hint="yes", guesses=self._state.step_count, reward=1, done=True)
        hint = "higher" if action.number < secret else "lower"
        return GuessObservation(hint=hint, guesses=self._state.step_count, reward=0)

    @property
    def state(self) -> GuessState:
        return self._state
