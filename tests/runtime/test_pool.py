"""The worker pool: placement, calls, and what a crash or a hang in one worker process costs."""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from envwire import messages as m
from envwire.errors import (
    ConfigError,
    EnvCrashedError,
    EnvError,
    EnvTimeoutError,
    InvalidArgumentError,
)
from envwire.registry import EnvSpec
from envwire.runtime import PooledWorker, WorkerPool, make_worker
from envwire.session import Session, State
from envwire.testing.envs import BurnEnv
from tests.runtime.sleeps import HAS_PROC, voluntary_switches

TUPLE = EnvSpec("t", "envwire.testing.envs:TupleEnv", isolation="pool")
CRASH = EnvSpec("c", "envwire.testing.envs:CrashEnv", {"crash_at": 1}, isolation="pool")
HANG = EnvSpec("h", "envwire.testing.envs:HangEnv", {"hang_at": 1}, isolation="pool")
ACTION = (0, np.array([0, 1], np.int8))


@pytest.fixture
def pool() -> Iterator[WorkerPool]:
    pool = WorkerPool(2)
    yield pool
    pool.close()


def in_thread(call: Callable[[], Any]) -> Callable[[], Any]:
    """Run ``call`` in a thread now; the returned function joins it and returns (or raises)
    what the call did."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(("ok", call()))
        except Exception as exc:
            outcome.append(("err", exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def join() -> Any:
        thread.join(30)
        status, value = outcome[0]
        if status == "err":
            raise value
        return value

    return join


def test_sessions_go_to_the_least_loaded_process(pool: WorkerPool) -> None:
    first = pool.worker(TUPLE)
    assert len(pool.loads()) == 1  # one session: one process
    workers = [first] + [pool.worker(TUPLE) for _ in range(3)]
    assert sorted(pool.loads().values()) == [2, 2]
    assert len({w.pid for w in workers}) == 2
    first.close()
    assert pool.loads()[first.pid or 0] == 1
    assert pool.worker(TUPLE).pid == first.pid  # the gap is filled first
    assert sorted(pool.loads().values()) == [2, 2]


def test_calls_reach_each_sessions_own_env(pool: WorkerPool) -> None:
    workers = [pool.worker(TUPLE) for _ in range(3)]
    for seed, worker in enumerate(workers):
        worker.call("reset", seed, None, timeout=5)
    for steps, worker in enumerate(workers, 1):
        for _ in range(steps):
            result = worker.call("step", ACTION, timeout=5)
        assert result[4] == {"t": steps}  # each env counted its own steps only
    with pytest.raises(InvalidArgumentError, match="unknown host method 'make'"):
        workers[0].call("make", timeout=5)


def test_many_sessions_call_at_once(pool: WorkerPool) -> None:
    spec = EnvSpec("b", "envwire.testing.envs:BurnEnv", {"work": 100}, isolation="pool")
    workers = [pool.worker(spec) for _ in range(40)]

    def episode(worker: PooledWorker, seed: int) -> list[int]:
        worker.call("reset", seed, None, timeout=30)
        return [int(worker.call("step", 1, timeout=30)[0][1]) for _ in range(20)]

    joins = [in_thread(functools.partial(episode, w, i)) for i, w in enumerate(workers)]
    got = [join() for join in joins]
    local = [episode_here(seed) for seed in range(40)]
    assert got == local  # replies reached their own callers, in order


def test_sessions_come_and_go_while_others_call(pool: WorkerPool) -> None:
    """Calls from many threads at once, while sessions open and close (a close is a call
    nobody waits for): each caller gets its own env's reply, whoever read it, and nothing is
    left waiting or unread."""
    stop = time.monotonic() + 3.0
    failures: list[str] = []

    def stepper(index: int) -> int:
        rounds = 0
        while time.monotonic() < stop:
            worker = pool.worker(TUPLE)
            worker.call("reset", index, None, timeout=30)
            for steps in range(1, 1 + index % 5 + 1):
                info = worker.call("step", ACTION, timeout=30)[4]
                if info != {"t": steps}:
                    failures.append(f"thread {index}: step {steps} got {info}")
            worker.close()  # sent, not waited for
            rounds += 1
        return rounds

    joins = [in_thread(functools.partial(stepper, i)) for i in range(12)]
    rounds = [join() for join in joins]
    assert not failures
    assert min(rounds) > 0
    assert sum(pool.counts().values()) == 0  # every close was read and carried out
    assert sum(pool.loads().values()) == 0


def test_a_process_that_dies_between_calls_leaves_placement_at_once(pool: WorkerPool) -> None:
    """No call in flight, so no caller reads its pipe: the process's own thread sees it die,
    the pool stops placing sessions there, and its session hears why at its next call."""
    idle = pool.worker(TUPLE)
    idle.call("reset", 0, None, timeout=5)
    os.kill(idle.pid or 0, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while idle.pid in pool.loads() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert idle.pid not in pool.loads()
    fresh = pool.worker(TUPLE)
    assert fresh.pid != idle.pid
    fresh.call("reset", 0, None, timeout=5)
    with pytest.raises(EnvCrashedError, match="hosting this env was killed by SIGKILL"):
        idle.call("step", ACTION, timeout=5)


def episode_here(seed: int) -> list[int]:
    env = BurnEnv(work=100)
    env.reset(seed=seed)
    return [int(env.step(np.int64(1))[0][1]) for _ in range(20)]


def test_a_crash_ends_only_the_sessions_of_its_process(pool: WorkerPool) -> None:
    crash = pool.worker(CRASH)
    other = pool.worker(TUPLE)  # the second process
    neighbour = pool.worker(TUPLE)  # shares the crashing env's process
    assert neighbour.pid == crash.pid != other.pid
    crash.call("reset", 0, None, timeout=5)
    with pytest.raises(
        EnvCrashedError, match="c: the env's pool worker process was killed by SIGSEGV during step"
    ):
        crash.call("step", ACTION, timeout=5)
    with pytest.raises(
        EnvCrashedError, match="t: the pool worker process hosting this env was killed by SIGSEGV"
    ):
        neighbour.call("reset", 0, None, timeout=5)
    other.call("reset", 0, None, timeout=5)
    assert list(pool.loads()) == [other.pid]
    fresh = pool.worker(TUPLE)  # a replacement process takes the dead one's place
    assert fresh.pid not in (crash.pid, other.pid)
    fresh.call("reset", 0, None, timeout=5)
    assert sorted(pool.loads().values()) == [1, 1]


def test_calls_in_flight_when_the_process_dies_are_told(pool: WorkerPool) -> None:
    spec = EnvSpec("s", "envwire.testing.envs:BurnEnv", {"sleep": 5.0}, isolation="pool")
    slow = pool.worker(spec)
    pool.worker(TUPLE)  # on the other process
    queued = pool.worker(TUPLE)
    assert queued.pid == slow.pid
    slow.call("reset", 0, None, timeout=5)
    running = in_thread(lambda: slow.call("step", 1, timeout=30))
    waiting = in_thread(lambda: queued.call("reset", 0, None, timeout=30))
    time.sleep(0.5)
    os.kill(slow.pid or 0, signal.SIGKILL)
    with pytest.raises(
        EnvCrashedError, match="s: the env's pool worker process was killed by SIGKILL during step"
    ):
        running()
    with pytest.raises(EnvCrashedError, match="killed by SIGKILL while s ran step"):
        waiting()


def test_a_hang_kills_its_process_and_only_that_one(pool: WorkerPool) -> None:
    hang = pool.worker(HANG)
    other = pool.worker(TUPLE)
    neighbour = pool.worker(TUPLE)
    assert neighbour.pid == hang.pid != other.pid
    hang.call("reset", 0, None, timeout=5)
    began = time.monotonic()
    stuck = in_thread(lambda: hang.call("step", ACTION, timeout=0.5))
    time.sleep(0.1)
    behind = in_thread(lambda: neighbour.call("reset", 0, None, timeout=5))
    with pytest.raises(
        EnvTimeoutError,
        match=r"h: step did not return within 0\.5 s; its pool worker process was killed",
    ):
        stuck()
    with pytest.raises(
        EnvCrashedError, match=r"killed because h's step did not return within 0\.5 s"
    ):
        behind()
    assert time.monotonic() - began < 10
    with pytest.raises(EnvCrashedError, match="killed because h's step"):
        neighbour.call("reset", 0, None, timeout=5)  # and every later call
    other.call("reset", 0, None, timeout=5)
    fresh = pool.worker(TUPLE)
    assert fresh.pid not in (hang.pid, other.pid)
    fresh.call("reset", 0, None, timeout=5)


@pytest.mark.skipif(not HAS_PROC, reason="counts sleeps in /proc")
def test_a_pool_process_sleeps_only_to_wait_for_its_requests() -> None:
    # As a process worker's (tests/runtime/test_workers.py): at most one sleep a call, the
    # wait for the next request (the env never sleeps). Over one socket pair the server's
    # read of each reply woke the process while it waited, twice a call in all.
    pool = WorkerPool(1)
    try:
        spec = EnvSpec("b", "envwire.testing.envs:BurnEnv", {"work": 500}, isolation="pool")
        worker = pool.worker(spec)
        worker.call("reset", 0, None, timeout=5)
        pid = worker.pid
        assert pid is not None
        before = voluntary_switches(pid)
        calls = 200
        for _ in range(calls):
            worker.call("step", 0, timeout=5)
        slept = voluntary_switches(pid) - before
        assert slept <= calls + 5, slept
    finally:
        pool.close()


def test_a_call_queued_behind_others_is_not_late() -> None:
    pool = WorkerPool(1)
    spec = EnvSpec("s", "envwire.testing.envs:BurnEnv", {"work": 1, "sleep": 0.4}, isolation="pool")
    try:
        workers = [pool.worker(spec) for _ in range(3)]
        for worker in workers:
            worker.call("reset", 0, None, timeout=5)
        began = time.monotonic()
        joins = [in_thread(lambda w=w: w.call("step", 1, timeout=0.8)) for w in workers]
        for join in joins:
            join()  # each ran 0.4 s of its own, though the last waited 0.8 s in all
        assert time.monotonic() - began >= 1.2
    finally:
        pool.close()


def test_a_call_without_a_timeout_is_never_late() -> None:
    """timeout=None (OpenEnv's own envs): the watchdog leaves the running call alone."""
    pool = WorkerPool(1)
    spec = EnvSpec("s", "envwire.testing.envs:BurnEnv", {"work": 1, "sleep": 1.0}, isolation="pool")
    try:
        worker = pool.worker(spec)
        worker.call("reset", 0, None, timeout=5)
        process = pool._processes[0]
        join = in_thread(lambda: worker.call("step", 1, timeout=None))
        time.sleep(0.5)  # the step runs: with any timeout, an hour from now would be late
        assert not process.overdue(time.monotonic() + 3600)
        obs, *_ = join()
        assert obs[0] == 1
        assert process.lost is None
    finally:
        pool.close()


def test_close_frees_the_env_in_its_process(pool: WorkerPool) -> None:
    kept, closed = pool.worker(TUPLE), pool.worker(TUPLE)
    assert pool.counts() == {kept.pid: 1, closed.pid: 1}
    closed.close()
    closed.close()  # idempotent
    assert pool.counts() == {kept.pid: 1, closed.pid: 0}
    with pytest.raises(EnvCrashedError, match="the env was closed"):
        closed.call("reset", 0, None, timeout=5)


def test_a_failing_constructor_is_reported_and_not_counted(pool: WorkerPool) -> None:
    with pytest.raises(ConfigError, match="cannot import"):
        pool.worker(EnvSpec("x", "no_such_module_xyz:Env", isolation="pool"))
    raising = EnvSpec("r", "envwire.testing.envs:RaiseEnv", {"raise_at": 1}, isolation="pool")
    worker = pool.worker(raising)
    worker.call("reset", 0, None, timeout=5)
    with pytest.raises(EnvError, match=r"r: step raised RuntimeError: RaiseEnv fails"):
        worker.call("step", ACTION, timeout=5)
    worker.call("reset", 0, None, timeout=5)  # an env that raises harms no one
    assert sum(pool.loads().values()) == 1
    assert sum(pool.counts().values()) == 1


def test_vector_sessions_of_one_worker_live_in_the_pool(pool: WorkerPool) -> None:
    spec = EnvSpec("CartPole-v1", "gym:CartPole-v1", isolation="pool")
    worker = make_worker(spec, 4, "NextStep", 1, pool=pool)
    assert isinstance(worker, PooledWorker)
    obs, _ = worker.call("reset", 0, None, timeout=5)
    assert obs.shape == (4, 4)
    *_, truncated, _ = worker.call("step", np.zeros(4, np.int64), timeout=5)
    assert truncated.shape == (4,)


def test_a_session_recovers_from_a_crash_on_a_fresh_process(pool: WorkerPool) -> None:
    session = Session(CRASH, worker_factory=functools.partial(make_worker, pool=pool))
    session.handle(m.Reset(seed=0))
    with pytest.raises(EnvCrashedError, match="SIGSEGV"):
        session.handle(m.Step(ACTION))
    assert session.state is State.BROKEN
    assert isinstance(session.handle(m.Reset(seed=0)), m.ResetReply)
    assert session.state is State.RUNNING
    session.close()


def test_a_closed_pool_ends_its_processes_and_makes_no_more() -> None:
    pool = WorkerPool(2)
    workers = [pool.worker(TUPLE) for _ in range(2)]
    pool.close()
    pool.close()
    for worker in workers:
        with pytest.raises(EnvCrashedError, match="stopped with the worker pool"):
            worker.call("reset", 0, None, timeout=5)
        assert not _alive(worker.pid or 0)
    with pytest.raises(EnvError, match="the worker pool is closed"):
        pool.worker(TUPLE)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_size_zero_is_one_per_core_and_a_negative_size_is_refused() -> None:
    assert WorkerPool(0).size == (os.cpu_count() or 1)
    with pytest.raises(ConfigError, match=r"pool_workers must be 0 .* or more, got -1"):
        WorkerPool(-1)
