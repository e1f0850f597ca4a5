"""The :class:`Session`: one client's env, which every front end drives through
:meth:`Session.handle` (the package's docstring has the state machine)."""

from __future__ import annotations

import functools
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import gymnasium
import numpy as np
from gymnasium.vector.utils import batch_space

from envwire import messages as m
from envwire import spacecodec
from envwire.errors import (
    EnvCrashedError,
    EnvError,
    EnvTimeoutError,
    EnvwireError,
    InvalidArgumentError,
    StateError,
    UnsupportedError,
)
from envwire.registry import EnvSpec
from envwire.session.contracts import SessionTap, TapCalls, Worker, WorkerFactory
from envwire.session.states import (
    ALLOWED,
    ENV_STEPS_ALLOWED,
    State,
    checked_seed,
    confine,
    refusal,
)

__all__ = ["Session", "SessionObserver"]

# Bound once: the step path calls them on every step.
_perf_counter = time.perf_counter
_monotonic = time.monotonic
# The replies of every step, made by their slots' setters (see m.slot_setters)
_new = object.__new__
_SET_OBS, _SET_REWARD, _SET_TERMINATED, _SET_TRUNCATED, _SET_INFO = m.slot_setters(
    m.StepReply, "observation", "reward", "terminated", "truncated", "info"
)
_SET_OBSS, _SET_REWARDS, _SET_TERMINATIONS, _SET_TRUNCATIONS, _SET_INFOS = m.slot_setters(
    m.VectorStepReply, "observations", "rewards", "terminations", "truncations", "infos"
)
#: Copies up to which a vector step's rewards are summed by Python, not by a ufunc call.
_FEW = 64
#: Action types that cannot change once made: a step request seen again holds the action
#: checked the first time (see Session.step).
_SCALARS = frozenset({int, np.int64, np.int32, np.int16, np.int8, np.uint8, np.uint16})


class Session:
    """One env (or a batch of ``num_envs`` copies) and its episode bookkeeping.

    Args:
        spec: the env to host, or None for a session without an env.
        num_envs: how many copies the session steps at once.
        autoreset_mode: None for a one-env session; for a vector session of ``num_envs``
            copies, Gymnasium's autoreset mode ('NextStep', 'SameStep' or 'Disabled'). A vector
            session's Step takes a batch of actions and answers a ``VectorStepReply``.
        workers: split a vector session's copies over this many worker processes.
        worker_factory: makes the worker, where the env lives (the server passes
            ``envwire.runtime.make_worker``).
        monitor_root: where Monitor requests may write; None disables Monitor.
        observer: told of the session's requests (metrics, logs, recording); None for none.
        front_end: the name of the front end that opened the session (a label for observers).
        peer: the client's address, as the front end writes it ('' when unknown).

    Raises (from the constructor): whatever making the env raised (``ConfigError``,
    ``EnvError``, ``EnvTimeoutError``, ``EnvCrashedError``).
    """

    def __init__(
        self,
        spec: EnvSpec | None,
        *,
        worker_factory: WorkerFactory,
        num_envs: int = 1,
        autoreset_mode: str | None = None,
        workers: int = 1,
        monitor_root: str | None = None,
        observer: SessionObserver | None = None,
        front_end: str = "",
        peer: str = "",
    ) -> None:
        self.id = uuid.uuid4().hex
        self.spec = spec
        self.front_end = front_end
        self.peer = peer
        self.tap: SessionTap | None = None
        # An env that decides what a step before reset means takes one
        self._table = ENV_STEPS_ALLOWED if spec is not None and spec.decides_steps else ALLOWED
        if num_envs < 1 or (autoreset_mode is None and num_envs != 1):
            raise InvalidArgumentError(
                f"num_envs must be 1, or >= 1 with an autoreset mode; got {num_envs}"
            )
        if autoreset_mode is not None:
            autoreset_mode = m.autoreset_mode(autoreset_mode).value
        self.num_envs = num_envs
        #: The calls of the tap it came from (see SessionTap), while that tap is the tap.
        self._calls = TapCalls(None, num_envs)
        self.autoreset_mode = autoreset_mode
        self.workers = max(1, workers)
        self.batch_action_space: gymnasium.Space[Any] | None = None
        self.monitor_root = monitor_root
        self._worker_factory = worker_factory
        self._lock = threading.Lock()
        self._on_hang: Callable[[EnvTimeoutError], None] | None = None
        self.created = _monotonic()
        self.episode = -1
        self.step_count = 0
        self.episode_return = 0.0
        self.total_steps = 0
        self.last_seed: int | Sequence[int | None] | None = None
        self.monitor_directory: str | None = None
        self.worker: Worker | None = None
        self._spaces: tuple[gymnasium.Space[Any], gymnasium.Space[Any]] | None = None
        self._check_action: Callable[[object], None] = lambda action: None
        #: The last step request whose action passed _check_action (see step)
        self._checked: m.Step | None = None
        #: Whether a step is kept for the tap, to tell at :meth:`tell` (never False while one is)
        self.due = False
        if spec is None:
            self.state = State.NO_ENV
            return
        self.state = State.NEW
        self._start_worker()
        if observer is not None:
            self._calls = TapCalls(observer.opened(self), num_envs, vector=bool(autoreset_mode))
            self.tap = self._calls.tap

    @property
    def state(self) -> State:
        """Where the session is in its life."""
        return self._state

    @state.setter
    def state(self, state: State) -> None:
        # The requests the state allows are looked up here, once per change, rather than on
        # every request: hashing an Enum member runs Python code.
        self._state = state
        self._allowed = self._table[state]

    @property
    def action_space(self) -> gymnasium.Space[Any]:
        """The env's action space (one copy's, in a vector session); ``StateError`` where the
        session has no env (it was opened without one)."""
        return self._env_spaces()[0]

    @property
    def observation_space(self) -> gymnasium.Space[Any]:
        """The env's observation space (one copy's, in a vector session); ``StateError``
        where the session has no env."""
        return self._env_spaces()[1]

    def _env_spaces(self) -> tuple[gymnasium.Space[Any], gymnasium.Space[Any]]:
        if self._spaces is None:
            raise StateError(f"session {self.id[:8]} has no env, so no spaces")
        return self._spaces

    @property
    def env_id(self) -> str:
        """The served env's id ('' for a session without an env)."""
        return self.spec.id if self.spec is not None else ""

    def set_on_hang(self, callback: Callable[[EnvTimeoutError], None] | None) -> None:
        """Have ``callback`` called (from another thread) if an inline env call hangs."""
        self._on_hang = callback

    def _hung(self, error: EnvTimeoutError) -> None:
        self.state = State.BROKEN
        if self._on_hang is not None:
            self._on_hang(error)

    def _start_worker(self) -> None:
        assert self.spec is not None
        self.worker = self._worker_factory(
            self.spec, self.num_envs, self.autoreset_mode, self.workers
        )
        self.worker.on_hang = self._hung
        # Settled once per worker: the deadline each call may take, and the step path's call
        # (the worker's own step where it has one; called with its timeout by keyword, as a
        # partial holding one would build a dict and a tuple on every call).
        self._timeout = self.spec.resolved_step_timeout
        direct = getattr(self.worker, "call_step", None)
        self._env_step: Callable[..., Any] = direct or functools.partial(self.worker.call, "step")
        self._spaces = self._call("spaces")
        self._checked = None
        if self.autoreset_mode is not None:
            self.batch_action_space = batch_space(self.action_space, self.num_envs)
            self._check_action = spacecodec.checker(self.batch_action_space, what="actions")
        else:
            self._check_action = spacecodec.checker(self.action_space)

    def _call(self, method: str, *args: object) -> Any:
        assert self.spec is not None and self.worker is not None
        try:
            return self.worker.call(method, *args, timeout=self._timeout)
        except (EnvCrashedError, EnvTimeoutError):
            self.state = State.BROKEN
            raise

    def native_specs(self) -> object:
        """The env's own description beyond its spaces, when its kind has one (a dm_env env's
        specs: :class:`~envwire.kinds.dm_env.DmSpecs`), else None; always None for vector
        sessions. Whoever asks knows the kind it can read, and narrows the answer."""
        if self.autoreset_mode is not None or self.worker is None:
            return None
        with self._lock:
            return self._call("dm_specs")

    def extension(self, name: str, *args: object) -> Any:
        """An operation of the env beyond the message vocabulary, which the env's kind names and
        types (its ``extension`` method says what each returns), in the env's worker, under the
        session's lock; a crash or a hang breaks the session as in :meth:`handle`. Raises
        ``EnvwireError`` as the env's worker raises."""
        with self._lock:
            return self._call("extension", name, *args)

    def handle(self, request: m.Request) -> m.Reply:
        """Carry out one request.

        Raises:
            StateError: the session's state does not allow the request.
            InvalidActionError: a Step's action is not in the action space.
            EnvError: the env raised, crashed or hung (the latter two break the session until
                the next Reset, which makes a fresh env).
            UnsupportedError, InvalidArgumentError: as the request's docs say.
        """
        if type(request) is m.Step:
            return self.step(request)
        if type(request) is m.Reset:
            return self.reset(request)
        with self._lock:
            return self._observed(request)

    def step(self, request: m.Step, *, tell: bool = True) -> m.Reply:
        """:meth:`handle` for a Step, the request of nearly every call, carried out here in one
        call (state check, action check, env step, bookkeeping, the tap); one the session's
        state refuses as any request. With ``tell`` False the tap hears of a step that
        succeeded at :meth:`tell`, or before the session's next request: a front end that
        calls it once the reply is sent, where :attr:`due` says a step is kept (most taps
        keep most steps for a bulk), takes the tap's work off the client's wait.

        Raises:
            As :meth:`handle`.
        """
        self._lock.acquire()  # (acquire and release: half the with statement's cost)
        try:
            if (calls := self._calls).kept is not None:
                calls.tell_kept()
            if m.Step not in self._allowed:
                return self._observed(request)  # (refused, and told to the tap)
            tap, action, started = self.tap, request.action, _perf_counter()
            try:
                # A request object seen at the last step again (a codec's kept step of an
                # integer action, shared) holds an action checked then, if it cannot change
                if request is not self._checked:
                    self._check_action(action)
                    self._checked = request if type(action) in _SCALARS else None
                result = self._env_step(action, timeout=self._timeout)
            except EnvwireError as exc:
                if isinstance(exc, EnvCrashedError | EnvTimeoutError):
                    self.state = State.BROKEN
                elif isinstance(exc, EnvError) and self.state is not State.BROKEN:
                    self.state = State.ENDED
                if tap is not None:
                    tap.failed(request, exc, _perf_counter() - started)
                raise
            reply: m.StepReply | m.VectorStepReply
            if self.autoreset_mode is None:  # a one-env step's bookkeeping, inlined
                obs, reward, terminated, truncated, info = result
                self.step_count += 1
                self.total_steps += 1
                self.episode_return += reward
                if terminated or truncated:
                    self.state = State.ENDED
                reply = _new(m.StepReply)  # m.StepReply(obs, reward, terminated, truncated, info)
                _SET_OBS(reply, obs)
                _SET_REWARD(reply, reward)
                _SET_TERMINATED(reply, terminated)
                _SET_TRUNCATED(reply, truncated)
                _SET_INFO(reply, info)
                if tap is None:
                    return reply
                steady = tap is calls.tap and not (terminated or truncated)
                told: Callable[..., None] = calls.steady if steady else tap.handled
            else:
                reply = self._stepped_vector(result)
                if tap is None:
                    return reply
                told = calls.batch if tap is calls.tap else tap.handled
            if tell or told is calls.keep:  # (a keep for the tap's bulk: at once)
                told(request, reply, _perf_counter() - started)
            else:
                calls.kept = (told, request, reply, _perf_counter() - started)
            self.due = calls.kept is not None  # (kept, or a bulk full)
            return reply
        finally:
            self._lock.release()

    def tell(self, *, blocking: bool = True) -> None:
        """Tell the tap of the steps :meth:`step` kept for it, when due (see ``SessionTap``);
        with ``blocking`` False (a reader's), of every one, if no request holds the session."""
        calls = self._calls
        due = calls.kept is not None or (not blocking and calls.seconds)
        if due and self._lock.acquire(blocking):
            try:
                calls.tell_kept()
                self.due = False
            finally:
                self._lock.release()

    def _stepped_vector(self, result: Any) -> m.VectorStepReply:
        """A vector step's bookkeeping, and its reply."""
        obs, rewards, terminations, truncations, infos = result
        self.step_count += 1
        self.total_steps += self.num_envs
        # For a few copies Python's sum over tolist() beats np.add.reduce (a ufunc call of a few
        # microseconds; np.sum without its Python-level dispatch), paid on every vector step.
        if type(rewards) is np.ndarray and rewards.size <= _FEW:
            self.episode_return += sum(rewards.tolist())
        else:
            self.episode_return += float(np.add.reduce(rewards, axis=None))
        reply = _new(m.VectorStepReply)  # m.VectorStepReply(obs, rewards, ...), as step()'s
        _SET_OBSS(reply, obs)
        _SET_REWARDS(reply, rewards)
        _SET_TERMINATIONS(reply, terminations)
        _SET_TRUNCATIONS(reply, truncations)
        _SET_INFOS(reply, infos)
        return reply

    def reset(self, request: m.Reset) -> m.Reply:
        """:meth:`handle` for a Reset, in one call when it is a one-env session's whose env
        is not broken, with a valid seed; any other as any request.

        Raises:
            As :meth:`handle`.
        """
        self._lock.acquire()
        try:
            self._calls.tell_kept()  # (a step kept for the tap first)
            seed = request.seed
            if (
                m.Reset not in self._allowed
                or self.autoreset_mode is not None
                or self.state is State.BROKEN
                or not (seed is None or (type(seed) is int and seed >= 0))
            ):
                return self._observed(request)
            tap = self.tap
            started = _perf_counter()
            try:
                obs, info = self._call("reset", seed, request.options)
            except EnvwireError as exc:  # as _reset() and _observed() answer it
                if isinstance(exc, EnvError) and not isinstance(
                    exc, EnvCrashedError | EnvTimeoutError
                ):  # (those broke the session in _call())
                    self.state = State.ENDED
                if tap is not None:
                    tap.failed(request, exc, _perf_counter() - started)
                raise
            self._began(seed)
            reply = m.ResetReply(obs, info)
            if tap is not None:
                tap.handled(request, reply, _perf_counter() - started)
            return reply
        finally:
            self._lock.release()

    def _observed(self, request: m.Request) -> m.Reply:
        """:meth:`_handle`, told to the tap (the lock held)."""
        self._calls.tell_kept()  # (a step kept for the tap first)
        tap = self.tap
        if tap is None:
            return self._handle(request)
        started = _perf_counter()
        try:
            reply = self._handle(request)
        except EnvwireError as exc:
            tap.failed(request, exc, _perf_counter() - started)
            raise
        tap.handled(request, reply, _perf_counter() - started)
        return reply

    def _handle(self, request: m.Request) -> m.Reply:
        if type(request) not in self._allowed:
            where = f"session {self.id[:8]} ({self.env_id or 'no env'})"
            raise StateError(refusal(request, where, self.state, self.episode, self.step_count))
        match request:
            case m.Reset(seed=seed, options=options):
                return self._reset(seed, options)
            case m.GetSpace(which=which):
                space = self.action_space if which == m.SpaceKind.ACTION else self.observation_space
                return m.SpaceReply(space)
            case m.SampleAction():
                space = self.batch_action_space or self.action_space
                return m.SampleReply(space.sample())
            case m.Render() | m.Monitor() if self.autoreset_mode is not None:
                raise UnsupportedError(f"{type(request).__name__} is for one-env sessions")
            case m.Render():
                return m.RenderReply(self._call("render"))
            case m.Monitor():
                return self._monitor(request)
            case m.Close():
                self._close()
                return m.Ok()
        raise InvalidArgumentError(f"unknown request {request!r}")  # pragma: no cover

    def _reset(self, seed: object, options: dict[str, Any] | None) -> m.ResetReply:
        seed = checked_seed(seed, self.num_envs if self.autoreset_mode is not None else None)
        if self.state is State.BROKEN:
            assert self.worker is not None
            self.worker.close()
            self._start_worker()
            if self.monitor_directory is not None:
                self._call("monitor", self.monitor_directory, True, False, True)
        try:
            obs, info = self._call("reset", seed, options)
        except EnvError:
            if self.state is not State.BROKEN:
                self.state = State.ENDED
            raise
        self._began(seed)
        return m.ResetReply(obs, info)

    def _began(self, seed: int | Sequence[int | None] | None) -> None:
        """The bookkeeping of an episode begun by a reset with ``seed``."""
        self.state = State.RUNNING
        self.episode += 1
        self.step_count = 0
        self.episode_return = 0.0
        self.last_seed = seed

    def _monitor(self, request: m.Monitor) -> m.MonitorReply:
        if self.monitor_root is None:
            raise UnsupportedError("Monitor is disabled on this server (no monitor root)")
        directory = confine(self.monitor_root, request.directory)
        self._call("monitor", directory, request.resume, request.force, request.video)
        self.monitor_directory = directory
        return m.MonitorReply(directory)

    def _close(self) -> None:
        self._calls.tell_kept()  # (a step kept for the tap first)
        self.state = State.CLOSED
        if self.worker is not None:
            self.worker.close()
        self._untap()

    def _untap(self) -> None:
        tap, self.tap = self.tap, None
        if tap is not None:
            tap.closed()

    def frame(self) -> object:
        """The env's rendered frame now, or None when it cannot render.

        For observers recording frames: call it only from a tap (the session's lock is held).
        """
        if self.autoreset_mode is not None or self.worker is None:
            return None
        try:
            return self._call("render")
        except EnvwireError:
            return None

    def close(self) -> None:
        """Free the env now (idempotent; never raises)."""
        if self.state is State.CLOSED:
            return
        if self._lock.acquire(timeout=0.5):
            try:
                self._close()
            finally:
                self._lock.release()
        else:  # a call is stuck in the env: abandon it; the worker frees what it can
            self._close()


class SessionObserver(Protocol):
    """Watches sessions (metrics, logs, recording): the one place every front end's sessions
    are seen, whatever protocol opened them."""

    def opened(self, session: Session) -> SessionTap:
        """A session was made (its env is up); the tap it will report to."""
        ...

    def refused(self, front_end: str, env_id: str, error: EnvwireError) -> None:
        """Opening a session for ``env_id`` failed with ``error``."""
        ...
