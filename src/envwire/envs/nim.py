"""Nim: take 1 to 3 objects from a heap of 10; whoever takes the last object wins.

The arena's public example game, also an ordinary Gymnasium env. The agent moves first; the env
answers with the opponent's move inside the same step, so every observation is the heap the
agent faces. A ``"strong"`` opponent leaves a multiple of 4 whenever it can (and moves at random
when it cannot); a ``"random"`` opponent takes a random legal number. With 10 objects the first
player can always win, so a perfect agent wins every game against either opponent.

The outcome is 1 for a win and 0 for a loss; it is the episode's return and also
``info["outcome"]`` on the final step. Taking more objects than are left raises
:class:`~envwire.errors.InvalidActionError` before anything changes, so the game goes on.
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium
import numpy as np
from gymnasium import spaces

from envwire.errors import InvalidActionError, InvalidArgumentError

__all__ = ["NimEnv", "Opponent", "strong_move"]

Opponent = Literal["strong", "random"]


def strong_move(left: int, max_take: int = 3) -> int | None:
    """The winning move with ``left`` objects on the heap, or None when every move loses."""
    move = left % (max_take + 1)
    return move or None


class NimEnv(gymnasium.Env[np.int64, np.int64]):
    """Nim against a built-in opponent.

    Args:
        objects: the heap at the start (10 in the public example).
        opponent: ``"strong"`` or ``"random"``.
        max_take: the most objects one move may take (3).

    Observation: ``Discrete(objects + 1)``, the objects left. Action: ``Discrete(max_take,
    start=1)``, the objects to take. Reward 1 when the agent takes the last object, 0 otherwise.
    ``info``: ``opponent`` (what the opponent took, when it moved), ``message`` (the move in
    words) and, on the final step, ``outcome``.
    """

    metadata = {  # noqa: RUF012
        "render_modes": [],
        # What an arena needs to host Nim the way the public example does: the percept is the
        # bare number of objects left, the outcome is the env's own, a run may be abandoned
        # (counted as a loss).
        "arena": {
            "percept": "observation",
            "can_abandon": True,
            "abandon_outcome": 0,
        },
    }

    def __init__(self, objects: int = 10, opponent: Opponent = "strong", max_take: int = 3) -> None:
        if objects < 1 or max_take < 1:
            raise InvalidArgumentError(
                f"Nim needs objects >= 1 and max_take >= 1, got {objects} and {max_take}"
            )
        if opponent not in ("strong", "random"):
            raise InvalidArgumentError(f"opponent must be 'strong' or 'random', got {opponent!r}")
        self.objects, self.opponent, self.max_take = objects, opponent, max_take
        self.observation_space = spaces.Discrete(objects + 1)
        self.action_space = spaces.Discrete(max_take, start=1)
        self.left = objects

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.int64, dict[str, Any]]:
        super().reset(seed=seed)
        self.left = self.objects
        return np.int64(self.left), {}

    def _opponent_move(self) -> int:
        most = min(self.max_take, self.left)
        if self.opponent == "strong":
            move = strong_move(self.left, self.max_take)
            if move is not None:
                return move
        return int(self.np_random.integers(1, most + 1))

    def step(self, action: np.int64) -> tuple[np.int64, float, bool, bool, dict[str, Any]]:
        take = int(action)
        if not 1 <= take <= self.max_take:
            raise InvalidActionError(f"take 1 to {self.max_take} objects, not {take}")
        if take > self.left:
            raise InvalidActionError(
                f"you tried to take {take} objects, but only {self.left} are left"
            )
        self.left -= take
        if self.left == 0:
            info = {"message": "You took the last object: you won.", "outcome": 1}
            return np.int64(0), 1.0, True, False, info
        reply = self._opponent_move()
        self.left -= reply
        if self.left == 0:
            info = {
                "opponent": reply,
                "message": f"The opponent took {reply}, the last: you lost.",
                "outcome": 0,
            }
            return np.int64(0), 0.0, True, False, info
        info = {"opponent": reply, "message": f"The opponent took {reply}; {self.left} left."}
        return np.int64(self.left), 0.0, False, False, info
