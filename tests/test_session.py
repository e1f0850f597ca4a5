"""The session state machine, with real envs in real workers."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, cast

import gymnasium
import numpy as np
import pytest

from envwire import messages as m
from envwire import session as session_package
from envwire.errors import (
    EnvCrashedError,
    EnvError,
    EnvTimeoutError,
    InvalidActionError,
    InvalidArgumentError,
    StateError,
    UnsupportedError,
)
from envwire.registry import EnvSpec, parse_env_arg
from envwire.runtime import make_worker
from envwire.session import ALLOWED, Session, State, confine
from envwire.session.contracts import BULK, TapCalls


def session(arg: str = "CartPole-v1", **kwargs: Any) -> Session:
    return Session(parse_env_arg(arg), worker_factory=make_worker, **kwargs)


def test_every_state_has_a_row_in_the_table() -> None:
    assert set(ALLOWED) == set(State)
    assert ALLOWED[State.CLOSED] == frozenset()
    assert m.Step not in ALLOWED[State.ENDED] and m.Step in ALLOWED[State.RUNNING]


def test_episode_bookkeeping_and_termination() -> None:
    s = session()
    assert s.state is State.NEW
    with pytest.raises(StateError, match="before the first Reset"):
        s.handle(m.Step(0))
    s.handle(m.Reset(seed=0))
    total, steps = 0.0, 0
    while s.state is State.RUNNING:
        reply = s.handle(m.Step(1))
        assert isinstance(reply, m.StepReply)
        total += reply.reward
        steps += 1
    assert reply.terminated and not reply.truncated
    assert (s.step_count, s.episode_return, s.episode) == (steps, total, 0)
    with pytest.raises(StateError, match="after episode 0 ended at step"):
        s.handle(m.Step(1))
    s.handle(m.Reset())
    assert (s.episode, s.step_count, s.episode_return) == (1, 0, 0.0)
    s.close()
    assert s.state is State.CLOSED
    with pytest.raises(StateError):
        s.handle(m.Reset())


def test_truncation_is_not_termination() -> None:
    s = Session(
        EnvSpec("short", "envwire.envs.catch:CatchEnv", max_episode_steps=3),
        worker_factory=make_worker,
    )
    s.handle(m.Reset(seed=0))
    replies = [s.handle(m.Step(1)) for _ in range(3)]
    assert replies[-1].truncated and not replies[-1].terminated
    assert s.state is State.ENDED
    s.close()


def test_seed_zero_is_honoured_and_matches_gymnasium() -> None:
    s = session()
    local = gymnasium.make("CartPole-v1")
    for seed in (0, 0, 7):
        obs = s.handle(m.Reset(seed=seed)).observation
        np.testing.assert_array_equal(obs, local.reset(seed=seed)[0])
    assert s.last_seed == 7
    with pytest.raises(InvalidArgumentError, match="seed"):
        s.handle(m.Reset(seed=-1))
    with pytest.raises(InvalidArgumentError, match="seed"):
        s.handle(m.Reset(seed="x"))  # type: ignore[arg-type]
    s.close()


def test_actions_are_validated() -> None:
    s = session()
    s.handle(m.Reset(seed=0))
    with pytest.raises(InvalidActionError, match="Discrete"):
        s.handle(m.Step(2))
    assert s.state is State.RUNNING  # a bad action costs nothing
    s.handle(m.Step(0))
    s.close()


def test_spaces_and_samples() -> None:
    s = session("test/Tuple-v0=envwire.testing.envs:TupleEnv")
    space = s.handle(m.GetSpace(m.SpaceKind.ACTION)).space
    assert isinstance(space, gymnasium.spaces.Tuple)
    assert s.handle(m.SampleAction()).action in space
    assert s.handle(m.GetSpace(m.SpaceKind.OBSERVATION)).space == s.observation_space
    s.close()


def test_env_exception_ends_the_episode_but_not_the_session() -> None:
    s = session("r=envwire.testing.envs:RaiseEnv")
    s.handle(m.Reset(seed=0))
    s.handle(m.Step(s.action_space.sample()))
    with pytest.raises(EnvError, match="RuntimeError: RaiseEnv fails on purpose"):
        s.handle(m.Step(s.action_space.sample()))
    assert s.state is State.ENDED
    s.handle(m.Reset(seed=0))
    s.close()


def test_crashed_worker_breaks_the_session_until_reset() -> None:
    s = Session(
        EnvSpec("c", "envwire.testing.envs:CrashEnv", {"crash_at": 1, "how": "exit"}, "process"),
        worker_factory=make_worker,
    )
    s.handle(m.Reset(seed=0))
    with pytest.raises(EnvCrashedError, match="exited with code 3"):
        s.handle(m.Step(s.action_space.sample()))
    assert s.state is State.BROKEN
    with pytest.raises(StateError, match="crashed or hung"):
        s.handle(m.Step(s.action_space.sample()))
    s.handle(m.Reset(seed=1))
    assert s.state is State.RUNNING
    s.close()


def test_hung_worker_is_killed_after_its_timeout() -> None:
    s = Session(
        EnvSpec("h", "envwire.testing.envs:HangEnv", {"hang_at": 1}, "process", step_timeout=0.5),
        worker_factory=make_worker,
    )
    s.handle(m.Reset(seed=0))
    with pytest.raises(EnvTimeoutError, match=r"within 0\.5 s"):
        s.handle(m.Step(s.action_space.sample()))
    assert s.state is State.BROKEN
    s.handle(m.Reset(seed=0))
    s.close()


def test_session_without_env_allows_only_close() -> None:
    s = Session(None, worker_factory=make_worker)
    assert s.state is State.NO_ENV and s.env_id == ""
    with pytest.raises(StateError, match="opened without an env"):
        s.handle(m.Reset())
    with pytest.raises(StateError, match="opened without an env"):
        s.handle(m.Monitor("d"))
    assert s.handle(m.Close()) == m.Ok()


def test_monitor_needs_a_root(tmp_path: Any) -> None:
    s = session("envwire/Catch-v0")
    with pytest.raises(UnsupportedError, match="Monitor is disabled"):
        s.handle(m.Monitor("x"))
    s.close()
    s = session("envwire/Catch-v0", monitor_root=str(tmp_path))
    reply = s.handle(m.Monitor("/abs/../x", force=True))
    assert reply == m.MonitorReply(str(tmp_path / "x"))
    s.close()


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        ("runs/a", "/r/runs/a"),
        ("/tmp/mon", "/r/tmp/mon"),
        ("a/../b", "/r/b"),
        ("/", "/r"),
        ("../../etc", "/r/etc"),
        ("a\\b", "/r/a/b"),
    ],
)
def test_confine_keeps_paths_under_the_root(requested: str, expected: str) -> None:
    assert confine("/r", requested) == expected


@pytest.mark.parametrize("bad", ["", "a\x00b"])
def test_confine_refuses_unusable_paths(bad: str) -> None:
    with pytest.raises(InvalidArgumentError):
        confine("/r", bad)


def test_native_specs_come_from_dm_env_envs_only() -> None:
    grid = session("grid=envwire.testing.dmenvs:GridEnv")
    try:
        specs = grid.native_specs()
        assert list(specs.observation) == ["position", "arm", "count", "cell"]  # the env's order
        assert specs.action["move"].num_values == 3
    finally:
        grid.close()
    cartpole = session()
    assert cartpole.native_specs() is None
    cartpole.close()
    vector = session(num_envs=2, autoreset_mode="NextStep")
    assert vector.native_specs() is None
    vector.close()


#: The names of the protocols (and of what only one protocol has: OpenEnv's MCP and tool
#: calls, gym-socket's scoreboard Upload), as code and prose would write them.
_PROTOCOL_NAMES = re.compile(
    r"gym-?socket|open-?env|dm_env_rpc|dmenvrpc|grpc|arena|godot|http|websocket|mcp|call_tool"
    r"|scoreboard|upload",
    re.IGNORECASE,
)


def test_the_session_and_the_messages_name_no_protocol() -> None:
    sources = [Path(m.__file__), *Path(session_package.__file__).parent.glob("*.py")]
    found = {
        f"{path.name}:{number}: {line.strip()}"
        for path in sources
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if _PROTOCOL_NAMES.search(line)
    }
    assert len(sources) == 5 and not found, sorted(found)


class _Observer:
    """An observer whose tap records which of its callables each request reached."""

    def __init__(self, steady: bool, ended: bool = False) -> None:
        self.told: list[tuple[str, Any]] = []
        self.steady = steady
        self.ended = ended

    def opened(self, session: Session) -> Any:
        told = self.told

        class Tap:
            def handled(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
                told.append(("handled", type(request).__name__))

            def failed(self, request: m.Request, error: Exception, seconds: float) -> None:
                told.append(("failed", type(request).__name__))

            def closed(self) -> None:
                told.append(("closed", ""))

        tap = Tap()
        if self.steady:
            tap.steady = lambda request, reply, seconds: told.append(  # type: ignore[attr-defined]
                ("steady", type(request).__name__)
            )
        if self.ended:
            tap.ended = lambda request, reply, seconds, copies: told.append(  # type: ignore[attr-defined]
                ("ended", tuple(copies))
            )
        return tap

    def refused(self, front_end: str, env_id: str, error: Exception) -> None:
        raise AssertionError("not refused here")


@pytest.mark.parametrize("steady", [True, False])
def test_a_taps_steady_hears_the_steps_that_end_no_episode(steady: bool) -> None:
    observer = _Observer(steady)
    s = Session(parse_env_arg("CartPole-v1"), worker_factory=make_worker, observer=observer)
    s.handle(m.Reset(seed=0))
    steps = 0
    while True:
        steps += 1
        reply = s.handle(m.Step(1))
        assert isinstance(reply, m.StepReply)
        if reply.terminated or reply.truncated:
            break
    middle = "steady" if steady else "handled"
    assert observer.told == [
        ("handled", "Reset"),
        *[(middle, "Step")] * (steps - 1),
        ("handled", "Step"),  # the step that ended the episode
    ]
    # A tap put in place of the observer's is told by handled alone
    replaced = _Observer(False)
    s.tap = replaced.opened(s)
    s.handle(m.Reset())
    s.handle(m.Step(1))
    assert replaced.told == [("handled", "Reset"), ("handled", "Step")]
    assert observer.told[-1] == ("handled", "Step")
    s.close()


@pytest.mark.parametrize("steady", [True, False])
def test_a_taps_steady_hears_the_batches_that_end_no_episode(steady: bool) -> None:
    """A vector session tells a tap's ``steady`` of each batch in which no copy's episode
    ends, and ``handled`` of every other (a taps without ``steady`` hears them all by
    ``handled``)."""
    observer = _Observer(steady)
    s = Session(
        parse_env_arg("CartPole-v1"),
        worker_factory=make_worker,
        num_envs=3,
        autoreset_mode="NextStep",
        observer=observer,
    )
    s.handle(m.Reset(seed=0))
    want = [("handled", "Reset")]
    rng = np.random.default_rng(0)
    for _ in range(60):
        reply = s.handle(m.Step(rng.integers(0, 2, 3)))
        assert isinstance(reply, m.VectorStepReply)
        ended = bool(np.any(reply.terminations) or np.any(reply.truncations))
        want.append(("handled" if ended or not steady else "steady", "Step"))
    assert observer.told == want
    assert ("handled", "Step") in want[1:] and (("steady", "Step") in want) == steady
    s.close()


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
@pytest.mark.parametrize("ended", [True, False])
def test_a_taps_ended_hears_the_batches_that_end_episodes_with_their_copies(
    mode: str, ended: bool
) -> None:
    """A vector session tells a tap's ``ended`` of each batch in which copies' episodes end,
    with those copies in order (``handled`` where the tap has no ``ended``); ``steady`` of
    the others."""
    observer = _Observer(True, ended)
    s = Session(
        parse_env_arg("CartPole-v1"),
        worker_factory=make_worker,
        num_envs=5,
        autoreset_mode=mode,
        observer=observer,
    )
    s.handle(m.Reset(seed=0))
    want: list[tuple[str, Any]] = [("handled", "Reset")]
    rng = np.random.default_rng(1)
    for _ in range(80):
        reply = s.handle(m.Step(rng.integers(0, 2, 5)))
        assert isinstance(reply, m.VectorStepReply)
        copies = tuple(int(i) for i in np.flatnonzero(reply.terminations | reply.truncations))
        if not copies:
            want.append(("steady", "Step"))
        else:
            want.append(("ended", copies) if ended else ("handled", "Step"))
    assert observer.told == want
    several = [told for told in want if told[0] == "ended" and len(told[1]) > 1]
    assert not ended or several  # batches that ended more than one copy were among them
    s.close()


@pytest.mark.parametrize(
    ("ends", "cuts"),
    [
        (np.array([0, 1, 0], np.int8), np.zeros(3, np.int8)),  # not boolean
        (np.array([[False, True, False]]), np.zeros((1, 3), bool)),  # not one dimension
        (np.array([False, True, False]), np.zeros(4, bool)),  # not one length
        ([False, True, False], [False, False, False]),  # not arrays
    ],
)
def test_a_batch_whose_flags_are_not_boolean_arrays_of_one_length_is_handled(
    ends: Any, cuts: Any
) -> None:
    """``TapCalls.batch`` tells ``ended`` only of flags it can read the copies from; any
    other batch that may end an episode reaches ``handled``."""
    observer = _Observer(True, True)
    tap = observer.opened(cast(Session, None))
    calls = TapCalls(tap, 3)
    reply = m.VectorStepReply(np.zeros((3, 4), np.float32), np.zeros(3), ends, cuts, {})
    calls.batch(m.Step(np.zeros(3, np.int64)), reply, 0.0)
    quiet = m.VectorStepReply(
        np.zeros((3, 4), np.float32), np.zeros(3), np.zeros(3, bool), np.zeros(3, bool), {}
    )
    calls.batch(m.Step(np.zeros(3, np.int64)), quiet, 0.0)
    ended = m.VectorStepReply(
        np.zeros((3, 4), np.float32),
        np.zeros(3),
        np.array([True, False, True]),
        np.array([False, True, False]),
        {},
    )
    calls.batch(m.Step(np.zeros(3, np.int64)), ended, 0.0)
    assert observer.told == [("handled", "Step"), ("steady", "Step"), ("ended", (0, 1, 2))]


def test_batches_kept_for_bulk_batches_are_told_before_a_batch_that_cannot_be_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A vector session's ``TapCalls`` keeps the batches of float64 rewards and boolean flags
    of one value per copy for the tap's ``bulk_batches``: their rewards as rows, the ended
    copies as ``(row, copy)`` pairs, told at the ``BULK``-th; a batch of any other layout
    is told at once by the per-batch calls, after those kept. A ``bulk_batches`` that
    raises is logged, and the next batches are kept afresh."""
    observer = _Observer(True, True)
    tap = observer.opened(cast(Session, None))
    bulks: list[tuple[int, list[list[float]], list[tuple[int, int]]]] = []

    def bulk_batches(seconds: list[float], rewards: Any, ended: list[tuple[int, int]]) -> None:
        bulks.append((len(seconds), rewards.tolist(), ended))
        if len(bulks) == 2:
            raise RuntimeError("a broken observer")

    tap.bulk_batches = bulk_batches
    calls = TapCalls(tap, 3, vector=True)
    assert calls.batch == calls._keep_batch and calls.keep == calls.batch
    step = m.Step(np.zeros(3, np.int64))

    def batch(rewards: Any, ends: list[bool], cuts: list[bool]) -> m.VectorStepReply:
        return m.VectorStepReply(np.zeros((3, 4)), rewards, np.array(ends), np.array(cuts), {})

    calls.batch(step, batch(np.array([1.0, 2.0, 3.0]), [False] * 3, [False] * 3), 0.1)
    calls.batch(step, batch(np.array([4.0, 5.0, 6.0]), [True, False, False], [False] * 3), 0.2)
    calls.batch(step, batch(np.array([7.0, 8.0, 9.0]), [False] * 3, [False, True, True]), 0.3)
    assert bulks == [] and observer.told == [] and calls.kept is None
    calls.batch(step, batch(np.ones(3, np.float32), [False, True, False], [False] * 3), 0.4)
    assert bulks == [(3, [[1, 2, 3], [4, 5, 6], [7, 8, 9]], [(1, 0), (2, 1), (2, 2)])]
    assert observer.told == [("ended", (1,))]  # the float32 batch, told at once
    for _ in range(BULK):
        calls.batch(step, batch(np.zeros(3), [False] * 3, [False] * 3), 0.0)
    assert calls.kept is not None  # due: told at the next tell_kept
    calls.tell_kept()
    assert len(bulks) == 2 and bulks[1][0] == BULK and "failed on steps" in caplog.text
    calls.batch(step, batch(np.zeros(3), [True] * 3, [False] * 3), 0.0)
    calls.tell_kept()
    assert bulks[2] == (1, [[0, 0, 0]], [(0, 0), (0, 1), (0, 2)])


@pytest.mark.parametrize("mode", [None, "SameStep"])
def test_a_step_kept_for_the_tap_is_told_at_tell_or_before_the_next_request(
    mode: str | None,
) -> None:
    """``step(tell=False)`` leaves the tap untold until ``tell()`` (``due`` says so); any later
    call on the session (a step, a reset, another request, the close) tells it first, so the
    tap hears every request once and in order, as with ``tell`` True."""
    observer = _Observer(True, True)
    s = Session(
        parse_env_arg("CartPole-v1"),
        worker_factory=make_worker,
        num_envs=1 if mode is None else 2,
        autoreset_mode=mode,
        observer=observer,
    )
    s.handle(m.Reset(seed=0))
    # (CartPole ends no episode in its first three steps)
    step = m.Step(1 if mode is None else np.ones(2, np.int64))
    assert not s.due
    s.step(step, tell=False)
    assert observer.told == [("handled", "Reset")] and s.due
    s.tell()
    assert not s.due
    s.tell()  # nothing kept: nothing told
    assert observer.told == [("handled", "Reset"), ("steady", "Step")]
    s.step(step, tell=False)
    s.step(step, tell=False)  # tells the step before it first
    assert observer.told[2:] == [("steady", "Step")]
    s.handle(m.Reset(seed=1))
    s.step(step, tell=False)
    s.handle(m.GetSpace(m.SpaceKind.ACTION))
    s.step(step, tell=False)
    s.close()
    assert observer.told[2:] == [
        ("steady", "Step"),
        ("steady", "Step"),
        ("handled", "Reset"),
        ("steady", "Step"),
        ("handled", "GetSpace"),
        ("steady", "Step"),
        ("closed", ""),
    ]


class _BrokenObserver:
    """An observer whose tap raises on every step it is told of."""

    def opened(self, session: Session) -> Any:
        class Tap:
            def handled(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
                if isinstance(request, m.Step):
                    raise RuntimeError("a bug in the tap")

            def failed(self, request: m.Request, error: Exception, seconds: float) -> None:
                pass

            def closed(self) -> None:
                pass

        return Tap()


def test_a_tap_that_raises_on_a_kept_step_is_logged_and_the_session_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Past its reply, a step's tap that raises is logged; told at once, it raises to the
    caller (the front end answers it as an internal error)."""
    s = Session(
        parse_env_arg("CartPole-v1"),
        worker_factory=make_worker,
        observer=cast(Any, _BrokenObserver()),
    )
    s.handle(m.Reset(seed=0))
    with caplog.at_level(logging.ERROR, logger="envwire.session"):
        reply = s.step(m.Step(1), tell=False)
        s.tell()
    assert isinstance(reply, m.StepReply)
    assert "observer failed on a step" in caplog.text and "a bug in the tap" in caplog.text
    assert s.step_count == 1
    with pytest.raises(RuntimeError, match="a bug in the tap"):
        s.step(m.Step(1))
    assert s.step_count == 2
    s.close()
