"""One OpenEnv WebSocket session: ``/ws`` (OpenEnv's messages) or ``/mcp`` (JSON-RPC only).

A session serves its messages in its connection's own thread. A ``step`` message takes the
lean path: decoded in one pass (:func:`~envwire.protocols.openenv.step_data`), stepped by the
service, its reply written around the payload with no further JSON pass. Every other message,
and every step that is not plainly well formed (or is a typed env's tool action), takes the
general path (:func:`~envwire.protocols.openenv.parse_client_message`, then a ``match``). Both
answer the same bytes and the same errors, in OpenEnv's error channel.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from envwire.errors import CapacityError, EnvCapacityError, EnvError, EnvTimeoutError, EnvwireError
from envwire.frontends.openenv import mcp
from envwire.frontends.openenv.bindings import ActionRejected
from envwire.frontends.openenv.service import OpenEnvService, Record
from envwire.frontends.openenv.steps import step
from envwire.protocols.openenv import (
    ErrorCode,
    RpcCode,
    WsClose,
    WsInvalid,
    WsMcp,
    WsReset,
    WsSample,
    WsSpaces,
    WsState,
    WsStep,
    code_of,
    dumps,
    error_data,
    error_message,
    message,
    parse_client_message,
    parse_rpc,
    rpc_error,
    step_data,
)
from envwire.sockets.websocket import WebSocketChannel

__all__ = ["WsSession"]

log = logging.getLogger("envwire.openenv")

_OBSERVATION = '{"type":"observation","data":'

#: Seconds a refused WebSocket waits for the client's first message (see ``_refuse``).
_REFUSAL_WAIT = 5.0


def _nothing() -> None:
    """Nothing to do."""


def _kind(text: str) -> str:
    """The ``type`` of a message already known to be a JSON object with one."""
    kind = json.loads(text).get("type")
    return kind if isinstance(kind, str) else ""


class WsSession:
    """One OpenEnv WebSocket session (``/ws``, or ``/mcp``: JSON-RPC only)."""

    def __init__(
        self, service: OpenEnvService, env_id: str, endpoint: str, client: str, peer: str
    ) -> None:
        self.service = service
        self.env_id = env_id
        self.endpoint = endpoint
        self.client = client
        self.peer = peer
        self.channel: WebSocketChannel | None = None
        self.record: Record | None = None
        self.forsake: Callable[[], None] = _nothing

    def opened(self, channel: WebSocketChannel, forsake: Callable[[], None]) -> bool:
        """Open the env's session (a pool thread); False after telling the client why not."""
        self.channel = channel
        self.forsake = forsake
        try:
            self.record = self.service.open(self.env_id, "ws", peer=self.peer)
        except EnvwireError as exc:
            self._refuse(exc, self.endpoint)
            return False
        self.record.owner = self
        self.record.on_hang = self._ws_hung
        return True

    def message(self, text: str | bytes) -> bool:
        """Answer one message (a pool thread); False when the session is over."""
        if self.endpoint == "mcp":
            return self._mcp_message(text)
        return self._ws_message(text)

    def closed(self) -> None:
        """The WebSocket is over: free the session at once."""
        if self.record is not None:
            self.service.close(self.record)

    def abort(self) -> None:
        self.closed()

    def _refuse(self, exc: EnvwireError, endpoint: str) -> None:
        """Tell the client why no session was opened, then close.

        The error answers the client's first message (or goes unasked after a few seconds of
        silence), so that a client that sends before it reads still gets it: closing at once,
        as openenv-core does, makes such clients fail on a closed socket instead.
        """
        channel = self.channel
        assert channel is not None
        table = self.service.table
        limits: dict[str, Any] = {"active_sessions": len(table), "max_sessions": table.capacity}
        if isinstance(exc, EnvCapacityError):
            limits = {"active_sessions": exc.active, "max_sessions": exc.limit}
        compat = self.service.compat
        if isinstance(exc, CapacityError) and not compat.named_refusals:
            # openenv-core's words, which name no env (one env per server there)
            said = (
                f"Server at capacity: {limits['active_sessions']}/{limits['max_sessions']} "
                "sessions active. Cannot accept new connections."
            )
            exc = CapacityError(said)
        if endpoint == "mcp":
            data = limits if isinstance(exc, CapacityError) else None
            text = dumps(rpc_error(None, RpcCode.SERVER_ERROR, str(exc), data))
        elif isinstance(exc, CapacityError):
            text = self._error(ErrorCode.CAPACITY_REACHED, str(exc), exc.code, **limits)
        else:
            text = self._error(ErrorCode.FACTORY_ERROR, str(exc), exc.code)
        if compat.refusal_waits:
            channel.receive(wait=_REFUSAL_WAIT)
        channel.send_text(text)
        if not compat.named_refusals:
            channel.close(1000)  # as openenv-core's websocket.close() after the error
        else:
            channel.close(1013 if isinstance(exc, CapacityError) else 1011, type(exc).__name__)

    def _error(self, code: ErrorCode, text: str, envwire_code: str, **extra: object) -> str:
        """An error message; envwire's finer code rides along unless in strict mode."""
        if self.service.compat.extensions:
            extra["envwire_code"] = envwire_code
        return error_message(code, text, **extra)

    def _ending(self, text: str) -> None:
        """openenv-core's answer to a message it cannot read at all: ``SESSION_ERROR``, then
        the session ends."""
        channel = self.channel
        assert channel is not None
        channel.send_text(error_message(ErrorCode.SESSION_ERROR, text))

    def _ws_message(self, text: str | bytes) -> bool:
        """The lean path: a plainly well-formed ``step`` message (the step's data is an object,
        and no tool action of a typed env) is decoded in one pass and answered around the
        payload; anything else, the general path. Both answer with the same bytes."""
        if type(text) is str:
            data = step_data(text)
            record = self.record
            assert record is not None and self.channel is not None
            if data is not None and ("type" not in data or record.binding.native):
                try:  # (the tap is told once the reply is sent)
                    reply = _OBSERVATION + self.service.step(record, data, tell=False) + "}"
                except EnvwireError as exc:
                    reply = self._failed(exc)
                try:
                    return self.channel.send_text(reply)
                finally:
                    if record.session.due:
                        record.session.tell()
        return self._ws_general(text)

    def _ws_general(self, text: str | bytes) -> bool:
        """Any message: decoded into an event, matched, answered."""
        channel, record, service = self.channel, self.record, self.service
        assert channel is not None and record is not None
        compat = service.compat
        if isinstance(text, bytes):
            self._ending("binary messages are not accepted: send JSON as text")
            return False
        event = parse_client_message(text)
        if isinstance(event, WsInvalid) and event.not_object and not compat.malformed_continues:
            self._ending(event.ending)
            return False
        if isinstance(event, WsSpaces | WsSample) and not compat.extensions:
            event = WsInvalid(ErrorCode.UNKNOWN_TYPE, f"Unknown message type: {_kind(text)}")
        try:
            match event:
                case WsStep(data=data):
                    reply = _OBSERVATION + step(service, record, data) + "}"
                case WsReset(data=data):
                    payload = service.reset(record, data, ("data",), validate=compat.check_ws_seed)
                    reply = _OBSERVATION + payload + "}"
                case WsState():
                    reply = message("state", service.state(record))
                case WsClose():
                    return False
                case WsMcp(data=data):
                    rpc = parse_rpc(data, decoded=True)
                    response = rpc
                    if not isinstance(rpc, dict):
                        response = mcp.answer(service, rpc, record.env_id, record, self.client)
                    reply = message("mcp", response)
                case WsSpaces():
                    reply = message("spaces", record.binding.describe())
                case WsSample():
                    reply = message("sample", service.sample(record))
                case WsInvalid(code=code, message=text_, errors=errors):
                    extra = {} if errors is None else {"errors": errors}
                    reply = error_message(code, text_, **extra)
        except EnvwireError as exc:
            reply = self._failed(exc)
        return channel.send_text(reply)

    def _failed(self, exc: EnvwireError) -> str:
        """The error message that answers a request that raised ``exc``."""
        if isinstance(exc, ActionRejected):
            return self._error(ErrorCode.VALIDATION_ERROR, str(exc), exc.code, errors=exc.detail)
        record = self.record
        assert record is not None
        if not exc.remote:
            log.warning("session %s (%s): %s", record.session.id[:8], record.env_id, exc)
        text = str(exc)
        if isinstance(exc, EnvError) and not self.service.compat.named_env_errors:
            text = exc.env_message  # openenv-core reports the exception's own text
        return self._error(code_of(exc), text, exc.code)

    def _mcp_message(self, text: str | bytes) -> bool:
        channel, record, service = self.channel, self.record, self.service
        assert channel is not None and record is not None
        if isinstance(text, bytes):  # openenv-core ends the session with a server error
            error = rpc_error(None, RpcCode.SERVER_ERROR, "binary messages are not accepted")
            channel.send_text(dumps(error))
            return False
        rpc = parse_rpc(text)
        response = rpc
        if not isinstance(rpc, dict):
            response = mcp.answer(service, rpc, self.env_id, record, self.client)
        return channel.send_text(dumps(response))

    def _ws_hung(self, error: EnvTimeoutError) -> None:
        """Watchdog thread: the env hung in this connection's thread; report it and hang up
        (the stuck thread's place in the pool goes to another)."""
        self.forsake()
        log.warning("%s: %s", self.peer, error)
        channel = self.channel
        if channel is not None:
            channel.send_text(message("error", error_data(error)))
            channel.close(1011, "env hung", linger=0.2)
        if self.record is not None:
            self.service.close(self.record)

    def reap(self, idle: float) -> None:
        """Reaper thread: the session was unused for ``idle`` seconds; say so and close."""
        channel = self.channel
        if channel is None:
            return
        channel.send_text(
            error_message(
                ErrorCode.SESSION_ERROR,
                f"session closed after {idle:g} s without requests",
                envwire_code="idle_timeout",
            )
        )
        channel.close(1001, "idle timeout", linger=0.2)
