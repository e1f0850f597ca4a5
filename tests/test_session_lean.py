"""A one-env session's one-call reset gives what its general path gives: the same
replies, bookkeeping, tap events and errors."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import gymnasium
import numpy as np
import pytest

from envwire import messages as m
from envwire.errors import EnvError, EnvwireError, InvalidArgumentError, StateError
from envwire.registry import EnvSpec, parse_env_arg
from envwire.runtime import make_worker
from envwire.session import Session, State
from tests.spaces_catalog import assert_same


class ResetRaiseEnv(gymnasium.Env[np.int64, np.int64]):
    """Resets once, then raises on every reset after."""

    observation_space = gymnasium.spaces.Discrete(3)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self) -> None:
        self.resets = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.int64, dict[str, Any]]:
        super().reset(seed=seed)
        self.resets += 1
        if self.resets > 1:
            raise RuntimeError("ResetRaiseEnv fails on purpose")
        return np.int64(0), {"resets": self.resets}

    def step(self, action: np.int64) -> tuple[np.int64, float, bool, bool, dict[str, Any]]:
        return np.int64(1), 1.0, False, False, {}


class _Tap:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def handled(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
        assert seconds >= 0
        self.events.append(("handled", type(request).__name__, type(reply).__name__))

    def failed(self, request: m.Request, error: EnvwireError, seconds: float) -> None:
        self.events.append(("failed", type(request).__name__, str(error)))

    def closed(self) -> None:
        self.events.append(("closed", "", ""))


_TAPS: dict[str, _Tap] = {}


class _Observer:
    def opened(self, session: Session) -> _Tap:
        tap = _TAPS[session.id] = _Tap()
        return tap

    def refused(self, front_end: str, env_id: str, error: EnvwireError) -> None:
        pass


def _session(spec: EnvSpec) -> Session:
    return Session(spec, worker_factory=make_worker, observer=_Observer())


def _general(s: Session, request: m.Request) -> m.Reply:
    """The general path: every request but a one-env session's step, which has no other."""
    if type(request) is m.Step:
        return s.handle(request)
    with s._lock:
        return s._observed(request)


def _outcome(s: Session, request: m.Request, *, general: bool) -> Any:
    """The reply or error, the bookkeeping and the tap's events (the session's id left out)."""
    try:
        reply = _general(s, request) if general else s.handle(request)
        got: Any = (
            type(reply).__name__,
            *(getattr(reply, f.name) for f in dataclasses.fields(reply)),
        )
    except EnvwireError as exc:
        got = (type(exc).__name__, str(exc))
    events = [tuple(e.replace(s.id[:8], "ID") for e in event) for event in _TAPS[s.id].events]
    got = tuple(x.replace(s.id[:8], "ID") if isinstance(x, str) else x for x in got)
    return got, s.state, s.episode, s.step_count, s.episode_return, s.last_seed, events


_CARTPOLE: list[m.Request] = [
    m.Step(0),  # before the first reset: refused
    m.Reset(seed=-1),  # refused seeds
    m.Reset(seed=True),
    m.Reset(seed="3"),
    m.Reset(seed=7),
    *[m.Step(1)] * 12,  # to the episode's end and past it
    m.Reset(),
    m.Step(0),
    m.Reset(seed=3, options={"low": -0.01, "high": 0.01}),
    m.Step(1),
    m.Close(),
    m.Reset(),  # closed: refused
]


def test_one_call_steps_and_resets_equal_the_general_path() -> None:
    lean, general = (_session(parse_env_arg("CartPole-v1")) for _ in range(2))
    for request in _CARTPOLE:
        got, expected = (
            _outcome(lean, request, general=False),
            _outcome(general, request, general=True),
        )
        assert_same(got, expected)
    assert ("closed", "", "") in _TAPS[lean.id].events


def test_a_reset_the_env_refuses_ends_the_episode_on_both_paths() -> None:
    spec = EnvSpec("r", f"{__name__}:ResetRaiseEnv", {}, "inline")
    lean, general = _session(spec), _session(spec)
    requests: list[m.Request] = [m.Reset(seed=0), m.Step(1), m.Reset(), m.Step(1), m.Reset()]
    for request in requests:
        got, expected = (
            _outcome(lean, request, general=False),
            _outcome(general, request, general=True),
        )
        assert_same(got, expected)
    assert lean.state is State.ENDED
    with pytest.raises(EnvError, match="fails on purpose"):
        lean.handle(m.Reset(seed=1))


def test_a_lean_step_reply_is_the_message_its_constructor_makes() -> None:
    s = _session(parse_env_arg("CartPole-v1"))
    s.handle(m.Reset(seed=0))
    reply = s.handle(m.Step(1))
    assert type(reply) is m.StepReply
    made = m.StepReply(
        reply.observation, reply.reward, reply.terminated, reply.truncated, reply.info
    )
    assert reply == made and repr(reply) == repr(made)
    with pytest.raises(AttributeError):
        reply.reward = 2.0  # type: ignore[misc]  # still frozen
    s.handle(m.Close())
    with pytest.raises(StateError):
        s.handle(m.Step(1))
    with pytest.raises(InvalidArgumentError):
        _session(parse_env_arg("CartPole-v1")).handle(m.Reset(seed=-2))


def test_a_usual_reset_takes_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _session(parse_env_arg("CartPole-v1"))
    general: list[m.Request] = []
    observed = s._observed

    def counted(request: m.Request) -> m.Reply:
        general.append(request)
        return observed(request)

    monkeypatch.setattr(s, "_observed", counted)
    for request in [m.Reset(seed=0), m.Reset(), m.Reset(seed=-1), m.Reset(seed=1)]:
        with contextlib.suppress(InvalidArgumentError):
            s.handle(request)
    assert general == [m.Reset(seed=-1)]  # only the refused seed took the general path


def test_a_step_request_seen_again_is_not_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A codec keeps one request per integer action and hands the same object out for every
    step of it: the session checks its action the first time only. Any other request (a new
    one of the same action, an array action, one after a refused action) is checked."""
    s = _session(parse_env_arg("CartPole-v1"))
    s.handle(m.Reset(seed=0))
    checked: list[object] = []
    check = s._check_action

    def counted(action: object) -> None:
        checked.append(action)
        check(action)

    monkeypatch.setattr(s, "_check_action", counted)
    kept = m.Step(np.int64(1))
    for _ in range(3):
        s.handle(kept)
    assert len(checked) == 1
    s.handle(m.Step(np.int64(1)))  # equal, but another object
    s.handle(kept)  # the last one checked is that other one now
    assert len(checked) == 3
    bad = m.Step(np.int64(2))
    for _ in range(2):
        with pytest.raises(EnvwireError, match="action"):
            s.handle(bad)  # refused every time: a refused request is not kept
    assert len(checked) == 5


def test_an_array_action_is_checked_at_every_step() -> None:
    """The same request object again, its array changed in place: checked again, and
    refused once the array leaves the space."""
    s = _session(parse_env_arg("MountainCarContinuous-v0"))
    s.handle(m.Reset(seed=0))
    action = np.zeros(1, np.float32)
    request = m.Step(action)
    s.handle(request)
    action[0] = 5.0  # outside Box(-1, 1)
    with pytest.raises(EnvwireError, match="action"):
        s.handle(request)
