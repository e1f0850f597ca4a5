"""Any envwire env as run-based arena game: percepts, actions, outcomes, and replay.

A :class:`Game` hosts one arena env. Each unfinished run it is playing has a live env (an
envwire :class:`~envwire.session.Session`, so isolation, timeouts and crash handling are the
server's usual ones), kept in a bounded least-recently-used table. A run whose live env is gone
(evicted, crashed, or the server restarted) is rebuilt by replaying its seed and accepted
actions, which is exact for envs that are deterministic given their seed (Gymnasium's contract).

- percept: the observation as JSON (``spacecodec.to_json``; a typed env's own fields), alone or
  as ``{"observation", "reward", "step"}`` (the arena env's ``percept`` setting);
- action: JSON decoded through the action space (``spacecodec.from_json`` then
  ``spacecodec.check``; a typed env validates its action model);
- outcome: ``info["outcome"]`` of the last step when the env gives one, else the episode return.

A rejected action (it does not decode, it is not in the space, or the env refuses it) is a
:class:`Rejected` result, never an exception: the run stays where it was.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from gymnasium import spaces
from pydantic import BaseModel, ValidationError

from envwire import messages as m
from envwire import spacecodec
from envwire.arena.settings import ArenaEnvSettings
from envwire.errors import EnvwireError, InvalidActionError, InvalidArgumentError
from envwire.jsonio import JsonValue
from envwire.kinds.typed.models import wire_fields
from envwire.protocols.arena import RawJSON, dumps
from envwire.registry import EnvSpec
from envwire.session import Session, SessionObserver, State, WorkerFactory

__all__ = ["Accepted", "ArenaGame", "Game", "Rejected", "Started", "jsonable"]

log = logging.getLogger("envwire.arena")


@dataclass(frozen=True, slots=True)
class Accepted:
    """An action the env took: the new percept, and the outcome when the run ended."""

    action: RawJSON
    percept: RawJSON
    reward: float
    episode_return: float
    done: bool
    outcome: RawJSON | None = None
    outcome_value: float | None = None
    messages: tuple[str, ...] = ()
    state: RawJSON | None = None  # games that store state (plugin envs): the run's new state
    extra: RawJSON | None = None  # ... and what the action's result kept beside it


@dataclass(frozen=True, slots=True)
class Started:
    """A new run: its first percept, and its state for games that store state."""

    percept: RawJSON
    state: RawJSON | None = None


@dataclass(frozen=True, slots=True)
class Rejected:
    """An action the run did not take, and why."""

    reason: str


class ArenaGame(Protocol):
    """What the arena needs of a game: :class:`Game` (any envwire env, replayed from seeds) and
    :class:`~envwire.arena.aisys.game.PluginGame` (plugin envs, which store their state)."""

    settings: ArenaEnvSettings

    def start(self, run_id: int, seed: int, *, agent: str = "") -> Started:
        """Start a run."""
        ...

    def step(
        self,
        run_id: int,
        seed: int,
        act_no: int,
        percept: RawJSON,
        value: JsonValue,
        *,
        agent: str = "",
    ) -> Accepted | Rejected:
        """Take an action in a run."""
        ...

    def abandon(self, run_id: int, act_no: int, *, agent: str = "") -> tuple[RawJSON, float | None]:
        """End a run at the client's request: its outcome (JSON, and as a number)."""
        ...

    def drop(self, run_id: int, *, reuse: bool = False) -> None:
        """Forget what is kept in memory of a run."""
        ...

    def close(self) -> None:
        """Free everything."""
        ...


@dataclass
class _Live:
    session: Session
    act_no: int
    episode_return: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def jsonable(value: object) -> object:
    """``value`` with numpy scalars and arrays turned into JSON data (for outcomes).

    Containers are walked; any other value comes back as it is (it may not be JSON: callers
    encode the result and fall back to its ``repr``)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def _model_space(space: object) -> type[BaseModel] | None:
    """The pydantic model of a typed env's space, or None for Gymnasium spaces."""
    model = getattr(space, "model", None)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


class Game:
    """The runs of one arena env.

    Args:
        name: the arena env's name (for messages).
        spec: how to make the env.
        settings: the arena env's settings.
        load_actions: the accepted actions of a run as JSON text, for replays.
        worker_factory: where the envs live (see :class:`~envwire.session.Session`).
        live_runs: how many live envs to keep.
        observer: told of the envs' sessions (front end ``arena``).
    """

    def __init__(
        self,
        name: str,
        spec: EnvSpec,
        settings: ArenaEnvSettings,
        load_actions: Callable[[int], list[str]],
        *,
        worker_factory: WorkerFactory,
        live_runs: int = 1024,
        observer: SessionObserver | None = None,
    ) -> None:
        self.name = name
        self._observer = observer
        self.spec = spec
        self._worker_factory = worker_factory
        self.settings = settings
        self._load_actions = load_actions
        self._capacity = max(1, live_runs)
        self._live: OrderedDict[int, _Live] = OrderedDict()
        self._idle: list[Session] = []  # envs of ended runs, reset for the next run
        self._idle_capacity = min(self._capacity, 64)
        self._lock = threading.Lock()
        # Learnt from the first session (see _spaces); None until then.
        self.action_space: spaces.Space[Any] | None = None
        self.observation_space: spaces.Space[Any] | None = None
        self._action_model: type[BaseModel] | None = None  # a typed env's pydantic models
        self._observation_model: type[BaseModel] | None = None

    # -- live envs -------------------------------------------------------------------------

    def _spaces(self) -> None:
        """Learn the spaces (from a session made for the next run) before the first decode."""
        if self.action_space is None:
            self._release(self._session())

    def _session(self) -> Session:
        """A session for a new or rebuilt run: an idle one when there is one (the caller resets
        it with the run's seed, which starts the episode afresh), else a new one."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
        session = Session(
            self.spec,
            worker_factory=self._worker_factory,
            observer=self._observer,
            front_end="arena",
        )
        if self.action_space is None:
            self._action_model = _model_space(session.action_space)
            self._observation_model = _model_space(session.observation_space)
            self.action_space, self.observation_space = (
                session.action_space,
                session.observation_space,
            )
        return session

    def _take(self, run_id: int) -> _Live | None:
        with self._lock:
            return self._live.pop(run_id, None)

    def _keep(self, run_id: int, live: _Live) -> None:
        evicted: list[_Live] = []
        with self._lock:
            self._live[run_id] = live
            while len(self._live) > self._capacity:
                evicted.append(self._live.popitem(last=False)[1])
        for old in evicted:
            self._release(old.session)

    def _release(self, session: Session) -> None:
        """Keep a healthy session for a later run (making envs costs more than resetting
        them), or close it."""
        if session.state in (State.NEW, State.RUNNING, State.ENDED):
            with self._lock:
                if len(self._idle) < self._idle_capacity:
                    self._idle.append(session)
                    return
        session.close()

    def abandon(self, run_id: int, act_no: int, *, agent: str = "") -> tuple[RawJSON, float | None]:
        """The outcome of an abandoned run: the arena env's ``abandon_outcome`` (JSON, number).
        The run's env may serve another run."""
        self.drop(run_id, reuse=True)
        outcome = self.settings.abandon_outcome
        return dumps(outcome), float(outcome)

    def drop(self, run_id: int, *, reuse: bool = False) -> None:
        """Forget a run's live env: it was abandoned (``reuse``: its env may serve another run)
        or its state is in doubt (the env is closed)."""
        live = self._take(run_id)
        if live is None:
            return
        if reuse:
            self._release(live.session)
        else:
            live.session.close()

    def close(self) -> None:
        """Close every env."""
        with self._lock:
            sessions = [live.session for live in self._live.values()] + self._idle
            self._live.clear()
            self._idle = []
        for session in sessions:
            session.close()

    # -- codecs ----------------------------------------------------------------------------

    def percept(self, observation: Any, reward: float, act_no: int) -> RawJSON:
        """The percept for an observation (see the module docstring); called once a session
        has shown the spaces."""
        encoded: object
        if self._observation_model is not None:
            encoded = wire_fields(observation)
        else:
            assert self.observation_space is not None  # set with the first session
            encoded = spacecodec.to_json(self.observation_space, observation)
        if self.settings.percept == "observation":
            return dumps(encoded)
        return dumps({"observation": encoded, "reward": reward, "step": act_no})

    def decode_action(self, value: JsonValue) -> object:
        """The env's action for a JSON value; called once a session has shown the spaces.

        Raises:
            InvalidActionError: it does not decode or is not in the action space.
        """
        model = self._action_model
        if model is not None:
            try:
                return model.model_validate(value)
            except ValidationError as exc:
                raise InvalidActionError(f"not a valid {model.__name__}: {exc}") from None
        assert self.action_space is not None  # set with the first session
        try:
            action = spacecodec.from_json(self.action_space, value)
        except InvalidArgumentError as exc:
            raise InvalidActionError(f"action {exc}") from None
        spacecodec.check(self.action_space, action)
        return action

    # -- runs ------------------------------------------------------------------------------

    def start(self, run_id: int, seed: int, *, agent: str = "") -> Started:
        """Start a run; its first percept.

        Raises:
            EnvwireError: the env could not be made or reset.
        """
        session = self._session()
        try:
            reply = session.handle(m.Reset(seed=seed))
            assert isinstance(reply, m.ResetReply)
            percept = self.percept(reply.observation, 0.0, 0)
        except BaseException:
            session.close()
            raise
        self._keep(run_id, _Live(session, 0))
        return Started(percept)

    def _rebuild(self, run_id: int, seed: int, act_no: int, percept: RawJSON) -> _Live:
        session = self._session()
        try:
            reset = session.handle(m.Reset(seed=seed))
            assert isinstance(reset, m.ResetReply)
            observation, reward, total = reset.observation, 0.0, 0.0
            actions = self._load_actions(run_id)
            if len(actions) != act_no:
                raise InvalidArgumentError(
                    f"run {run_id} has {len(actions)} stored actions, expected {act_no}"
                )
            for text in actions:
                reply = session.handle(m.Step(self.decode_action(json.loads(text))))
                assert isinstance(reply, m.StepReply)
                observation, reward = reply.observation, reply.reward
                total += reply.reward
        except BaseException:
            session.close()
            raise
        if self.percept(observation, reward, act_no) != percept:
            log.warning(
                "%s: replaying run %d gave another percept than the one stored; is the env "
                "deterministic given its seed?",
                self.name,
                run_id,
            )
        return _Live(session, act_no, total)

    def step(
        self,
        run_id: int,
        seed: int,
        act_no: int,
        percept: RawJSON,
        value: JsonValue,
        *,
        agent: str = "",
    ) -> Accepted | Rejected:
        """Take action ``value`` in a run that has accepted ``act_no`` actions and shows
        ``percept``; rebuild the run first if its live env is gone."""
        try:
            self._spaces()
            action = self.decode_action(value)
            encoded = dumps(value)
        except InvalidActionError as exc:
            return Rejected(str(exc))
        except EnvwireError as exc:  # the env cannot even be made right now
            return Rejected(f"the env is not available, try again: {exc}")
        except (TypeError, ValueError) as exc:  # not JSON-encodable: cannot happen from JSON
            return Rejected(f"action cannot be stored: {exc}")
        live = self._take(run_id)
        if live is None or live.act_no != act_no:
            if live is not None:
                live.session.close()
            try:
                live = self._rebuild(run_id, seed, act_no, percept)
            except EnvwireError as exc:
                return Rejected(f"the run could not be restored, try again: {exc}")
        try:
            reply = live.session.handle(m.Step(action))
        except InvalidActionError as exc:  # the env refused before changing anything
            self._keep(run_id, live)
            return Rejected(str(exc))
        except EnvwireError as exc:  # the env failed: its state is in doubt, rebuild next time
            live.session.close()
            return Rejected(f"the env failed on this action: {exc}")
        assert isinstance(reply, m.StepReply)
        live.act_no += 1
        live.episode_return += reply.reward
        new_percept = self.percept(reply.observation, reply.reward, live.act_no)
        message = reply.info.get("message")
        messages = (message,) if isinstance(message, str) and message else ()
        if not reply.done:
            self._keep(run_id, live)
            return Accepted(encoded, new_percept, reply.reward, live.episode_return, False,
                            messages=messages)  # fmt: skip
        self._release(live.session)
        outcome: object = live.episode_return
        if self.settings.outcome == "auto" and "outcome" in reply.info:
            outcome = jsonable(reply.info["outcome"])
        value_ = float(outcome) if isinstance(outcome, int | float) else None
        try:
            outcome_json = dumps(outcome)
        except (TypeError, ValueError):  # an outcome JSON cannot carry: keep its text
            outcome_json = dumps(repr(outcome))
        return Accepted(
            encoded, new_percept, reply.reward, live.episode_return, True,
            outcome_json, value_, messages,
        )  # fmt: skip
