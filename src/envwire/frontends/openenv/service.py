"""The OpenEnv service: sessions as OpenEnv sees them, independent of HTTP or WebSocket.

A :class:`Record` is one OpenEnv session: a WebSocket connection's, or one that HTTP requests
(or MCP clients) address with a session token. Every record wraps one
:class:`~envwire.session.Session` from the server's shared table. Calls into a record are
serialised by the record's lock and run in the calling thread, which is a connection thread,
never an event loop.

Every method raises :class:`~envwire.errors.EnvwireError` subclasses (``ActionRejected`` for
invalid input); transports turn them into their own error shapes.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Literal, Protocol, TypeVar

import gymnasium

from envwire import messages as m
from envwire.errors import EnvCapacityError, EnvTimeoutError, StateError
from envwire.frontends.openenv.bindings import (
    Arrays,
    Binding,
    GymBinding,
    TypedBinding,
    reset_arguments,
)
from envwire.frontends.openenv.compat import Compat
from envwire.frontends.openenv.corebinding import OpenEnvBinding
from envwire.kinds.openenv_core.gymenv import OpenEnvSpace
from envwire.protocols.openenv import ResetRequest, jsonable
from envwire.registry import Catalog
from envwire.server.security.addresses import AddressLimiter
from envwire.server.sessions import SessionTable
from envwire.session import Session
from envwire.settings import OpenEnvSettings
from envwire.spacecodec.modelspace import ModelSpace

__all__ = ["FRONT_END", "Hang", "OpenEnvService", "Owner", "Record"]

#: The ``front_end`` label of the sessions this front end opens.
FRONT_END = "openenv"

log = logging.getLogger("envwire.openenv")

T = TypeVar("T")
Kind = Literal["ws", "http", "mcp"]
Hang = Callable[[EnvTimeoutError], None] | None

#: How long a request waits for a session that another request is using.
_BUSY_GRACE = 5.0


class Owner(Protocol):
    """The WebSocket connection that holds a record."""

    def reap(self, idle: float) -> None:
        """The record went unused for ``idle`` seconds: close the connection, saying why."""
        ...


class Record:
    """One OpenEnv session (see the module docstring)."""

    def __init__(self, session: Session, binding: Binding, kind: Kind, client: str = "") -> None:
        self.session = session
        self.binding = binding
        self.kind = kind
        #: The address that opened it, and whether the record holds one of its HTTP sessions.
        self.client = client
        self.counted = False
        self.token: str | None = None
        self.episode_id: str | None = None
        self.lock = threading.Lock()
        self.closed = False
        self.last_used = time.monotonic()
        #: Called (from the watchdog thread) when an inline env call hangs; set by the
        #: transport that is making the call.
        self.on_hang: Callable[[EnvTimeoutError], None] | None = None
        #: The WebSocket connection holding this record, for the reaper.
        self.owner: Owner | None = None
        #: Frees the record (set by the service that opened it).
        self.closer: Callable[[Record], None] | None = None
        #: How long a call waits for the record's lock: the step timeout and a grace, or -1
        #: (no deadline: OpenEnv's own envs), so the next call waits as long as this one takes.
        step_timeout = None if session.spec is None else session.spec.resolved_step_timeout
        self.busy = -1.0 if step_timeout is None else step_timeout + _BUSY_GRACE
        session.set_on_hang(self._hung)

    @property
    def env_id(self) -> str:
        return self.session.env_id

    def _hung(self, error: EnvTimeoutError) -> None:
        """Watchdog thread: tell whoever is waiting on the call, then free the session (the
        stuck thread is abandoned)."""
        callback = self.on_hang
        if callback is not None:
            callback(error)
        if self.closer is not None:
            self.closer(self)


class OpenEnvService:
    """OpenEnv operations over the server's session table.

    Args:
        settings: ``openenv_arrays`` ("base64" or "list"), ``openenv_compat`` ("default" or
            "strict": :class:`~.compat.Compat`), ``http_max_sessions`` and
            ``http_sessions_per_address`` (HTTP and MCP sessions at once, in all and opened
            from one client address; WebSocket sessions live with their connection, which the
            HTTP front end bounds, and transient records serve one request).
        sessions: the server's session table; ``catalog`` its envs.
        token_prefix: what every session token begins with (a worker's mark, where the
            server has several: :mod:`envwire.server.relay`).
        http_sessions: what counts the HTTP and MCP sessions (where the server has several
            workers, one that counts every worker's: ``SharedAddressLimiter``); by default
            this service's own, from the settings.
    """

    def __init__(
        self,
        settings: OpenEnvSettings,
        sessions: SessionTable,
        catalog: Catalog,
        token_prefix: str = "",
        http_sessions: AddressLimiter | None = None,
    ) -> None:
        self.table = sessions
        self.token_prefix = token_prefix
        self.catalog = catalog
        self.arrays: Arrays = "list" if settings.openenv_arrays == "list" else "base64"
        self.compat = Compat.of(settings.openenv_compat)
        self.default_env = next(iter(self.catalog), "")
        self._bindings: dict[str, Binding] = {}
        self._tokens: dict[str, Record] = {}
        self._records: set[Record] = set()
        self._lock = threading.Lock()
        self.http_sessions = http_sessions or AddressLimiter(
            settings.http_max_sessions, settings.http_sessions_per_address, "http sessions"
        )

    # -- records --------------------------------------------------------------------------

    def open(self, env_id: str, kind: Kind, peer: str = "", *, transient: bool = False) -> Record:
        """A new record for ``env_id`` (HTTP and MCP records get a token); ``peer`` is the
        client's address, whose share of HTTP sessions a lasting HTTP or MCP record counts
        against. A ``transient`` record serves one request and is not held to the
        env's own session limit.

        When the env holds as many sessions as it may, the least recently used idle HTTP
        session of that env is closed to make room: an HTTP session outlives its requests,
        and would otherwise keep a slot that openenv-core's stateless HTTP never holds.

        Raises:
            CapacityError: too many HTTP sessions, in all or from ``peer``.
            UnknownEnvError, CapacityError, EnvwireError: as the session table raises.
        """
        counted = kind != "ws" and not transient
        if counted:
            self.http_sessions.acquire(peer)
        try:
            session = self._open_session(env_id, peer, transient)
            try:
                binding = self._binding_from(session)
            except BaseException:
                self.table.close(session)
                raise
        except BaseException:
            if counted:
                self.http_sessions.release(peer)
            raise
        record = Record(session, binding, kind, peer)
        record.counted = counted
        record.closer = self.close
        with self._lock:
            self._records.add(record)
            if kind != "ws":
                record.token = self.token_prefix + secrets.token_urlsafe(24)
                self._tokens[record.token] = record
        return record

    def _open_session(self, env_id: str, peer: str, transient: bool) -> Session:
        limit = None if self.compat.many_sessions else 1
        for attempt in range(2):
            try:
                return self.table.open(
                    env_id, limit=limit, transient=transient, front_end=FRONT_END, peer=peer
                )
            except EnvCapacityError:
                if attempt or not self._evict_http(env_id):
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _evict_http(self, env_id: str) -> bool:
        """Close the least recently used idle HTTP session of ``env_id``; False if none."""
        idle = [
            r
            for r in self.records()
            if r.kind == "http" and r.env_id == env_id and not r.lock.locked()
        ]
        if not idle:
            return False
        oldest = min(idle, key=lambda r: r.last_used)
        log.info("closing the idle HTTP session of %s to make room for a new one", env_id)
        self.close(oldest)
        return True

    def find(self, token: str) -> Record | None:
        """The live record with this token, if any."""
        return self._tokens.get(token)

    def close(self, record: Record | None) -> None:
        """Free the record and its session (idempotent, never raises)."""
        if record is None:
            return
        with self._lock:
            if record not in self._records:
                return
            self._records.discard(record)
            if record.token is not None:
                self._tokens.pop(record.token, None)
        if record.counted:
            self.http_sessions.release(record.client)
        record.closed = True
        record.on_hang = None
        self.table.close(record.session)

    def records(self) -> list[Record]:
        """A snapshot of the live records."""
        with self._lock:
            return list(self._records)

    def close_all(self) -> None:
        """Free every record (front end shutdown)."""
        for record in self.records():
            self.close(record)

    def counts(self) -> dict[str, int]:
        """How many records of each kind are live."""
        out = {"ws": 0, "http": 0, "mcp": 0}
        for record in self.records():
            out[record.kind] += 1
        return out

    # -- bindings -------------------------------------------------------------------------

    def _binding_from(self, session: Session) -> Binding:
        env_id = session.env_id
        binding = self._bindings.get(env_id)
        if binding is None:
            binding = _binding(env_id, session.action_space, session.observation_space, self.arrays)
            self._bindings[env_id] = binding
        return binding

    def binding(self, env_id: str) -> Binding:
        """The binding of a served env; the first request for an env opens (and closes) a
        session to learn its spaces.

        Raises:
            UnknownEnvError: not served here. CapacityError, EnvwireError: the probe failed.
        """
        binding = self._bindings.get(env_id)
        if binding is not None:
            return binding
        self.catalog.lookup(env_id)
        session = self.table.open(env_id, front_end=FRONT_END, transient=True)
        try:
            return self._binding_from(session)
        finally:
            self.table.close(session)

    def served(self, env_id: str) -> bool:
        """Whether ``env_id`` is in the catalog."""
        return env_id in self.catalog

    def lookup(self, env_id: str) -> None:
        """Raise UnknownEnvError (with did-you-mean) unless ``env_id`` is served."""
        if env_id not in self.catalog:
            self.catalog.lookup(env_id)

    # -- operations -----------------------------------------------------------------------

    def _call(self, record: Record, work: Callable[[], T], on_hang: Hang = None) -> T:
        if not record.lock.acquire(timeout=record.busy):
            raise _busy(record)
        try:
            if record.closed:
                raise _gone(record)
            if on_hang is not None:
                record.on_hang = on_hang
            record.last_used = time.monotonic()
            return work()
        finally:
            record.last_used = time.monotonic()
            record.lock.release()

    def reset(
        self,
        record: Record,
        data: dict[str, Any],
        prefix: tuple[str, ...] = (),
        *,
        on_hang: Hang = None,
        validate: bool = True,
        http: bool = False,
    ) -> str:
        """Start an episode; ``data`` holds seed, episode_id and env keywords (checked unless
        not ``validate``: openenv-core passes WebSocket reset data to the env as it comes).
        Returns the observation payload as JSON text."""
        args = reset_arguments(data, prefix) if validate else ResetRequest.model_construct(**data)
        request, episode_id = record.binding.reset(args)

        def work() -> str:
            reply = record.session.handle(request)
            assert isinstance(reply, m.ResetReply)
            record.episode_id = episode_id
            return record.binding.result(reply, http)

        return self._call(record, work, on_hang)

    def step(
        self,
        record: Record,
        data: dict[str, Any],
        prefix: tuple[str, ...] = (),
        *,
        on_hang: Hang = None,
        kwargs: dict[str, Any] | None = None,
        http: bool = False,
        tell: bool = True,
    ) -> str:
        """Take a step with the action ``data`` describes (``kwargs``: the HTTP body's other
        keys); the payload as JSON text. (openenv-core's MCP actions, which envwire's typed
        envs with tools also take, are :func:`.steps.step`'s.) With ``tell`` False the tap
        hears of it at the session's ``tell``, once the caller has sent the payload.

        The hot path of every transport: :meth:`_call`'s work written out, with no closure.
        """
        binding = record.binding
        action = binding.action(data, prefix)
        request = m.Step(binding.step_call(action, kwargs) if kwargs else action)
        if not record.lock.acquire(timeout=record.busy):
            raise _busy(record)
        try:
            if record.closed:
                raise _gone(record)
            if on_hang is not None:
                record.on_hang = on_hang
            record.last_used = time.monotonic()
            reply = record.session.step(request, tell=tell)
            assert isinstance(reply, m.StepReply)
            return binding.result(reply, http)
        finally:
            record.last_used = time.monotonic()
            record.lock.release()

    def state(self, record: Record, *, on_hang: Hang = None) -> dict[str, Any]:
        """The episode's state: a typed env's own, else episode id and step count."""

        def work() -> dict[str, Any]:
            if record.binding.native:  # the env's own state, as JSON data
                return record.session.extension("state")  # type: ignore[no-any-return]
            if record.binding.kind == "typed":
                state = record.session.extension("state")
                return jsonable(state.model_dump(mode="json"))  # type: ignore[no-any-return]
            session = record.session
            return {"episode_id": record.episode_id, "step_count": session.step_count}

        return self._call(record, work, on_hang)

    def sample(self, record: Record, *, on_hang: Hang = None) -> dict[str, Any]:
        """An action sampled server-side (envwire extension)."""

        def work() -> dict[str, Any]:
            reply = record.session.handle(m.SampleAction())
            assert isinstance(reply, m.SampleReply)
            return {"action": record.binding.sample(reply.action)}

        return self._call(record, work, on_hang)

    def extension(self, record: Record, name: str, *args: object) -> Any:
        """An out-of-band operation (``state``, ``call_tool``, ``mcp``) on the record's env,
        under the record's lock: what the env's operation returned, whose type depends on
        ``name`` (:meth:`Session.extension <envwire.session.Session.extension>`)."""
        return self._call(record, lambda: record.session.extension(name, *args))

    # -- reaping --------------------------------------------------------------------------

    def idle(self, limit_of: Callable[[Record], float | None]) -> Iterator[tuple[Record, float]]:
        """Records unused for longer than their limit, with it: ``limit_of(record)`` (None: no
        limit), or their env's own ``session_timeout`` (an OpenEnv app's) when shorter."""
        now = time.monotonic()
        for record in self.records():
            limit = limit_of(record)
            spec = record.session.spec
            own = spec.session_timeout if spec is not None else None
            if own is not None and (limit is None or own < limit):
                limit = own
            if limit is not None and record.last_used < now - limit and not record.lock.locked():
                yield record, limit

    def reap(self, record: Record, idle: float) -> None:
        """Close a session unused for ``idle`` seconds (a WebSocket's connection says why)."""
        if record.kind == "ws":
            if record.owner is not None:
                record.owner.reap(idle)
            return
        log.info("closing %s session of %s, idle for %g s", record.kind, record.env_id, idle)
        self.close(record)


def _busy(record: Record) -> StateError:
    return StateError(f"session of {record.env_id} is busy with another request (or its env hung)")


def _gone(record: Record) -> StateError:
    return StateError(f"the session of {record.env_id} was closed")


def _binding(
    env_id: str,
    action_space: gymnasium.Space[Any],
    observation_space: gymnasium.Space[Any],
    arrays: Arrays,
) -> Binding:
    """The binding for an env with these spaces."""
    if isinstance(action_space, OpenEnvSpace) and isinstance(observation_space, OpenEnvSpace):
        return OpenEnvBinding(env_id, action_space, observation_space)
    if isinstance(action_space, ModelSpace) and isinstance(observation_space, ModelSpace):
        return TypedBinding(env_id, action_space, observation_space)
    return GymBinding(env_id, action_space, observation_space, arrays)
