"""Workers: inline and process, with real crashes, hangs and exceptions."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.vector.utils import batch_space

from envwire import messages as m
from envwire.errors import (
    ConfigError,
    EnvCrashedError,
    EnvError,
    EnvTimeoutError,
    InvalidArgumentError,
)
from envwire.registry import EnvSpec
from envwire.runtime import InlineWorker, PooledWorker, ProcessWorker, make_worker
from envwire.runtime.inline import InlineSlice
from envwire.runtime.vector import VectorGroup
from envwire.session import Session, State
from envwire.testing.envs import RaiseEnv, TupleEnv
from tests.runtime.sleeps import HAS_PROC, voluntary_switches

TUPLE = "envwire.testing.envs:TupleEnv"

#: Opens the steps of :class:`GateEnv`.
GATE = threading.Event()


class GateEnv(TupleEnv):
    """Steps wait until :data:`GATE` opens (30 s at most)."""

    def on_step(self) -> None:
        GATE.wait(30)


class UnpicklableInfoEnv(TupleEnv):
    """Steps return an info holding a lambda, which cannot cross a pipe."""

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {**info, "f": lambda: 0}


def test_make_worker_follows_isolation() -> None:
    inline = make_worker(EnvSpec("c", "gym:CartPole-v1"))
    process = make_worker(EnvSpec("t", TUPLE))
    pooled = make_worker(EnvSpec("t", TUPLE, isolation="pool"))
    try:
        assert isinstance(inline, InlineWorker) and isinstance(process, ProcessWorker)
        assert isinstance(pooled, PooledWorker)
    finally:
        inline.close()
        process.close()
        pooled.close()


@pytest.mark.parametrize("isolation", ["inline", "process", "pool"])
def test_calls_return_what_the_env_returns(isolation: str) -> None:
    worker = make_worker(EnvSpec("t", TUPLE, isolation=isolation))  # type: ignore[arg-type]
    try:
        action_space, observation_space = worker.call("spaces", timeout=5)
        obs, info = worker.call("reset", 0, None, timeout=5)
        assert obs in observation_space and info == {"t": 0}
        result = worker.call("step", action_space.sample(), timeout=5)
        assert result[1:] == (0.1, False, False, {"t": 1})
    finally:
        worker.close()


@pytest.mark.parametrize("isolation", ["inline", "process", "pool"])
def test_env_exceptions_become_env_errors(isolation: str) -> None:
    spec = EnvSpec("r", "envwire.testing.envs:RaiseEnv", {"raise_at": 1}, isolation)  # type: ignore[arg-type]
    worker = make_worker(spec)
    try:
        worker.call("reset", 0, None, timeout=5)
        with pytest.raises(EnvError, match=r"r: step raised RuntimeError: RaiseEnv fails") as err:
            worker.call("step", (0, [0, 1]), timeout=5)
        # The exception's own text crosses the pipe too (OpenEnv's strict mode reports it).
        assert err.value.env_message == "RaiseEnv fails on purpose at step 1"
    finally:
        worker.close()


def test_the_inline_step_path_is_call_step() -> None:
    """``call_step`` (a one-env session's step) answers and fails as ``call("step")`` does,
    and a session steps through it."""
    spec = EnvSpec("r", "envwire.testing.envs:RaiseEnv", {"raise_at": 2}, "inline")  # type: ignore[arg-type]
    worker = InlineWorker(spec)
    try:
        worker.call("reset", 0, None, timeout=5)
        first = worker.call_step((0, [0, 1]), timeout=5)
        assert isinstance(first, tuple) and len(first) == 5
        assert worker.deadline is None  # disarmed after the call
        with pytest.raises(EnvError, match=r"r: step raised RuntimeError: RaiseEnv fails") as err:
            worker.call_step((0, [0, 1]), timeout=5)
        assert err.value.env_message == "RaiseEnv fails on purpose at step 2"
    finally:
        worker.close()
    session = Session(spec, worker_factory=make_worker)
    try:
        assert isinstance(session.worker, InlineWorker)
        assert session._env_step == session.worker.call_step  # bound once, at start
        session.handle(m.Reset(seed=0))
        assert isinstance(session.handle(m.Step((0, [0, 1]))), m.StepReply)
        with pytest.raises(EnvError, match=r"r: step raised RuntimeError"):
            session.handle(m.Step((0, [0, 1])))
        assert session.state is State.ENDED
    finally:
        session.close()


def test_unknown_methods_are_refused() -> None:
    worker = InlineWorker(EnvSpec("c", "gym:CartPole-v1"))
    with pytest.raises(InvalidArgumentError, match="unknown host method"):
        worker.call("__init__", timeout=1)
    worker.close()


def test_process_worker_reports_a_failing_constructor() -> None:
    with pytest.raises(ConfigError, match="cannot import"):
        ProcessWorker(EnvSpec("x", "no_such_module_xyz:Env"))


@pytest.mark.parametrize(
    ("how", "expected"), [("segfault", "killed by SIGSEGV"), ("exit", "exited with code 3")]
)
def test_process_crash_is_named(how: str, expected: str) -> None:
    worker = ProcessWorker(
        EnvSpec("c", "envwire.testing.envs:CrashEnv", {"crash_at": 1, "how": how})
    )
    worker.call("reset", 0, None, timeout=5)
    with pytest.raises(EnvCrashedError, match=expected):
        worker.call("step", (0, [0, 1]), timeout=5)
    with pytest.raises(EnvCrashedError):
        worker.call("reset", 0, None, timeout=5)
    worker.close()


def test_process_hang_kills_the_worker() -> None:
    worker = ProcessWorker(EnvSpec("h", "envwire.testing.envs:HangEnv", {"hang_at": 1}))
    worker.call("reset", 0, None, timeout=5)
    start = time.monotonic()
    with pytest.raises(EnvTimeoutError, match="worker process was killed"):
        worker.call("step", (0, [0, 1]), timeout=0.5)
    assert time.monotonic() - start < 10
    assert not worker._process.is_alive()
    with pytest.raises(EnvCrashedError, match="worker process is gone"):  # every later call
        worker.call("reset", 0, None, timeout=5)
    worker.close()


@pytest.mark.skipif(not HAS_PROC, reason="counts sleeps in /proc")
def test_a_groups_worker_processes_sleep_only_to_wait_for_their_calls() -> None:
    # A worker process sleeps at most once a call: waiting for the next one (the env here
    # never sleeps). Over one socket pair each way, the server's read of a slice's reply
    # could wake that slice's process while it waited (a socket's readers and writers share
    # one wait queue): it went back to sleep at once, up to twice a batch in all.
    spec = EnvSpec("b", "envwire.testing.envs:BurnEnv", {"work": 500})
    group = VectorGroup([ProcessWorker(spec, 4, "next_step") for _ in range(2)], [4, 4])
    try:
        group.call("reset", 0, None, timeout=5)
        actions = np.zeros(8, np.int64)
        group.call_step(actions, timeout=5)  # the reply layout, learned
        pids = [worker._process.pid for worker in group.workers]
        before = [voluntary_switches(pid) for pid in pids]
        batches = 200
        for _ in range(batches):
            group.call_step(actions, timeout=5)
        slept = [voluntary_switches(pid) - b for pid, b in zip(pids, before, strict=True)]
        assert all(n <= batches + 5 for n in slept), slept
    finally:
        group.close()


def test_inline_hang_is_reported_by_the_watchdog() -> None:
    worker = InlineWorker(EnvSpec("h", "envwire.testing.envs:HangEnv", {"hang_at": 1}))
    reported = threading.Event()
    errors: list[EnvTimeoutError] = []

    def on_hang(error: EnvTimeoutError) -> None:
        errors.append(error)
        reported.set()

    worker.on_hang = on_hang
    worker.call("reset", 0, None, timeout=5)
    stuck = threading.Thread(
        target=lambda: worker.call("step", (0, [0, 1]), timeout=0.3), daemon=True
    )
    stuck.start()
    assert reported.wait(10)
    assert "step did not return within 0.3 s" in str(errors[0])
    with pytest.raises(EnvTimeoutError, match="hung earlier"):
        worker.call("reset", 0, None, timeout=1)
    worker.close()  # does not wait for the stuck thread


def test_a_call_without_a_timeout_is_never_cut_off() -> None:
    """timeout=None (OpenEnv's own envs): the watchdog leaves the call to take its time."""
    worker = InlineWorker(EnvSpec("g", "tests.runtime.test_workers:GateEnv"))
    hung: list[EnvTimeoutError] = []
    worker.on_hang = hung.append
    worker.call("reset", 0, None, timeout=5)
    results: list[object] = []
    stepping = threading.Thread(
        target=lambda: results.append(worker.call("step", (0, [0, 1]), timeout=None))
    )
    GATE.clear()
    stepping.start()
    try:
        time.sleep(1.0)  # ten sweeps of the watchdog
        assert worker.deadline is None
        assert not worker.overdue(time.monotonic() + 1e9)
        assert hung == []
    finally:
        GATE.set()
        stepping.join(10)
    assert len(results) == 1
    worker.close()


@pytest.mark.parametrize("isolation", ["process", "inline"])
def test_a_split_group_gives_sync_vector_env_batches_each_its_own(isolation: str) -> None:
    """Copies split over process workers (for an inline env, the last slice in the caller's
    thread) step as one SyncVectorEnv: the same batches, each a fresh writable array (the
    workers skip SyncVectorEnv's copy: the pipe copies)."""
    n = 5
    spec = EnvSpec("c", "gym:CartPole-v1", isolation=isolation)
    group = make_worker(spec, n, "NextStep", workers=2)
    local = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * n)
    rng = np.random.default_rng(0)
    try:
        if len(group.workers if isinstance(group, VectorGroup) else []) < 2:
            pytest.skip("one core: the copies are not split")
        obs, _ = group.call("reset", 7, None, timeout=10)
        expected, _ = local.reset(seed=7)
        np.testing.assert_array_equal(obs, expected)
        earlier: list[np.ndarray[Any, Any]] = []
        for _ in range(40):  # CartPole's episodes end within these: autoresets included
            actions = rng.integers(0, 2, n)
            got = group.call("step", actions, timeout=10)
            want = local.step(actions)
            for mine, theirs in zip(got[:4], want[:4], strict=True):
                np.testing.assert_array_equal(mine, theirs)
            assert got[0].flags.writeable
            earlier.append(got[0])
        assert not any(np.shares_memory(a, b) for a, b in itertools.pairwise(earlier))
    finally:
        group.close()
        local.close()


def test_a_result_that_cannot_cross_the_pipe_is_an_env_error() -> None:
    worker = ProcessWorker(EnvSpec("u", "tests.runtime.test_workers:UnpicklableInfoEnv"))
    try:
        worker.call("reset", 0, None, timeout=5)
        with pytest.raises(EnvError, match="Can't pickle"):
            worker.call("step", (0, [0, 1]), timeout=5)
        obs, _ = worker.call("reset", 1, None, timeout=5)  # the worker goes on
        assert obs[0] == 0
    finally:
        worker.close()


def test_an_inline_env_split_in_two_steps_one_slice_in_the_callers_thread() -> None:
    group = make_worker(EnvSpec("c", "gym:CartPole-v1"), 6, "NextStep", workers=2)
    try:
        if not isinstance(group, VectorGroup):
            pytest.skip("one core: the copies are not split")
        kinds = [type(w) for w in group.workers]
        assert kinds == [ProcessWorker, InlineSlice]
        assert group.sizes == [3, 3]
    finally:
        group.close()


def test_a_failing_slice_leaves_no_answer_unread() -> None:
    """Every slice's call is finished even when one fails, so the next call's answers are its
    own: the group raises the env's error, then resets and steps in step."""
    group = make_worker(EnvSpec("r", "envwire.testing.envs:RaiseEnv"), 4, "NextStep", workers=2)
    try:
        if not isinstance(group, VectorGroup):
            pytest.skip("one core: the copies are not split")
        group.call("reset", 0, None, timeout=10)
        actions = batch_space(RaiseEnv().action_space, 4).sample()
        group.call("step", actions, timeout=10)
        with pytest.raises(EnvError, match="on purpose"):  # its second step, in every copy
            group.call("step", actions, timeout=10)
        obs, _ = group.call("reset", 1, None, timeout=10)
        first = group.call("step", actions, timeout=10)
        assert len(first[1]) == 4
        assert obs is not None
    finally:
        group.close()
