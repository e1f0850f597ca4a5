"""Small envs that exercise the edges: rich spaces, crashes, hangs and exceptions.

They are importable entry points (``envwire.testing.envs:CrashEnv``), so any server can be
started with them to run the conformance kit.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any, NoReturn, TypeVar

import gymnasium
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

__all__ = [
    "BurnEnv",
    "CrashEnv",
    "DictEnv",
    "FramesEnv",
    "HangEnv",
    "InPlaceFramesEnv",
    "NoRendererEnv",
    "RaiseEnv",
    "TupleEnv",
]


_Obs = TypeVar("_Obs")
_Act = TypeVar("_Act")

# Gymnasium types a Dict space's samples as dict[str, Any] at best and a Tuple space's as
# tuple[T, ...] with one T for every element: the samples of DictEnv and TupleEnv, whose
# values differ in type, are typed as loosely as their spaces.


class _Counter(gymnasium.Env[_Obs, _Act]):
    """A deterministic env whose observations depend on the seed and the actions."""

    horizon = 20

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[_Obs, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        self.base = float(self.np_random.uniform(-1, 1))
        return self._obs(), {"t": self.t}

    def _obs(self) -> _Obs:
        raise NotImplementedError

    def step(self, action: _Act) -> tuple[_Obs, float, bool, bool, dict[str, Any]]:
        self.t += 1
        self.on_step()
        return self._obs(), float(self.t) / 10, self.t >= self.horizon, False, {"t": self.t}

    def on_step(self) -> None:
        """Hook for the misbehaving envs."""


class DictEnv(_Counter[dict[str, Any], npt.NDArray[np.float32]]):
    """Dict observations (image, vector, discrete, text) and a Box action."""

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {
                "image": spaces.Box(0, 255, (6, 4, 3), np.uint8),
                "position": spaces.Box(-np.inf, np.inf, (3,), np.float64),
                "mode": spaces.Discrete(4),
                "label": spaces.Text(max_length=8),
            }
        )
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)

    def _obs(self) -> dict[str, Any]:
        image = np.full((6, 4, 3), self.t % 256, np.uint8)
        position = np.array([self.base, self.t, -self.t], np.float64)
        return {
            "image": image,
            "position": position,
            "mode": np.int64(self.t % 4),
            "label": f"t{self.t}",
        }


class TupleEnv(_Counter[tuple[Any, ...], tuple[Any, ...]]):
    """Tuple observations and Tuple actions (Discrete, MultiBinary)."""

    def __init__(self) -> None:
        self.observation_space = spaces.Tuple(
            (spaces.Discrete(5), spaces.Box(-1.0, 1.0, (2,), np.float32))
        )
        self.action_space = spaces.Tuple((spaces.Discrete(3), spaces.MultiBinary(2)))

    def _obs(self) -> tuple[Any, ...]:
        return (np.int64(self.t % 5), np.array([self.base, 0.5], np.float32))


class CrashEnv(TupleEnv):
    """Kills its own process on step ``crash_at`` (``how``: 'segfault' or 'exit')."""

    def __init__(self, crash_at: int = 3, how: str = "segfault") -> None:
        super().__init__()
        self.crash_at, self.how = crash_at, how

    def on_step(self) -> None:
        if self.t >= self.crash_at:
            if self.how == "exit":
                os._exit(3)
            ctypes.string_at(0)  # a real segfault


class HangEnv(TupleEnv):
    """Sleeps for an hour on step ``hang_at``."""

    def __init__(self, hang_at: int = 2) -> None:
        super().__init__()
        self.hang_at = hang_at

    def on_step(self) -> None:
        if self.t >= self.hang_at:
            time.sleep(3600)


class RaiseEnv(TupleEnv):
    """Raises ``RuntimeError`` on step ``raise_at``."""

    def __init__(self, raise_at: int = 2) -> None:
        super().__init__()
        self.raise_at = raise_at

    def on_step(self) -> None:
        if self.t >= self.raise_at:
            raise RuntimeError(f"RaiseEnv fails on purpose at step {self.t}")


class NoRendererEnv(_Counter[npt.NDArray[np.float32], np.int64]):
    """Offers ``rgb_array`` rendering but cannot draw, like CartPole where pygame is missing:
    ``render()`` raises. Discrete(2) actions, two float32 observations."""

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"]}  # noqa: RUF012

    def __init__(self, render_mode: str | None = None) -> None:
        self.observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.render_mode = render_mode

    def _obs(self) -> npt.NDArray[np.float32]:
        return np.array([self.base, self.t], np.float32)

    def render(self) -> NoReturn:
        raise RuntimeError("NoRendererEnv has no renderer (on purpose)")


class FramesEnv(gymnasium.Env[npt.NDArray[np.uint8], np.int64]):
    """Atari-sized stacked frames (uint8 84x84x4) at almost no env cost: for wire benchmarks."""

    def __init__(self, shape: tuple[int, ...] = (84, 84, 4)) -> None:
        self.observation_space = spaces.Box(0, 255, shape, np.uint8)
        self.action_space = spaces.Discrete(4)
        self._frames = [np.full(shape, i, np.uint8) for i in range(4)]
        self.t = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.uint8], dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return self._frames[0], {}

    def step(
        self, action: np.int64
    ) -> tuple[npt.NDArray[np.uint8], float, bool, bool, dict[str, Any]]:
        self.t += 1
        return self._frames[self.t % 4], 0.0, False, self.t >= 1000, {}


class InPlaceFramesEnv(FramesEnv):
    """:class:`FramesEnv` that, like many Atari frame stacks, returns one array from every call,
    overwritten in place: after step ``t`` (and after a reset, ``t`` = 0) every byte of it is
    ``t % 256``. A server must have sent a frame before the env's next step changes it."""

    def __init__(self, shape: tuple[int, ...] = (84, 84, 4)) -> None:
        super().__init__(shape)
        self._frame = np.zeros(shape, np.uint8)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.uint8], dict[str, Any]]:
        super().reset(seed=seed, options=options)
        self._frame.fill(0)
        return self._frame, {}

    def step(
        self, action: np.int64
    ) -> tuple[npt.NDArray[np.uint8], float, bool, bool, dict[str, Any]]:
        _, reward, terminated, truncated, info = super().step(action)
        self._frame.fill(self.t % 256)
        return self._frame, reward, terminated, truncated, info


class BurnEnv(gymnasium.Env[npt.NDArray[np.int64], np.int64]):
    """A CPU-bound env: each step runs ``work`` rounds of pure-Python integer arithmetic while
    holding the GIL (2,000 rounds: about 200 us on a 2020s x86 core), then sleeps ``sleep``
    seconds (an env that waits on something, such as a simulator it drives).

    For the pool's tests and benchmark: what one core can do with it is the baseline, and the
    work is the same wherever the env runs. Discrete(2) actions; the observation is the step
    count and the arithmetic's last value, so a step cannot be skipped.
    """

    def __init__(self, work: int = 2000, sleep: float = 0.0, horizon: int = 1000) -> None:
        self.observation_space = spaces.Box(0, 2**31, (2,), np.int64)
        self.action_space = spaces.Discrete(2)
        self.work, self.sleep, self.horizon = work, sleep, horizon
        self.t = 0
        self.x = 1

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[npt.NDArray[np.int64], dict[str, Any]]:
        super().reset(seed=seed)
        self.t, self.x = 0, 1 if seed is None else seed + 1
        return np.array([self.t, self.x], np.int64), {}

    def step(
        self, action: np.int64
    ) -> tuple[npt.NDArray[np.int64], float, bool, bool, dict[str, Any]]:
        x = self.x + int(action)
        for _ in range(self.work):  # a linear congruential generator: cheap, unskippable
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        self.x = x
        self.t += 1
        if self.sleep:
            time.sleep(self.sleep)
        return np.array([self.t, x], np.int64), 0.0, False, self.t >= self.horizon, {}
