"""Catch: a ball falls down a small grid and a paddle on the bottom row must catch it.

A tiny pixel env (bsuite's classic): the observation is a uint8 image, which makes it the
built-in way to exercise image paths (gym-socket's byte-list observations, raw tensors).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

__all__ = ["CatchEnv"]

_LEFT, _STAY, _RIGHT = 0, 1, 2
_PIXEL = 255


class CatchEnv(gymnasium.Env[npt.NDArray[np.uint8], np.int64]):
    """Catch the falling ball.

    Observation: ``uint8[rows, columns, 1]`` with the ball and the paddle at 255.
    Actions: 0 left, 1 stay, 2 right. Reward +1 for a catch, -1 for a miss, when the ball
    reaches the bottom row, which ends the episode.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 8}  # noqa: RUF012

    def __init__(
        self, rows: int = 10, columns: int = 5, render_mode: str | None = None, scale: int = 16
    ) -> None:
        if rows < 2 or columns < 1:
            raise ValueError(f"Catch needs rows >= 2 and columns >= 1, got {rows}x{columns}")
        self.rows, self.columns, self.scale = rows, columns, scale
        self.render_mode = render_mode
        self.observation_space = spaces.Box(0, _PIXEL, (rows, columns, 1), np.uint8)
        self.action_space = spaces.Discrete(3)
        self._ball = (0, 0)
        self._paddle = columns // 2

    def _observation(self) -> npt.NDArray[np.uint8]:
        board = np.zeros((self.rows, self.columns, 1), np.uint8)
        board[self._ball[0], self._ball[1], 0] = _PIXEL
        board[self.rows - 1, self._paddle, 0] = _PIXEL
        return board

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.uint8], dict[str, Any]]:
        super().reset(seed=seed)
        self._ball = (0, int(self.np_random.integers(self.columns)))
        self._paddle = self.columns // 2
        return self._observation(), {}

    def step(
        self, action: np.int64
    ) -> tuple[npt.NDArray[np.uint8], float, bool, bool, dict[str, Any]]:
        move = int(action) - _STAY
        self._paddle = min(max(self._paddle + move, 0), self.columns - 1)
        row, column = self._ball
        self._ball = (row + 1, column)
        terminated = self._ball[0] == self.rows - 1
        reward = 0.0
        if terminated:
            reward = 1.0 if column == self._paddle else -1.0
        return self._observation(), reward, terminated, False, {}

    def render(self) -> npt.NDArray[np.uint8] | None:
        if self.render_mode != "rgb_array":
            return None
        grey = self._observation()[:, :, 0]
        big = np.kron(grey, np.ones((self.scale, self.scale), np.uint8))
        return np.repeat(big[:, :, None], 3, axis=2)
