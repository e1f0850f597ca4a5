"""A vector step's fixed frames: the same results and errors as the pickled path, for every
space the codecs carry, in one worker process and split over two."""

from __future__ import annotations

import contextlib
import copy
import os
import select
import threading
import time
import zlib
from collections.abc import Iterator
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from envwire.errors import EnvCrashedError, EnvError, EnvTimeoutError
from envwire.messages import FinalsInfo
from envwire.registry import EnvSpec
from envwire.runtime import InlineWorker, ProcessWorker, make_worker
from envwire.runtime.pipe import FrameReader, dumps, frame
from envwire.runtime.stepframes import (
    StepPlan,
    join_infos,
    read_step_call,
    read_step_reply,
    step_call,
    step_reply,
)
from envwire.runtime.syncvector import _final_obs
from envwire.runtime.vector import VectorGroup
from tests.spaces_catalog import IDS, SPACES, assert_same

CATALOG = dict(SPACES)
ENV = "tests.runtime.test_stepframes:CatalogEnv"
COPIES = 5


class CatalogEnv(gymnasium.Env[Any, Any]):
    """Observations and actions of the catalog's spaces (by name); each copy's observations
    follow its seed, the reward is a checksum of the action, episodes end every few steps and
    some infos are not empty. ``trouble`` at step ``at``: ``raise``, ``hang`` or ``crash``."""

    def __init__(self, obs: str, act: str, trouble: str = "", at: int = 0) -> None:
        self.observation_space = copy.deepcopy(CATALOG[obs])
        self.action_space = copy.deepcopy(CATALOG[act])
        self.trouble, self.at, self.t = trouble, at, 0

    def _obs(self) -> Any:
        self.observation_space.seed(int(self.np_random.integers(2**31)))
        return self.observation_space.sample()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self.t += 1
        if self.t == self.at:
            if self.trouble == "raise":
                raise ValueError(f"step {self.t} fails on purpose")
            if self.trouble == "hang":
                import time

                time.sleep(60)
            if self.trouble == "crash":
                import os

                os._exit(3)
        if not self.action_space.contains(action):
            raise ValueError(f"{action!r} is not an action of {self.action_space}")
        try:
            reward = float(zlib.crc32(np.asarray(action).tobytes()) % 1000)
        except (TypeError, ValueError):
            reward = 0.5
        info: dict[str, Any] = {"t": self.t, "v": np.arange(2) * self.t} if self.t % 3 else {}
        return self._obs(), reward, self.t % 4 == 0, self.t % 7 == 0, info


def _spec(obs: str, act: str, **trouble: Any) -> EnvSpec:
    return EnvSpec("catalog", ENV, {"obs": obs, "act": act, **trouble}, isolation="process")


def _batch(space: spaces.Space[Any], seed: int) -> Any:
    batched = batch_space(space, COPIES)
    batched.seed(seed)
    return batched.sample()


@pytest.mark.parametrize("name", IDS)
def test_frames_round_trip_every_plain_batch_and_leave_the_rest_to_pickle(name: str) -> None:
    """A batch of plain arrays crosses as raw bytes and comes back bit for bit (writable);
    any other batch (dicts, tuples, texts, graphs) is left to the pickled path."""
    space = CATALOG[name]
    try:
        obs = _batch(space, 1)
    except (TypeError, NotImplementedError, ValueError) as exc:
        pytest.skip(f"Gymnasium does not batch {space}: {exc}")
    frame = step_call(obs)
    plain = isinstance(obs, np.ndarray) and obs.dtype.kind in "biufc"
    assert (frame is not None) is plain
    if frame is not None:
        back = read_step_call(bytearray(frame[4:]))
        assert_same(back, obs)
        assert back.flags.writeable
    rewards = np.linspace(-1, 1, COPIES)
    flags = np.array([True, False, True, False, False])
    for infos in ({}, {"t": np.arange(COPIES), "_t": np.ones(COPIES, bool)}):
        result = (obs, rewards, flags, ~flags, infos)
        reply = step_reply(result)
        assert (reply is not None) is plain
        if reply is not None:
            assert_same(read_step_reply(bytearray(reply[4:])), result)


def test_a_finals_info_crosses_as_a_frame_and_keeps_its_list() -> None:
    """A SameStep batch whose ended copies' final observations the vector env keeps as a list
    (its info a FinalsInfo) travels raw too, its info pickled after the arrays, and comes back
    a FinalsInfo whose list is still the object array's arrays."""
    obs, rewards = np.zeros((3, 2), np.float32), np.zeros(3)
    ended = np.array([False, True, True])
    infos = _final_obs(3, [(1, np.ones(2, np.float32)), (2, np.full(2, 2, np.float32))])
    reply = step_reply((obs, rewards, ended, ~ended, infos))
    assert reply is not None
    back = read_step_reply(bytearray(reply[4:]))
    assert_same((*back[:4], dict(back[4])), (obs, rewards, ended, ~ended, dict(infos)))
    assert type(back[4]) is FinalsInfo
    kept = back[4].kept()
    assert kept is not None
    rows, mask = kept
    assert mask is back[4]["_final_obs"] and rows[0] is back[4]["final_obs"][1]
    assert_same(rows, [np.ones(2, np.float32), np.full(2, 2, np.float32)])


def test_odd_results_are_left_to_pickle() -> None:
    """Rewards of another dtype, a non-contiguous batch or object arrays do not travel raw."""
    obs = np.zeros((3, 2), np.float32)
    rewards, flags = np.zeros(3), np.zeros(3, bool)
    assert step_reply((obs, rewards, flags, flags, {})) is not None
    assert step_reply((obs, rewards.astype(np.float32), flags, flags, {})) is None
    assert step_reply((obs, rewards, flags, flags[:2], {})) is None
    assert step_reply((np.zeros((2, 3), np.float32).T, rewards, flags, flags, {})) is None
    assert step_call(np.zeros((4, 2)).T) is None
    assert step_call(np.array([None, 1])) is None
    assert step_call(np.int64(3)) is None


def test_a_plan_cuts_each_slices_call_and_joins_their_replies() -> None:
    """A group's plan cuts each slice's call frame from the actions' bytes (contiguous or
    not), and joins fixed-frame replies of unequal slices, infos included, as the arrays
    joined one by one; anything else is left to the group's general path (None)."""
    plan = StepPlan([3, 2])
    actions = np.arange(10, dtype=np.int64).reshape(2, 5).T  # (5, 2), not contiguous
    calls = plan.calls(actions)
    assert calls is not None and calls == plan.calls(np.ascontiguousarray(actions))
    for call, part in zip(calls, (actions[:3], actions[3:]), strict=True):
        assert_same(read_step_call(bytearray(call[4:])), np.ascontiguousarray(part))
    assert plan.calls(np.zeros(4, np.int64)) is None  # not the group's 5 copies
    assert plan.calls(np.array(["a"] * 5)) is None
    assert plan.calls([0, 1, 2, 3, 4]) is None
    results = [
        (np.full((3, 2), 1.5, np.float32), np.arange(3.0), np.array([1, 0, 0], bool),
         np.zeros(3, bool), {}),
        (np.full((2, 2), 2.5, np.float32), np.arange(2.0) - 7, np.zeros(2, bool),
         np.array([0, 1], bool), {"t": np.arange(2), "_t": np.ones(2, bool)}),
    ]  # fmt: skip
    replies: list[object] = []
    for result in results:
        reply = step_reply(result)
        assert reply is not None
        replies.append(bytearray(reply[4:]))
    want = (
        *(np.concatenate([r[i] for r in results]) for i in range(4)),
        join_infos([r[4] for r in results], [3, 2]),
    )
    for _ in range(2):  # the layout learned, then reused
        joined = plan.join(replies)
        assert_same(joined, want)
        assert joined is not None and all(a.flags.writeable for a in joined[:4])
    pickled = bytearray(frame(b"", dumps(("ok", results[1])))[4:])
    assert plan.join([replies[0], pickled]) is None
    other = step_reply((np.zeros((2, 3), np.float32), *results[1][1:]))
    assert other is not None  # another row shape than the first slice's: not joined raw
    assert plan.join([replies[0], bytearray(other[4:])]) is None


#: Observation spaces stepped in one worker process as well as split over two.
ONE_WORKER = {"box_f32_unit", "box_uint8_image", "multidiscrete_2d_start", "dict_unsorted"}
#: Action spaces (observed through box_f32_unit): plain arrays of each kind, and a tuple.
ACTIONS = [
    "box_f32_2d_varied",
    "box_int8_varied",
    "box_bool",
    "discrete_uint8",
    "multibinary_2d",
    "multidiscrete_2d_start",
    "tuple_flat",
]
#: Observation spaces of each kind beside the plain ones: dicts, tuples and a text, pickled.
PICKLED = ["dict_unsorted", "tuple_nested", "text_default"]


#: Plain observation spaces over processes: every dtype kind and width, scalar, empty, 2-d and
#: image rows (the frames' own round trip is tested above for every space of the catalog).
PLAIN = [
    "box_f32_2d_varied",
    "box_f32_scalar",
    "box_f32_empty",
    "box_f64_wide",
    "box_f16",
    "box_int8_varied",
    "box_uint64",
    "box_uint8_image",
    "box_bool",
    "discrete_start_neg",
    "discrete_uint8",
    "multibinary_2d",
    "multidiscrete_2d_start",
]


def _cases() -> list[tuple[str, str, int]]:
    observed = [(name, "discrete_5", 2) for name in PLAIN + PICKLED]
    observed += [(name, "discrete_5", 1) for name in sorted(ONE_WORKER)]
    return observed + [("box_f32_unit", name, 2) for name in ACTIONS]


@pytest.mark.parametrize(
    ("obs", "act", "workers"), _cases(), ids=[f"{o}-{a}-{w}" for o, a, w in _cases()]
)
def test_steps_equal_sync_vector_env(obs: str, act: str, workers: int) -> None:
    """Steps over one worker process, or split over two, are ``SyncVectorEnv``'s own, type for
    type and bit for bit, infos and autoresets included, for observations and actions of
    every space: the plain ones by the fixed frames, the others pickled."""
    make = lambda: CatalogEnv(obs, act)  # noqa: E731
    try:
        local = gymnasium.vector.SyncVectorEnv([make] * COPIES)
        actions = [_batch(CATALOG[act], seed) for seed in range(9)]
    except (TypeError, NotImplementedError, ValueError, AssertionError) as exc:
        pytest.skip(f"Gymnasium does not batch these spaces: {exc}")
    worker = make_worker(_spec(obs, act), COPIES, "NextStep", workers=workers)
    try:
        if workers == 2 and not isinstance(worker, VectorGroup):
            pytest.skip("one core: the copies are not split")
        assert_same(worker.call("reset", 3, None, timeout=30), local.reset(seed=3), "reset")
        for i, batch in enumerate(actions):
            want = local.step(batch)
            got = worker.call("step", batch, timeout=30)
            assert_same(got, want, f"step {i}")
            assert all(a.flags.writeable for a in got[1:4])
            assert not isinstance(got[0], np.ndarray) or got[0].flags.writeable
    finally:
        worker.close()
        local.close()


def test_a_group_joins_fixed_frames() -> None:
    """The slices' replies of plain batches are fixed frames, joined from their bytes."""
    group = make_worker(_spec("box_f32_unit", "discrete_5"), 4, "NextStep", workers=2)
    try:
        if not isinstance(group, VectorGroup):
            pytest.skip("one core: the copies are not split")
        group.call("reset", 0, None, timeout=30)
        worker = group.workers[0]
        assert isinstance(worker, ProcessWorker)
        worker.send("step", np.zeros(2, np.int64))
        reply = worker.finish_step(30)
        assert isinstance(reply, bytearray) and reply[0] == ord("R")
    finally:
        group.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_an_env_error_is_the_general_paths(workers: int) -> None:
    """An env that raises during a fixed-frame step gives the error the general path gives
    (here, an inline worker's), and the worker goes on after a reset."""
    spec = _spec("box_f32_unit", "discrete_5", trouble="raise", at=2)
    inline = InlineWorker(
        EnvSpec(spec.id, ENV, spec.kwargs, isolation="inline"), COPIES, "NextStep"
    )
    worker = make_worker(spec, COPIES, "NextStep", workers=workers)
    actions = np.zeros(COPIES, np.int64)
    try:
        messages = []
        for each in (inline, worker):
            each.call("reset", 0, None, timeout=30)
            each.call("step", actions, timeout=30)
            with pytest.raises(EnvError) as caught:
                each.call("step", actions, timeout=30)
            messages.append(str(caught.value))
        assert messages[0] == messages[1]
        assert "fails on purpose" in messages[1]
        worker.call("reset", 1, None, timeout=30)
        bad = np.full(COPIES, 7, np.int64)  # not in Discrete(5): the env's own check raises
        with pytest.raises(EnvError, match="is not an action"):
            worker.call("step", bad, timeout=30)
        worker.call("reset", 2, None, timeout=30)
        assert len(worker.call("step", actions, timeout=30)[1]) == COPIES
    finally:
        inline.close()
        worker.close()


@pytest.mark.parametrize(("workers", "at"), [(1, 1), (2, 1), (2, 4)])
def test_a_hang_and_a_crash_during_a_fixed_frame_step(workers: int, at: int) -> None:
    """A step that hangs past its timeout kills the worker (EnvTimeoutError); one whose
    process dies is reported as a crash with its exit code: on the first step, and on one
    whose replies the group reads straight into its staging buffer (the layout learned)."""
    actions = np.zeros(COPIES, np.int64)
    for trouble, error, match in (
        ("hang", EnvTimeoutError, "did not return within 2 s"),
        ("crash", EnvCrashedError, "exited with code 3 during step"),
    ):
        spec = _spec("box_f32_unit", "discrete_5", trouble=trouble, at=at)
        worker = make_worker(spec, COPIES, "NextStep", workers=workers)
        try:
            worker.call("reset", 0, None, timeout=30)
            for _ in range(at - 1):
                worker.call("step", actions, timeout=30)
            if at > 1 and isinstance(worker, VectorGroup):
                assert worker._plan is not None and worker._plan.staged() is not None
            with pytest.raises(error, match=match):
                worker.call("step", actions, timeout=2 if trouble == "hang" else 30)
        finally:
            worker.close()


def test_masked_resets_after_fixed_frame_steps_equal_sync_vector_env() -> None:
    """In ``Disabled`` mode, a masked reset that spares a whole slice answers that slice's
    observations of the last (fixed-frame) step, as ``SyncVectorEnv`` does; the others are
    reset."""
    make = lambda: CatalogEnv("box_f32_unit", "discrete_5")  # noqa: E731
    local = gymnasium.vector.SyncVectorEnv([make] * 4, autoreset_mode="Disabled")
    with _split(_spec("box_f32_unit", "discrete_5"), "Disabled") as group:
        assert_same(group.call("reset", 5, None, timeout=30), local.reset(seed=5))
        actions = np.array([1, 2, 3, 4])
        for i in range(3):
            assert_same(group.call("step", actions, timeout=30), local.step(actions), f"{i}")
        for mask in ([False, False, True, True], [True, True, False, False]):
            options = {"reset_mask": np.array(mask)}
            got = group.call("reset", None, options, timeout=30)
            assert_same(got, local.reset(options={"reset_mask": np.array(mask)}), f"{mask}")
            assert_same(group.call("step", actions, timeout=30), local.step(actions))
    local.close()


class ImageEnv(gymnasium.Env[Any, Any]):
    """Observations of 90,000 bytes: a slice of two copies replies in a frame larger than a
    pipe holds, which comes in pieces."""

    observation_space = spaces.Box(0, 255, (300, 300), np.uint8)
    action_space = spaces.Discrete(2)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        return self.np_random.integers(0, 256, (300, 300), np.uint8), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs = self.np_random.integers(0, 256, (300, 300), np.uint8)
        return obs, float(action), bool(self.np_random.random() < 0.2), False, {}


def test_replies_larger_than_a_pipe_are_read_into_place_and_equal_sync_vector_env(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Replies that come in pieces are read straight into the staging buffer all the same
    (every batch after the first is taken from it), and equal ``SyncVectorEnv``'s."""
    spec = EnvSpec("image", "tests.runtime.test_stepframes:ImageEnv", isolation="process")
    local = gymnasium.vector.SyncVectorEnv([ImageEnv] * 4)
    taken = []
    take = StepPlan.take
    monkeypatch.setattr(StepPlan, "take", lambda plan: taken.append(1) or take(plan))
    with _split(spec, "NextStep") as group:
        assert_same(group.call("reset", 7, None, timeout=30), local.reset(seed=7))
        actions = np.array([1, 0, 1, 1])
        for i in range(6):
            got = group.call("step", actions, timeout=30)
            assert_same(got, local.step(actions), f"step {i}")
            assert all(a.flags.writeable for a in got[:4])
        assert len(taken) == 5
    local.close()


@contextlib.contextmanager
def _split(spec: EnvSpec, mode: str) -> Iterator[VectorGroup[Any]]:
    """Four copies of ``spec`` split over two worker processes (skips on one core)."""
    group = make_worker(spec, 4, mode, workers=2)
    try:
        if not isinstance(group, VectorGroup):
            pytest.skip("one core: the copies are not split")
        yield group
    finally:
        group.close()


def _pipe_worker() -> tuple[ProcessWorker, int]:
    """A ProcessWorker reading the replies written to the returned end of a pipe by hand."""
    read_end, write_end = os.pipe()
    worker = ProcessWorker.__new__(ProcessWorker)
    worker.spec = _spec("box_f32_unit", "discrete_5")
    worker._gone, worker._fd, worker._reader = False, read_end, FrameReader(read_end)
    worker._poller = select.poll()
    worker._poller.register(read_end, select.POLLIN)
    return worker, write_end


def test_finish_into_reads_a_reply_of_the_layout_into_place_and_any_other_as_it_came() -> None:
    """A reply of the layout learned is read into the staging buffer, whole or in pieces
    (None); any other (infos after the batches, another head of the same size, an error, a
    start shorter than the head) is given as ``finish_step`` gives it, every byte of it."""
    plan = StepPlan([2, 2])
    result = (np.arange(4, dtype=np.float32).reshape(2, 2), np.array([1.0, 2.0]),
              np.array([True, False]), np.array([False, True]), {})  # fmt: skip
    usual = step_reply(result)
    assert usual is not None
    assert plan.join([bytearray(usual[4:])] * 2) is not None  # the layout, learned
    staged = plan.staged()
    assert staged is not None
    worker, write_end = _pipe_worker()
    views, size, prefix = staged[0]
    assert size == len(usual) and usual.startswith(prefix)
    try:
        os.write(write_end, usual)
        assert worker.finish_into(views, size, prefix, 5) is None
        assert bytes(b"".join(views)) == usual
        for pieces in ([usual[:20], usual[20:]], [usual[:3], usual[3:]]):  # a start, then more
            writer = threading.Thread(target=_write_slowly, args=(write_end, pieces))
            writer.start()
            got = worker.finish_into(views, size, prefix, 5)
            writer.join()
            if len(pieces[0]) >= len(prefix):
                assert got is None and bytes(b"".join(views)) == usual
            else:  # too little to tell the head: read as finish_step reads
                assert got == bytearray(usual[4:])
        infos = step_reply((*result[:4], {"t": np.arange(2)}))
        flipped = step_reply((result[0].astype(np.int32), *result[1:]))  # same size
        assert infos is not None and flipped is not None and len(flipped) == size
        for other in (infos, flipped):
            os.write(write_end, other)
            assert worker.finish_into(views, size, prefix, 5) == bytearray(other[4:])
        os.write(write_end, frame(b"", dumps(("err", EnvError("the env failed")))))
        with pytest.raises(EnvError, match="the env failed"):
            worker.finish_into(views, size, prefix, 5)
    finally:
        os.close(write_end)
        os.close(worker._fd)


def _write_slowly(fd: int, pieces: list[bytes]) -> None:
    for piece in pieces:
        os.write(fd, piece)
        time.sleep(0.2)
