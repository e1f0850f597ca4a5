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
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from envwire import messages as m
from envwire._version import __version__
from envwire.errors import (
    CapacityError,
    EnvTimeoutError,
    EnvwireError,
    InvalidArgumentError,
    StateError,
    UnknownEnvError,
)
from envwire.protocols.openenv import (
    RpcCode,
    RpcRequest,
    dumps,
    jsonable,
    rpc_error,
    rpc_result,
)
from envwire.server.openenv.bindings import (
    Arrays,
    Binding,
    make_binding,
    reset_arguments,
)
from envwire.session import Session

if TYPE_CHECKING:
    from envwire.server.app import Server

__all__ = ["FRONT_END", "OpenEnvService", "Record"]

#: The ``front_end`` label of the sessions this front end opens.
FRONT_END = "openenv"

log = logging.getLogger("envwire.openenv")

T = TypeVar("T")
Kind = Literal["ws", "http", "mcp"]
Hang = Callable[[EnvTimeoutError], None] | None

#: How long a request waits for a session that another request is using.
_BUSY_GRACE = 5.0


class Record:
    """One OpenEnv session (see the module docstring)."""

    def __init__(self, session: Session, binding: Binding, kind: Kind) -> None:
        self.session = session
        self.binding = binding
        self.kind = kind
        self.token: str | None = None
        self.episode_id: str | None = None
        self.lock = threading.Lock()
        self.closed = False
        self.last_used = time.monotonic()
        #: Called (from the watchdog thread) when an inline env call hangs; set by the
        #: transport that is making the call.
        self.on_hang: Callable[[EnvTimeoutError], None] | None = None
        #: The WebSocket connection holding this record, for the reaper.
        self.owner: Any = None
        #: Frees the record (set by the service that opened it).
        self.closer: Callable[[Record], None] | None = None
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

    Server options read (``ServerConfig.options``): ``openenv_arrays`` ("base64" or "list").
    """

    def __init__(self, server: Server) -> None:
        self.server = server
        self.table = server.sessions
        self.catalog = server.catalog
        arrays = server.config.options.get("openenv_arrays", "base64")
        if arrays not in ("base64", "list"):
            raise InvalidArgumentError(f"openenv_arrays must be 'base64' or 'list', got {arrays!r}")
        self.arrays: Arrays = arrays
        self.default_env = next(iter(self.catalog), "")
        self._bindings: dict[str, Binding] = {}
        self._tokens: dict[str, Record] = {}
        self._records: set[Record] = set()
        self._lock = threading.Lock()

    # -- records --------------------------------------------------------------------------

    def open(self, env_id: str, kind: Kind, peer: str = "") -> Record:
        """A new record for ``env_id`` (HTTP and MCP records get a token); ``peer`` is the
        client's address.

        Raises:
            UnknownEnvError, CapacityError, EnvwireError: as the session table raises.
        """
        session = self.table.open(env_id, front_end=FRONT_END, peer=peer)
        try:
            binding = self._binding_from(session)
        except BaseException:
            self.table.close(session)
            raise
        record = Record(session, binding, kind)
        record.closer = self.close
        with self._lock:
            self._records.add(record)
            if kind != "ws":
                record.token = secrets.token_urlsafe(24)
                self._tokens[record.token] = record
        return record

    def find(self, token: str) -> Record | None:
        """The live record with this token, if any."""
        return self._tokens.get(token)

    def close(self, record: Record | None) -> None:
        """Free the record and its session (idempotent, never raises)."""
        if record is None:
            return
        with self._lock:
            self._records.discard(record)
            if record.token is not None:
                self._tokens.pop(record.token, None)
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
            binding = make_binding(
                env_id, session.action_space, session.observation_space, self.arrays
            )
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
        session = self.table.open(env_id, front_end=FRONT_END)
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
        assert record.session.spec is not None
        if not record.lock.acquire(timeout=record.session.spec.step_timeout + _BUSY_GRACE):
            raise StateError(
                f"session of {record.env_id} is busy with another request (or its env hung)"
            )
        try:
            if record.closed:
                raise StateError(f"the session of {record.env_id} was closed")
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
    ) -> str:
        """Start an episode; ``data`` holds seed, episode_id and env keywords. Returns the
        observation payload as JSON text."""
        request, episode_id = record.binding.reset(reset_arguments(data, prefix))

        def work() -> str:
            reply = record.session.handle(request)
            assert isinstance(reply, m.ResetReply)
            record.episode_id = episode_id
            return record.binding.result(reply)

        return self._call(record, work, on_hang)

    def step(
        self,
        record: Record,
        data: dict[str, Any],
        prefix: tuple[str, ...] = (),
        *,
        on_hang: Hang = None,
    ) -> str:
        """Take a step with the action ``data`` describes; the payload as JSON text."""
        action = record.binding.action(data, prefix)

        def work() -> str:
            reply = record.session.handle(m.Step(action))
            assert isinstance(reply, m.StepReply)
            return record.binding.result(reply)

        return self._call(record, work, on_hang)

    def state(self, record: Record, *, on_hang: Hang = None) -> dict[str, Any]:
        """The episode's state: a typed env's own, else episode id and step count."""

        def work() -> dict[str, Any]:
            if record.binding.kind == "typed":
                state = _extension(record.session, "state")
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

    # -- MCP ------------------------------------------------------------------------------

    def mcp(self, request: RpcRequest, env_id: str, record: Record | None = None) -> dict[str, Any]:
        """Answer one JSON-RPC request (``tools/list``, ``tools/call``, OpenEnv's session
        methods, ``initialize``, ``ping``). ``record`` is the caller's own session, if any."""
        rid = request.id
        params = request.params
        try:
            match request.method:
                case "initialize":
                    version = params.get("protocolVersion", "2025-06-18")
                    return rpc_result(
                        rid,
                        {
                            "protocolVersion": version,
                            "capabilities": {"tools": {"listChanged": False}},
                            "serverInfo": {"name": "envwire", "version": __version__},
                        },
                    )
                case "ping":
                    return rpc_result(rid, {})
                case "tools/list":
                    return rpc_result(rid, {"tools": self.binding(env_id).tools()})
                case "tools/call":
                    return self._call_tool(request, env_id, record)
                case "openenv/session/create":
                    if record is not None:
                        return rpc_result(rid, {"session_id": record.token or record.session.id})
                    created = self.open(env_id, "mcp")
                    return rpc_result(rid, {"session_id": created.token})
                case "openenv/session/close":
                    token = params.get("session_id")
                    if not isinstance(token, str) or not token:
                        return rpc_error(
                            rid, RpcCode.INVALID_PARAMS, "Invalid params - 'session_id' is required"
                        )
                    target = self.find(token)
                    if target is None:
                        return rpc_error(
                            rid, RpcCode.INVALID_PARAMS, f"Unknown session_id: {token}"
                        )
                    self.close(target)
                    return rpc_result(rid, {"session_id": token, "closed": True})
            return rpc_error(rid, RpcCode.METHOD_NOT_FOUND, f"Method not found: {request.method}")
        except CapacityError as exc:
            data = {"active_sessions": len(self.table), "max_sessions": self.table.capacity}
            return rpc_error(rid, RpcCode.SERVER_ERROR, str(exc), data)
        except UnknownEnvError as exc:
            return rpc_error(rid, RpcCode.SERVER_ERROR, str(exc), {"env_id": env_id})
        except InvalidArgumentError as exc:
            return rpc_error(rid, RpcCode.INVALID_PARAMS, str(exc))
        except EnvwireError as exc:
            return rpc_error(rid, RpcCode.INTERNAL_ERROR, str(exc), {"code": exc.code})

    def _call_tool(self, request: RpcRequest, env_id: str, record: Record | None) -> dict[str, Any]:
        rid, params = request.id, request.params
        name, arguments = params.get("name"), params.get("arguments", {})
        if not isinstance(name, str) or not name:
            return rpc_error(rid, RpcCode.INVALID_PARAMS, "Missing 'name' in params")
        if not isinstance(arguments, dict):
            return rpc_error(rid, RpcCode.INVALID_PARAMS, "'arguments' must be an object")
        token = params.get("session_id")
        temporary = False
        if isinstance(token, str) and token:
            record = self.find(token)
            if record is None:
                return rpc_error(rid, RpcCode.INVALID_PARAMS, f"Unknown session_id: {token}")
        if record is None:
            binding = self.binding(env_id)
            if not any(t["name"] == name for t in binding.tools()):
                known = ", ".join(t["name"] for t in binding.tools()) or "none"
                return rpc_error(
                    rid, RpcCode.INVALID_PARAMS, f"Tool not found: {name} (tools: {known})"
                )
            record, temporary = self.open(env_id, "mcp"), True
        target = record
        try:
            value = self._call(
                target, lambda: _extension(target.session, "call_tool", name, arguments)
            )
        finally:
            if temporary:
                self.close(target)
        value = jsonable(value, self.arrays)
        text = value if isinstance(value, str) else dumps(value)
        result: dict[str, Any] = {
            "content": [{"type": "text", "text": text}],
            "isError": False,
            "data": value,
        }
        if isinstance(value, dict):
            result["structuredContent"] = value
        return rpc_result(rid, result)

    # -- reaping --------------------------------------------------------------------------

    def idle(self, max_idle: float) -> Iterator[Record]:
        """Records unused for more than ``max_idle`` seconds."""
        cutoff = time.monotonic() - max_idle
        for record in self.records():
            if record.last_used < cutoff and not record.lock.locked():
                yield record


def _extension(session: Session, name: str, *args: Any) -> Any:
    """A typed-env operation (state, tools) on the session's env, in its worker."""
    method = getattr(session, "extension", None)
    if callable(method):  # a Session that offers it under its own lock
        return method(name, *args)
    assert session.spec is not None and session.worker is not None
    return session.worker.call("extension", name, *args, timeout=session.spec.step_timeout)
