""":class:`LeanSyncVectorEnv`: Gymnasium's ``SyncVectorEnv`` with a leaner ``step`` loop.

A server's vector session steps its copies in one loop per batch, and at the batch sizes
training libraries use that loop's own Python weighs as much as a small env's step: Gymnasium's
``SyncVectorEnv.step`` compares the autoreset mode, indexes the envs and reads and writes numpy
scalars (rewards, terminations, truncations, the autoreset flags) once per copy, and calls
``_add_info`` for every copy's info, empty or not. :class:`LeanSyncVectorEnv` keeps everything
else of ``SyncVectorEnv`` (making, seeding, resetting, spaces, closing) and replaces only
``step``: the mode and Gymnasium's functions for the spaces are settled once, each copy's
results go into Python lists that become the arrays at once after the loop, empty infos are
skipped, and a batch of plain arrays is copied without ``deepcopy``'s dispatch.

The results are those of ``SyncVectorEnv.step`` in each of the three autoreset modes: the same
calls on each copy in the same order, the same arrays (dtypes and values), the same infos with
their ``_key`` masks, the same ``final_obs``/``final_info`` in ``SameStep`` mode and the same
error for a ``Disabled`` step of a copy that needs a reset (``tests/runtime`` holds them side
by side). ``benchmarks/README.md`` has the figures.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

import numpy as np
from gymnasium.spaces import Box, Discrete, MultiBinary, MultiDiscrete
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import concatenate, iterate

__all__ = ["LeanSyncVectorEnv"]

#: What the lean loop reads and writes of ``SyncVectorEnv``'s own state. A Gymnasium release
#: that no longer has one of them gets its own ``step`` (the results are the same).
_INTERNALS = (
    "_env_obs",
    "_autoreset_envs",
    "_rewards",
    "_terminations",
    "_truncations",
    "_observations",
    "_add_info",
)

#: Spaces whose batches Gymnasium iterates with ``iter`` and concatenates with ``np.stack``
#: (its ``iterate`` and ``concatenate`` for them); exact types, since a subclass may register
#: its own.
_ARRAY_SPACES = (Box, Discrete, MultiDiscrete, MultiBinary)


class LeanSyncVectorEnv(SyncVectorEnv):
    """``SyncVectorEnv`` whose :meth:`step` costs less Python per copy (same results)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lean = all(hasattr(self, name) for name in _INTERNALS)
        # Gymnasium's dispatch by space, settled once: the same functions it would pick
        self._iterable_actions = type(self.action_space) in _ARRAY_SPACES
        self._stacked = type(self.single_observation_space) in _ARRAY_SPACES

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step every copy, resetting those that ended as the autoreset mode says."""
        if not self._lean:  # pragma: no cover - a Gymnasium without these internals
            return super().step(actions)
        mode = self.autoreset_mode
        envs = self.envs
        count = len(envs)
        obs = self._env_obs
        rewards: list[Any] = [0.0] * count
        terminations: list[Any] = [False] * count
        truncations: list[Any] = [False] * count
        infos: dict[str, Any] = {}
        add_info = self._add_info
        each = iter(actions) if self._iterable_actions else iterate(self.action_space, actions)
        pairs = enumerate(zip(each, envs, strict=True))
        if mode == AutoresetMode.NEXT_STEP:
            autoreset = self._autoreset_envs.tolist()
            for i, (action, env) in pairs:
                if autoreset[i]:
                    obs[i], info = env.reset()
                else:
                    obs[i], rewards[i], terminations[i], truncations[i], info = env.step(action)
                if info:
                    infos = add_info(infos, info, i)
        elif mode == AutoresetMode.DISABLED:
            for i, (action, env) in pairs:
                # the caller should have reset it (Gymnasium asserts the same)
                assert not self._autoreset_envs[i], f"{self._autoreset_envs=}"
                obs[i], rewards[i], terminations[i], truncations[i], info = env.step(action)
                if info:
                    infos = add_info(infos, info, i)
        elif mode == AutoresetMode.SAME_STEP:
            for i, (action, env) in pairs:
                obs[i], rewards[i], terminations[i], truncations[i], info = env.step(action)
                if terminations[i] or truncations[i]:
                    infos = add_info(infos, {"final_obs": obs[i], "final_info": info}, i)
                    obs[i], info = env.reset()
                if info:
                    infos = add_info(infos, info, i)
        else:
            raise ValueError(f"Unexpected autoreset mode, {mode}")
        self._rewards[:] = rewards
        self._terminations[:] = terminations
        self._truncations[:] = truncations
        batch: Any
        if self._stacked:
            batch = np.stack(obs, axis=0, out=self._observations)  # type: ignore[arg-type]
        else:
            batch = concatenate(self.single_observation_space, obs, self._observations)
        self._observations = batch
        self._autoreset_envs = np.logical_or(self._terminations, self._truncations)
        if self.copy:
            # deepcopy of a plain array is this copy (NumPy's __deepcopy__), without copy's
            # dispatch; object arrays and dicts or tuples of arrays take deepcopy itself
            plain = type(batch) is np.ndarray and batch.dtype.kind != "O"
            batch = batch.copy(order="K") if plain else deepcopy(batch)
        return (
            batch,
            self._rewards.copy(),
            self._terminations.copy(),
            self._truncations.copy(),
            infos,
        )
