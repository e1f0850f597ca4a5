"""Importable helpers for the adapter tests (entry points served by test servers)."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

#: Steps before the time limit truncates a Ticker episode.
TICKER_LIMIT = 6


class Ticker(gymnasium.Env[np.ndarray, np.int64]):
    """Short seeded episodes that end both ways (by chance, or at the time limit, sometimes on
    the same step) with infos on reset and on every step: everything an autoreset can mix up."""

    observation_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = spaces.Discrete(3)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        offset = float((options or {}).get("offset", 0.0))
        self._obs = np.clip(self.np_random.uniform(-0.5, 0.5, 3) + offset, -1, 1).astype(np.float32)
        return self._obs.copy(), {"start": self._obs[0], "offset": offset}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self._t += 1
        self._obs = np.clip(self._obs + 0.1 * (int(action) - 1), -1, 1).astype(np.float32)
        reward = float(action) * float(self.np_random.random())
        terminated = bool(self.np_random.random() < 0.15)
        return self._obs.copy(), reward, terminated, False, {"t": self._t, "trace": np.arange(2)}


class QuietTicker(Ticker):
    """A :class:`Ticker` with no infos: its ended steps carry only final observations."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        return super().reset(seed=seed, options=options)[0], {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        return (*super().step(action)[:4], {})  # type: ignore[return-value]


def quiet_ticker() -> gymnasium.Env[np.ndarray, np.int64]:
    """A :class:`QuietTicker` truncated after :data:`TICKER_LIMIT` steps."""
    return gymnasium.wrappers.TimeLimit(QuietTicker(), TICKER_LIMIT)


def ticker() -> gymnasium.Env[np.ndarray, np.int64]:
    """A :class:`Ticker` truncated after :data:`TICKER_LIMIT` steps."""
    return gymnasium.wrappers.TimeLimit(Ticker(), TICKER_LIMIT)
