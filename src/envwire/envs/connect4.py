"""Connect Four for two players taking turns through one client.

Wire shapes (OpenEnv's connect4 env): action ``{"column": 0..6}``; observation ``{"board":
6x7 list of rows, top row first, 0 empty / 1 / 2, "next_player": 1 or 2, "winner": null, 1, 2
or 0 for a draw}``. A move into a full column is an error (the turn is not lost); a column
outside 0..6 fails validation. The reward is 1.0 for the move that wins, else 0.0.
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import Field

from envwire.errors import InvalidActionError, StateError
from envwire.kinds.typed import (
    Action,
    EnvMetadata,
    Observation,
    State,
    Transform,
    TypedEnv,
)
from envwire.kinds.typed.gymenv import TypedGymEnv, as_gymnasium

__all__ = ["COLUMNS", "ROWS", "Connect4Action", "Connect4Env", "Connect4Observation", "winner"]

ROWS, COLUMNS = 6, 7
_DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))


class Connect4Action(Action):
    """Drop a piece of the player to move into a column."""

    column: int = Field(ge=0, le=COLUMNS - 1, description="Column 0..6, left to right")


class Connect4Observation(Observation):
    """The board after the move, who moves next, and the winner if the game is over."""

    board: list[list[int]] = Field(description="6 rows of 7 cells, top row first; 0, 1 or 2")
    next_player: int = Field(description="The player to move: 1 or 2")
    winner: int | None = Field(default=None, description="1 or 2, 0 for a draw, null while playing")


def winner(board: list[list[int]]) -> int | None:
    """1 or 2 if that player has four in a row, 0 if the board is full, else None."""
    for row in range(ROWS):
        for col in range(COLUMNS):
            player = board[row][col]
            if not player:
                continue
            for dr, dc in _DIRECTIONS:
                end_r, end_c = row + 3 * dr, col + 3 * dc
                if (
                    0 <= end_r < ROWS
                    and 0 <= end_c < COLUMNS
                    and all(board[row + k * dr][col + k * dc] == player for k in range(1, 4))
                ):
                    return player
    return 0 if all(board[0]) else None


class Connect4Env(TypedEnv[Connect4Action, Connect4Observation, State]):
    """Connect Four: players 1 and 2 alternate; four in a row wins."""

    action_type = Connect4Action
    observation_type = Connect4Observation

    def __init__(self, *, transform: Transform[Any] | None = None) -> None:
        super().__init__(transform=transform)
        self._state = State(episode_id=None, step_count=0)
        self._board = [[0] * COLUMNS for _ in range(ROWS)]
        self._player = 1
        self._winner: int | None = None

    def _observation(self, reward: float) -> Connect4Observation:
        return Connect4Observation(
            board=[row[:] for row in self._board],
            next_player=self._player,
            winner=self._winner,
            done=self._winner is not None,
            reward=reward,
        )

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: object
    ) -> Connect4Observation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        self._board = [[0] * COLUMNS for _ in range(ROWS)]
        self._player, self._winner = 1, None
        return self._observation(0.0)

    def step(
        self, action: Connect4Action, timeout_s: float | None = None, **kwargs: object
    ) -> Connect4Observation:
        if self._winner is not None:
            raise StateError("the game is over: reset to play again")
        column = action.column
        free = [r for r in range(ROWS) if self._board[r][column] == 0]
        if not free:
            raise InvalidActionError(
                f"column {column} is full; player {self._player} must choose another column"
            )
        mover = self._player
        self._board[free[-1]][column] = mover
        self._state.step_count += 1
        self._winner = winner(self._board)
        self._player = 2 if mover == 1 else 1
        return self._observation(1.0 if self._winner == mover else 0.0)

    @property
    def state(self) -> State:
        return self._state

    def get_metadata(self) -> EnvMetadata:
        return EnvMetadata(
            name="envwire/Connect4-v0",
            description="Connect Four for two players on a 6x7 board",
            readme_content=__doc__,
            version="1.0.0",
            author="envwire",
        )


def gymnasium_env(*, transform: Transform[Any] | None = None) -> TypedGymEnv:
    """The Gymnasium registration's entry point."""
    return as_gymnasium(Connect4Env(transform=transform))
