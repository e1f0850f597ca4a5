"""OpenEnv's WebSocket messages: the client's, decoded into events (:data:`WsEvent`), and the
server's, written as JSON text and decoded on the client's side (:class:`ServerMessage`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from envwire import jsonio
from envwire.errors import EnvwireError, ProtocolError
from envwire.jsonio import dumps
from envwire.protocols.openenv.jsondata import validation_detail
from envwire.protocols.openenv.status import ErrorCode, code_of

__all__ = [
    "ServerMessage",
    "WsClose",
    "WsEvent",
    "WsInvalid",
    "WsMcp",
    "WsReset",
    "WsSample",
    "WsSpaces",
    "WsState",
    "WsStep",
    "error_data",
    "error_message",
    "message",
    "parse_client_message",
    "parse_server_message",
    "step_data",
    "step_result",
]


# ---------------------------------------------------------------------------------------------
# WebSocket messages, client to server


@dataclass(frozen=True, slots=True)
class WsReset:
    """Start an episode; ``data`` holds ``seed``, ``episode_id`` and env-specific keywords."""

    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WsStep:
    """Take a step; ``data`` is the action's fields."""

    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class WsState:
    """Ask for the episode's state."""


@dataclass(frozen=True, slots=True)
class WsClose:
    """End the session; the server closes the connection."""


@dataclass(frozen=True, slots=True)
class WsMcp:
    """A JSON-RPC 2.0 request for the env's MCP tools."""

    data: dict[str, Any]


@dataclass(frozen=True, slots=True)
class WsSpaces:
    """envwire extension: describe the env (its kind, spaces or schemas)."""


@dataclass(frozen=True, slots=True)
class WsSample:
    """envwire extension: an action sampled server-side from the action space."""


@dataclass(frozen=True, slots=True)
class WsInvalid:
    """A message that cannot be carried out; the reply is an error with ``code``.

    ``not_object`` marks JSON that is not an object, which openenv-core answers by ending the
    session (``SESSION_ERROR``) with ``ending``: its server looks the message's ``type`` up
    with ``.get`` and reports the ``AttributeError`` that raises.
    """

    code: ErrorCode
    message: str
    errors: list[dict[str, Any]] | None = None
    not_object: bool = False
    ending: str = ""


WsEvent = WsReset | WsStep | WsState | WsClose | WsMcp | WsSpaces | WsSample | WsInvalid


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _ResetMessage(_Strict):
    type: Literal["reset"]
    data: dict[str, Any] = Field(default_factory=dict)


class _DataMessage(_Strict):
    type: str
    data: dict[str, Any]


class _BareMessage(_Strict):
    type: str


_DATA_OPTIONAL: dict[str, type[WsReset]] = {"reset": WsReset}
_DATA_REQUIRED: dict[str, type[WsStep] | type[WsMcp]] = {"step": WsStep, "mcp": WsMcp}
_BARE: dict[str, WsEvent] = {
    "state": WsState(),
    "close": WsClose(),
    "spaces": WsSpaces(),
    "sample": WsSample(),
}


def parse_client_message(text: str | bytes) -> WsEvent:
    """Decode one client message; malformed ones become :class:`WsInvalid` (never raises).

    JSON nested deeper than :data:`envwire.jsonio.MAX_DEPTH` is ``INVALID_JSON``; a ``type``
    that is not a string is ``UNKNOWN_TYPE``, as openenv-core answers both.
    """
    try:
        obj = jsonio.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        return WsInvalid(ErrorCode.INVALID_JSON, f"Invalid JSON: {exc}")
    if not isinstance(obj, dict):
        return WsInvalid(
            ErrorCode.VALIDATION_ERROR,
            f"a message must be a JSON object, got {type(obj).__name__}",
            [{"type": "model_type", "loc": [], "msg": "Input should be an object", "input": obj}],
            not_object=True,
            ending=f"{type(obj).__name__!r} object has no attribute 'get'",
        )
    kind = obj.get("type", "")
    if not isinstance(kind, str):  # a list or an object cannot even be looked up
        return WsInvalid(ErrorCode.UNKNOWN_TYPE, f"Unknown message type: {kind}")
    # The common, well-formed case is decided without pydantic.
    if kind in _DATA_REQUIRED:
        data = obj.get("data")
        if isinstance(data, dict) and len(obj) == 2:
            return _DATA_REQUIRED[kind](data)
        return _invalid(_DataMessage, obj)
    if kind in _DATA_OPTIONAL:
        data = obj.get("data", {})
        if isinstance(data, dict) and obj.keys() <= {"type", "data"}:
            return WsReset(data)
        return _invalid(_ResetMessage, obj)
    if kind in _BARE:
        if len(obj) == 1:
            return _BARE[kind]
        return _invalid(_BareMessage, obj)
    return WsInvalid(ErrorCode.UNKNOWN_TYPE, f"Unknown message type: {kind}")


#: The C scanner of Python's JSON decoder, as ``json.loads`` runs it, without its two
#: whitespace matches and three Python frames.
_SCAN: Callable[[str, int], tuple[object, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def step_data(text: str) -> dict[str, Any] | None:
    """The data of a plainly well-formed step message (``{"type": "step", "data": {...}}``,
    nothing else, no whitespace around it, nested at most :data:`envwire.jsonio.MAX_DEPTH`
    levels), decoded in one pass; None for any other text, which
    :func:`parse_client_message` then decodes (and answers, when malformed)."""
    if text.count("{") + text.count("[") > jsonio.MAX_DEPTH:
        return None
    try:
        obj, end = _SCAN(text, 0)
    except (StopIteration, ValueError, RecursionError):
        return None
    if end != len(text) or type(obj) is not dict or len(obj) != 2 or obj.get("type") != "step":
        return None
    data = obj.get("data")
    return data if type(data) is dict else None


def _invalid(model: type[BaseModel], obj: dict[str, Any]) -> WsInvalid:
    try:
        model.model_validate(obj)
    except ValidationError as exc:
        # openenv-core's words; the errors list says what is wrong.
        return WsInvalid(ErrorCode.VALIDATION_ERROR, "Invalid message", validation_detail(exc))
    return WsInvalid(ErrorCode.VALIDATION_ERROR, "Invalid message")  # pragma: no cover


# ---------------------------------------------------------------------------------------------
# WebSocket messages, server to client


def message(kind: str, data: object) -> str:
    """``{"type": kind, "data": data}`` as JSON text."""
    return dumps({"type": kind, "data": data})


def step_result(
    observation: dict[str, Any], reward: float | int | bool | None, done: bool
) -> dict[str, Any]:
    """The payload of an observation message (and of HTTP ``/reset`` and ``/step``)."""
    return {"observation": observation, "reward": reward, "done": done}


def error_data(error: EnvwireError) -> dict[str, Any]:
    """The ``data`` of an error message for an envwire error (``envwire_code`` is ours)."""
    return {"message": str(error), "code": code_of(error), "envwire_code": error.code}


def error_message(code: ErrorCode | str, text: str, **extra: object) -> str:
    """An error message as JSON text."""
    return message("error", {"message": text, "code": str(code), **extra})


@dataclass(frozen=True, slots=True)
class ServerMessage:
    """A decoded server message (client side)."""

    type: str
    data: dict[str, Any]


def parse_server_message(text: str | bytes) -> ServerMessage:
    """Decode one server message.

    Raises:
        ProtocolError: not JSON, or not ``{"type": str, "data": object}``.
    """
    try:
        obj = jsonio.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"the server sent invalid JSON: {exc}") from None
    kind = obj.get("type") if isinstance(obj, dict) else None
    if not (isinstance(obj, dict) and isinstance(kind, str)):
        raise ProtocolError(f"the server sent a message without a type: {str(obj)[:120]}")
    data = obj.get("data", {})
    if not isinstance(data, dict):
        raise ProtocolError(f"the server sent {kind!r} with non-object data")
    return ServerMessage(kind, data)
