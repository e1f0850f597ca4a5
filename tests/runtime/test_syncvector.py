"""LeanSyncVectorEnv steps exactly as Gymnasium's SyncVectorEnv, in every autoreset mode."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from envwire.messages import FinalsInfo
from envwire.registry import EnvSpec
from envwire.runtime.hosts import VectorHost
from envwire.runtime.syncvector import LeanSyncVectorEnv
from envwire.testing.envs import FramesEnv, InPlaceFramesEnv
from tests.spaces_catalog import assert_same

COPIES = 5
STEPS = 120


class InfoEnv(gymnasium.Env[dict[str, Any], np.int64]):
    """A Dict observation, episodes of random length (some truncated), and infos that vary
    from step to step: empty, ints, floats, arrays, nested dicts and odd objects, so that every
    branch of the vector env's info batching is taken."""

    observation_space = spaces.Dict(
        {"x": spaces.Box(-10.0, 10.0, (2,), np.float32), "n": spaces.Discrete(1000)}
    )
    action_space = spaces.Discrete(3)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        self.limit = int(self.np_random.integers(2, 9))
        return self._obs(), {"reset_at": self.limit} if self.limit % 2 else {}

    def _obs(self) -> dict[str, Any]:
        x = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return {"x": x, "n": self.t}

    def step(self, action: np.int64) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        self.t += 1
        roll = int(self.np_random.integers(6))
        info: dict[str, Any] = {}
        if roll == 1:
            info = {"count": self.t, "weight": float(action) / 2}
        elif roll == 2:
            info = {"vec": np.full(3, self.t, np.int16), "nested": {"deep": self.t * 1.5}}
        elif roll == 3:
            info = {"label": f"step {self.t}", "flag": bool(action)}
        reward = np.float32(action) - 0.5 if roll != 4 else 1
        terminated = self.t >= self.limit and roll % 2 == 0
        truncated = self.t >= self.limit + 2
        return self._obs(), reward, terminated, truncated, info


class BoxInfoEnv(InfoEnv):
    """:class:`InfoEnv` with a Box observation: its batch is one array of its rows."""

    observation_space = spaces.Box(-10.0, 10.0, (2,), np.float32)  # type: ignore[assignment]

    def _obs(self) -> Any:
        return self.np_random.uniform(-1, 1, 2).astype(np.float32)


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda m: m.value)
@pytest.mark.parametrize(
    "make",
    [InfoEnv, BoxInfoEnv, lambda: gymnasium.make("CartPole-v1")],
    ids=["info", "box-info", "cartpole"],
)
@pytest.mark.parametrize("copy", [True, False], ids=["copied", "own-buffer"])
def test_every_step_equals_gymnasiums(mode: AutoresetMode, make: Any, copy: bool) -> None:
    """Same seeds, same actions: every step's observations, rewards, terminations,
    truncations and infos (final observations and infos included) are Gymnasium's, type for
    type and bit for bit, and every mode's resets happen at the same steps; with ``copy``
    False the observations are the vector env's own buffer, as Gymnasium's are."""
    ours = LeanSyncVectorEnv([make] * COPIES, autoreset_mode=mode, copy=copy)
    theirs = SyncVectorEnv([make] * COPIES, autoreset_mode=mode, copy=copy)
    assert_same(ours.reset(seed=7), theirs.reset(seed=7), "reset")
    rng = np.random.default_rng(0)
    ended = 0
    for step in range(STEPS):
        actions = rng.integers(0, 2, COPIES)
        mine, gyms = ours.step(actions), theirs.step(actions)
        assert_same((*mine[:4], _plain(mine[4])), gyms, f"step {step}")
        assert (mine[0] is ours._observations) is not copy  # a copy, or the buffer itself
        done = np.logical_or(gyms[2], gyms[3])
        ended += int(done.sum())
        if mode is AutoresetMode.DISABLED and done.any():
            # (Gymnasium pops the mask out of the options it is given: one dict each)
            mine_reset = ours.reset(options={"reset_mask": done.copy()})
            assert_same(mine_reset, theirs.reset(options={"reset_mask": done}), f"reset {step}")
    assert ended > 10  # the episodes did end, often, so the autoreset paths ran
    ours.close()
    theirs.close()


def _plain(infos: dict[str, Any]) -> dict[str, Any]:
    """``infos`` as a dict; a :class:`FinalsInfo` checked first: its list of final
    observations is the object array's arrays, in copy order, and its mask ``_final_obs``."""
    if type(infos) is not FinalsInfo:
        return infos
    kept = infos.kept()
    assert kept is not None
    rows, mask = kept
    assert mask is infos["_final_obs"] and mask.any()
    final = infos["final_obs"].tolist()
    marked = np.flatnonzero(mask).tolist()
    assert len(rows) == len(marked)
    assert all(row is final[i] for row, i in zip(rows, marked, strict=True))
    return dict(infos)


class _OddObsEnv(gymnasium.Env[Any, np.int64]):
    """A Box env whose observations are not always arrays of its space's dtype and shape."""

    shape: ClassVar[tuple[int, ...]] = (2,)
    observation_space = spaces.Box(-1, 1, shape, np.float32)
    action_space = spaces.Discrete(6)
    odd: ClassVar[dict[int, Any]] = {
        1: np.array([0.1, 0.2]),  # float64: cast to the batch's float32
        2: [0.25, 0.5],  # a list
        3: np.array([1, 2], np.int16),
        4: np.float32(0.5),  # a scalar
        5: np.zeros(3, np.float32),  # another shape
        6: np.array([0.1, 0.2], np.float16),  # promoted with the float32 rows to float32
    }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        return np.zeros(self.shape, np.float32), {}

    def step(self, action: np.int64) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return self.odd.get(int(action), np.ones(self.shape, np.float32)), 0.0, False, False, {}


class _LargeOddObsEnv(_OddObsEnv):
    """:class:`_OddObsEnv` with rows over 16 KiB."""

    shape = (80, 64)
    observation_space = spaces.Box(-1, 1, shape, np.float32)
    odd: ClassVar[dict[int, Any]] = {
        1: np.full(shape, 0.25),  # float64: cast to the batch's float32
        2: np.full(shape, 0.5, np.float32).tolist(),  # a list
        3: np.zeros(3, np.float32),  # another shape
    }


@pytest.mark.parametrize("copy", [True, False], ids=["copied", "own-buffer"])
@pytest.mark.parametrize(
    ("env", "odd"),
    [(_OddObsEnv, odd) for odd in range(1, 7)] + [(_LargeOddObsEnv, odd) for odd in range(1, 4)],
    ids=[f"small-{odd}" for odd in range(1, 7)] + [f"large-{odd}" for odd in range(1, 4)],
)
def test_observations_that_are_not_rows_of_the_batch_are_stacked_as_by_gymnasium(
    env: type[_OddObsEnv], odd: int, copy: bool
) -> None:
    ours = LeanSyncVectorEnv([env] * 3, copy=copy)
    theirs = SyncVectorEnv([env] * 3, copy=copy)
    ours.reset(seed=0)
    theirs.reset(seed=0)
    actions = np.array([0, odd, 0])
    try:
        expected = theirs.step(actions)
    except ValueError as exc:
        with pytest.raises(type(exc), match=re.escape(str(exc))):
            ours.step(actions)
    else:
        assert_same(ours.step(actions), expected)
    assert_same(ours.step(np.zeros(3, np.int64)), theirs.step(np.zeros(3, np.int64)))


class _OddRewardEnv(gymnasium.Env[np.ndarray, np.int64]):
    """Rewards and flags that are not always one number each."""

    observation_space = spaces.Box(-1, 1, (2,), np.float32)
    action_space = spaces.Discrete(7)
    odd: ClassVar[dict[int, tuple[Any, Any, Any]]] = {
        1: (np.array([2.0]), False, False),  # a reward of one element, one dimension
        2: ("x", False, False),  # not a number
        3: (np.array([1.0, 2.0]), False, False),  # two numbers
        4: (1, np.array([True]), np.False_),  # a flag of one element; an int reward
        5: (np.float32(0.5), 2, 0),  # ints for flags
        6: (True, None, False),  # a bool reward; None for a flag
    }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        return np.zeros(2, np.float32), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, Any, Any, Any, dict[str, Any]]:
        reward, terminated, truncated = self.odd.get(int(action), (0.25, False, False))
        return np.ones(2, np.float32), reward, terminated, truncated, {}


@pytest.mark.parametrize("copies", [1, 3])
@pytest.mark.parametrize("odd", range(1, 7))
def test_rewards_and_flags_that_are_not_one_number_are_taken_as_by_gymnasium(
    odd: int, copies: int
) -> None:
    """The arrays of rewards and flags are Gymnasium's, or its error, whatever a copy returns."""
    ours = LeanSyncVectorEnv([_OddRewardEnv] * copies)
    theirs = SyncVectorEnv([_OddRewardEnv] * copies)
    ours.reset(seed=0)
    theirs.reset(seed=0)
    actions = np.array([odd] + [0] * (copies - 1))
    try:
        expected = theirs.step(actions)
    except (ValueError, TypeError) as exc:
        with pytest.raises(type(exc), match=re.escape(str(exc))):
            ours.step(actions)
    else:
        assert_same(ours.step(actions), expected)
    ours.reset(seed=0)
    theirs.reset(seed=0)
    assert_same(ours.step(np.zeros(copies, np.int64)), theirs.step(np.zeros(copies, np.int64)))


@pytest.mark.parametrize("copy", [True, False], ids=["copied", "own-buffer"])
@pytest.mark.parametrize("make", [FramesEnv, InPlaceFramesEnv], ids=["frames", "in-place"])
def test_large_rows_are_batched_as_by_gymnasium(make: Any, copy: bool) -> None:
    """84x84x4 frames (rows over 16 KiB: kept in the buffer alone, each is copied in on its
    own), from envs that return fresh arrays or overwrite one in place: Gymnasium's batches."""
    ours = LeanSyncVectorEnv([make] * COPIES, copy=copy)
    theirs = SyncVectorEnv([make] * COPIES, copy=copy)
    assert_same(ours.reset(seed=1), theirs.reset(seed=1), "reset")
    for step in range(6):
        actions = (np.arange(COPIES) + step) % 4
        mine, gyms = ours.step(actions), theirs.step(actions)
        assert_same((*mine[:4], _plain(mine[4])), gyms, f"step {step}")
        assert (mine[0] is ours._observations) is not copy


def test_a_disabled_copy_stepped_past_its_end_fails_as_in_gymnasium() -> None:
    """In ``Disabled`` mode a copy that ended must be reset before it is stepped again."""
    ours = LeanSyncVectorEnv([InfoEnv] * 2, autoreset_mode=AutoresetMode.DISABLED)
    ours.reset(seed=0)
    actions = np.zeros(2, np.int64)
    while not np.logical_or(*ours.step(actions)[2:4]).any():
        pass
    with pytest.raises(AssertionError, match="_autoreset_envs"):
        ours.step(actions)


def test_vector_host_steps_with_it() -> None:
    """A server's vector session steps its copies with the lean loop."""
    spec = EnvSpec(id="CartPole-v1", entry_point="gymnasium.envs.classic_control:CartPoleEnv")
    host = VectorHost(spec, 3, "next_step")
    assert isinstance(host.vector, LeanSyncVectorEnv)
    assert host.vector._lean  # this Gymnasium has what the lean loop uses
    host.close()


class _BoxActionEnv(gymnasium.Env[np.ndarray, np.ndarray]):
    """Keeps every action it is given, to compare what each copy receives."""

    observation_space = spaces.Box(-1, 1, (1,), np.float32)
    action_space = spaces.Box(-1, 1, (2,), np.float32)

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        self.seen.append(action)
        return np.zeros(1, np.float32), 0.0, False, False, {}


def test_each_copy_gets_its_row_of_the_actions_as_gymnasium_gives_it() -> None:
    ours = LeanSyncVectorEnv([_BoxActionEnv] * 3)
    theirs = SyncVectorEnv([_BoxActionEnv] * 3)
    ours.reset(seed=0)
    theirs.reset(seed=0)
    actions = np.arange(6, dtype=np.float32).reshape(3, 2) / 10
    ours.step(actions)
    theirs.step(actions)
    for mine, gyms in zip(ours.envs, theirs.envs, strict=True):
        got, expected = mine.unwrapped.seen, gyms.unwrapped.seen  # type: ignore[attr-defined]
        assert len(got) == len(expected) == 1
        assert type(got[0]) is type(expected[0]) and got[0].dtype == expected[0].dtype
        assert np.array_equal(got[0], expected[0])
    with pytest.raises(ValueError, match="zip"):  # a batch of the wrong size
        ours.step(actions[:2])
    assert all(len(env.unwrapped.seen) == 1 for env in ours.envs)  # type: ignore[attr-defined]


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda mode: mode.value)
def test_a_batch_of_another_count_steps_no_copy(mode: AutoresetMode) -> None:
    """Too few or too many actions, as an array or a list, in every mode: a ValueError before
    any copy is stepped; a list of one per copy steps as the array does."""
    ours = LeanSyncVectorEnv([_BoxActionEnv] * 3, autoreset_mode=mode)
    ours.reset(seed=0)
    actions = np.arange(8, dtype=np.float32).reshape(4, 2) / 10
    for batch in (actions[:2], actions, list(actions[:2]), list(actions)):
        with pytest.raises(ValueError, match="zip"):
            ours.step(batch)
        assert all(not env.unwrapped.seen for env in ours.envs)  # type: ignore[attr-defined]
    ours.step(list(actions[:3]))
    for env, row in zip(ours.envs, actions[:3], strict=True):
        assert np.array_equal(env.unwrapped.seen, [row])  # type: ignore[attr-defined]
