""":class:`LeanSyncVectorEnv`: Gymnasium's ``SyncVectorEnv`` with a leaner ``step`` loop.

A server's vector session steps its copies in one loop per batch, and at the batch sizes
training libraries use that loop's own Python weighs as much as a small env's step: Gymnasium's
``SyncVectorEnv.step`` compares the autoreset mode, indexes the envs and reads and writes numpy
scalars (rewards, terminations, truncations, the autoreset flags) once per copy, and calls
``_add_info`` for every copy's info, empty or not. :class:`LeanSyncVectorEnv` keeps everything
else of ``SyncVectorEnv`` (making, seeding, resetting, spaces, closing) and replaces only
``step``: the mode and Gymnasium's functions for the spaces are settled once, each copy's
results go into Python lists that become the arrays returned at once after the loop (not
copies of ``SyncVectorEnv``'s own, which it does not fill), empty infos are
skipped, an array batch's actions are taken by index (an array's iterator ends in a formatted
``IndexError``), observations that make an array of the batch's shape and dtype at once are
that array (``np.stack``'s result without its Python, and with ``copy`` the batch returned, so
that it is not copied again; rows over 16 KiB of a batch kept in the buffer alone are copied in
one by one), the ``SameStep`` info of copies that ended with empty infos is made once after the
loop (a :class:`~envwire.messages.FinalsInfo`: Gymnasium's dict, which also keeps the final
observations as a list for a codec that sends them apart), and a batch of plain arrays is
copied without ``deepcopy``'s dispatch.

The results are those of ``SyncVectorEnv.step`` in each of the three autoreset modes: the same
calls on each copy in the same order, the same arrays (dtypes and values), the same infos with
their ``_key`` masks, the same ``final_obs``/``final_info`` in ``SameStep`` mode and the same
error for a ``Disabled`` step of a copy that needs a reset (``tests/runtime`` holds them side
by side). ``benchmarks/README.md`` has the figures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from copy import deepcopy
from typing import Any

import numpy as np
from gymnasium.spaces import Box, Discrete, MultiBinary, MultiDiscrete
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.vector.utils import concatenate, iterate
from numpy.typing import NDArray

from envwire.messages import FinalsInfo
from envwire.tensor import NDARRAY

__all__ = ["LeanSyncVectorEnv"]

#: Gymnasium's ``VectorEnv._add_info``: (the vector info, a copy's info, the copy) -> the info.
_AddInfo = Callable[[dict[str, Any], dict[str, Any], int], dict[str, Any]]
#: NumPy's functions of every batch as globals (the interpreter specializes a global's load).
_logical_or, _array = np.logical_or, np.array
_F8, _BOOL = np.dtype(np.float64), np.dtype(np.bool_)

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

#: Bytes of a row up to which a batch that stays in the buffer alone (``copy`` False) is made
#: as one array of the rows and copied in: larger rows are copied in one by one, once.
_ONE_ARRAY = 16 * 1024

#: Spaces whose batches Gymnasium iterates with ``iter`` and concatenates with ``np.stack``
#: (its ``iterate`` and ``concatenate`` for them); exact types, since a subclass may register
#: its own.
_ARRAY_SPACES = (Box, Discrete, MultiDiscrete, MultiBinary)


def _flush(
    add_info: _AddInfo, infos: dict[str, Any], ended: list[tuple[int, Any]]
) -> dict[str, Any]:
    """``infos`` with the final observations of ``ended`` added (and ``ended`` emptied), by
    the calls Gymnasium's loop would have made in their place."""
    for i, final in ended:
        infos = add_info(infos, {"final_obs": final, "final_info": {}}, i)
    ended.clear()
    return infos


def _final_obs(count: int, ended: list[tuple[int, Any]]) -> FinalsInfo:
    """Gymnasium's vector info of ``count`` copies where only ``ended`` ended, their final
    infos empty, and no copy has another info: what its ``_add_info`` makes of them, which
    also keeps the final observations as a list (:class:`~envwire.messages.FinalsInfo`)."""
    final = np.empty(count, dtype=object)  # np.full(count, None, dtype=object): full's Python

    flags = [False] * count
    rows = []
    for i, row in ended:
        final[i] = row
        flags[i] = True
        rows.append(row)
    return FinalsInfo.made(final, _array(flags), rows)


def _listed(actions: Iterable[Any], envs: list[Any]) -> list[Any]:
    """The actions of an iterable batch, one per copy of ``envs``.

    Raises:
        ValueError: there are more or fewer actions than copies.
    """
    return [action for action, _ in zip(actions, envs, strict=True)]


def _rows_fit(rows: list[Any], batch: object) -> bool:
    """Whether every item of ``rows`` is a plain array of ``batch``'s row shape and dtype."""
    if type(batch) is not NDARRAY or len(rows) != len(batch):
        return False
    dtype, shape = batch.dtype, batch.shape[1:]
    for row in rows:
        if type(row) is not NDARRAY or row.shape != shape:
            return False
        if row.dtype is not dtype and row.dtype != dtype:
            return False
    return True


class LeanSyncVectorEnv(SyncVectorEnv):
    """``SyncVectorEnv`` whose :meth:`step` costs less Python per copy (same results)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lean = all(hasattr(self, name) for name in _INTERNALS)
        # Gymnasium's dispatch by space, settled once: the same functions it would pick
        self._iterable_actions = type(self.action_space) in _ARRAY_SPACES
        self._stacked = type(self.single_observation_space) in _ARRAY_SPACES
        # Whether a batch is made as one array of its rows (see _stack): its buffer's size
        # and the copy setting are the env's for its life
        batch = getattr(self, "_observations", None)
        self._one_array = (
            self._stacked
            and type(batch) is NDARRAY
            and (self.copy or batch.nbytes <= _ONE_ARRAY * len(batch))
        )

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
        # Each copy's action, taken by index (i below): an array of the copies' actions is
        # indexed as it is (iter(actions)'s items: an array's iterator ends in a formatted
        # IndexError); any other batch is iterated into a list first, one action per copy
        # (ValueError, before any copy steps, where the counts differ).
        each: Any = actions
        if not self._iterable_actions:
            each = _listed(iterate(self.action_space, actions), envs)
        elif type(actions) is not NDARRAY or not actions.ndim or len(actions) != count:
            each = _listed(actions, envs)
        if mode == AutoresetMode.NEXT_STEP:
            autoreset = self._autoreset_envs.tolist()
            for i in range(count):
                if autoreset[i]:
                    obs[i], info = envs[i].reset()
                else:
                    step = envs[i].step(each[i])
                    obs[i], rewards[i], terminations[i], truncations[i], info = step
                if info:
                    infos = add_info(infos, info, i)
        elif mode == AutoresetMode.DISABLED:
            for i in range(count):
                # the caller should have reset it (Gymnasium asserts the same)
                assert not self._autoreset_envs[i], f"{self._autoreset_envs=}"
                step = envs[i].step(each[i])
                obs[i], rewards[i], terminations[i], truncations[i], info = step
                if info:
                    infos = add_info(infos, info, i)
        elif mode == AutoresetMode.SAME_STEP:
            infos = self._same_step(each, obs, rewards, terminations, truncations)
        else:
            raise ValueError(f"Unexpected autoreset mode, {mode}")
        reward_batch, ends, cuts = self._columns(rewards, terminations, truncations)
        batch, fresh = self._stack(obs)
        self._observations = batch
        self._autoreset_envs = _logical_or(ends, cuts)
        if self.copy:
            if fresh is not None:  # the batch's values in an array of their own already
                batch = fresh
            elif type(batch) is NDARRAY and batch.dtype.kind != "O":
                # deepcopy of a plain array is this copy (NumPy's __deepcopy__), without
                # copy's dispatch; object arrays and dicts or tuples of arrays take deepcopy
                batch = batch.copy(order="K")
            else:
                batch = deepcopy(batch)
        return batch, reward_batch, ends, cuts, infos

    def _columns(
        self, rewards: list[Any], terminations: list[Any], truncations: list[Any]
    ) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_]]:
        """The rewards, terminations and truncations returned: arrays made from the lists
        (``SyncVectorEnv`` fills its own and returns copies of them, which nothing else
        reads)."""
        shape = self._rewards.shape
        try:
            reward_batch = _array(rewards, _F8)
            ends, cuts = _array(terminations, _BOOL), _array(truncations, _BOOL)
            numbers = reward_batch.shape == shape and ends.shape == shape and cuts.shape == shape
        except (ValueError, TypeError):
            numbers = False
        if not numbers:
            # a copy's reward or flag that is not one number: Gymnasium's assignment of each
            # copy's, in its order, raises or casts it into its arrays
            for i, reward in enumerate(rewards):
                self._rewards[i] = reward
                self._terminations[i] = terminations[i]
                self._truncations[i] = truncations[i]
            return self._rewards.copy(), self._terminations.copy(), self._truncations.copy()
        return reward_batch, ends, cuts

    def _same_step(
        self,
        each: Any,
        obs: list[Any],
        rewards: list[Any],
        terminations: list[Any],
        truncations: list[Any],
    ) -> dict[str, Any]:
        """The ``SameStep`` loop: each copy stepped with ``each[i]``, reset at once if it
        ended; the infos."""
        infos: dict[str, Any] = {}
        add_info = self._add_info
        # The ended copies whose final info is empty, not yet added: while nothing else is,
        # Gymnasium's vector info of them is made at once after the loop (_final_obs).
        ended: list[tuple[int, Any]] = []
        envs = self.envs
        for i in range(len(envs)):
            env = envs[i]
            obs[i], rewards[i], terminations[i], truncations[i], info = env.step(each[i])
            if terminations[i] or truncations[i]:
                if type(info) is dict and not info:
                    ended.append((i, obs[i]))
                else:
                    if ended:
                        infos = _flush(add_info, infos, ended)
                    infos = add_info(infos, {"final_obs": obs[i], "final_info": info}, i)
                obs[i], info = env.reset()
            if info:
                if ended:
                    infos = _flush(add_info, infos, ended)
                infos = add_info(infos, info, i)
        if ended:
            return _flush(add_info, infos, ended) if infos else _final_obs(len(obs), ended)
        return infos

    def _stack(self, obs: list[Any]) -> tuple[Any, NDArray[Any] | None]:
        """The batch of the copies' observations, in the observations' buffer where it can,
        and a fresh array of the same values where one was made on the way (else None)."""
        batch = self._observations
        if not self._stacked:
            return concatenate(self.single_observation_space, obs, batch), None
        if self._one_array:
            # np.stack's result where the rows make an array of the batch's own shape and
            # dtype at once (one C call, where stack's Python checks and converts each row):
            # then every row was of that shape and the dtype, or promoted to it, as stack
            # casts them.
            try:
                rows = _array(obs)
            except (ValueError, TypeError):  # rows of different shapes: stack says so below
                rows = None
            if (
                rows is not None
                and rows.shape == batch.shape
                and (rows.dtype is batch.dtype or rows.dtype == batch.dtype)
            ):
                batch[...] = rows
                return batch, rows
        elif _rows_fit(obs, batch):
            # Large rows into the buffer alone (no copy returned): each row copied in once,
            # not twice through an array of them
            for i, row in enumerate(obs):
                batch[i] = row
            return batch, None
        return np.stack(obs, axis=0, out=batch), None
