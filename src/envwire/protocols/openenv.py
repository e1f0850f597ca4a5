"""OpenEnv (as openenv-core 0.3.0 speaks it): message shapes, codes and validation.

Sans-IO: text and decoded JSON in, typed events and JSON-ready dicts out. The front end
(``envwire.frontends.openenv``) and our client (``envwire.client.openenv``) do the I/O.

WebSocket ``/ws``, one JSON object per text frame, replies in order::

    client  {"type": "reset", "data": {seed, episode_id, ...}}   -> observation
            {"type": "step", "data": {action fields}}            -> observation
            {"type": "state"}                                    -> state
            {"type": "close"}                                    -> (the server closes)
            {"type": "mcp", "data": {JSON-RPC 2.0 request}}      -> mcp
            {"type": "spaces"} / {"type": "sample"}              -> envwire extensions
    server  {"type": "observation", "data": {"observation": {...}, "reward": r, "done": b}}
            {"type": "state", "data": {"episode_id": ..., "step_count": n, ...}}
            {"type": "mcp", "data": {JSON-RPC 2.0 response}}
            {"type": "error", "data": {"message": ..., "code": ErrorCode, ...}}

HTTP bodies follow FastAPI's conventions, as openenv-core's server does: bad input is a 422
whose ``detail`` lists ``{"type", "loc", "msg", "input"}`` entries (``loc`` starts with
``"body"`` for the request body itself, and is the field path for an action's own fields).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Final, Literal, TypeVar, overload

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from envwire import jsonio, tensor
from envwire.errors import (
    CapacityError,
    EnvError,
    EnvwireError,
    ForbiddenError,
    ProtocolError,
    StateError,
    UnauthenticatedError,
    UnknownEnvError,
    UsageError,
    lookup,
)
from envwire.jsonio import JsonObject, JsonValue, dumps
from envwire.protocols.jsonrpc import RpcCode, RpcRequest, parse_rpc, rpc_error, rpc_result

__all__ = [
    "ERROR_CODES",
    "ERROR_TABLE",
    "BodyError",
    "ErrorCode",
    "ResetRequest",
    "RpcCode",
    "RpcRequest",
    "ServerMessage",
    "StepRequest",
    "WsClose",
    "WsEvent",
    "WsInvalid",
    "WsMcp",
    "WsReset",
    "WsSample",
    "WsSpaces",
    "WsState",
    "WsStep",
    "code_of",
    "dumps",
    "error_data",
    "error_message",
    "jsonable",
    "message",
    "parse_client_message",
    "parse_reset_body",
    "parse_rpc",
    "parse_server_message",
    "parse_step_body",
    "rpc_error",
    "rpc_result",
    "sanitized",
    "step_data",
    "step_result",
    "undeclared_body",
    "validation_detail",
]


class ErrorCode(StrEnum):
    """openenv-core's WebSocket error codes."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"


ERROR_CODES = frozenset(ErrorCode)

#: error class -> the OpenEnv error code that reports it (:func:`code_of`), built once (read
#: only); a front end whose errors must report differently from their parents builds its own
#: table from this one's rows and theirs, and passes it to :func:`code_of`.
ERROR_TABLE: Final[Mapping[type[EnvwireError], ErrorCode]] = MappingProxyType(
    {
        EnvwireError: ErrorCode.EXECUTION_ERROR,
        ProtocolError: ErrorCode.INVALID_JSON,
        UsageError: ErrorCode.VALIDATION_ERROR,
        UnknownEnvError: ErrorCode.FACTORY_ERROR,
        StateError: ErrorCode.SESSION_ERROR,
        CapacityError: ErrorCode.CAPACITY_REACHED,
        UnauthenticatedError: ErrorCode.SESSION_ERROR,
        ForbiddenError: ErrorCode.SESSION_ERROR,
        EnvError: ErrorCode.EXECUTION_ERROR,
    }
)


def code_of(
    error: EnvwireError | type[EnvwireError],
    table: Mapping[type[EnvwireError], ErrorCode] = ERROR_TABLE,
) -> ErrorCode:
    """The OpenEnv error code that reports ``error`` (an instance or a class): its class's row
    in ``table``, or its nearest ancestor's."""
    return lookup(table, error)


# ---------------------------------------------------------------------------------------------
# JSON


# A mapping given at the top (depth 0) becomes an object; deeper than 32 levels, repr() takes over.
@overload
def jsonable(
    value: Mapping[Any, object], arrays: Literal["list", "base64"] = ..., depth: Literal[0] = ...
) -> JsonObject: ...
@overload
def jsonable(
    value: object, arrays: Literal["list", "base64"] = ..., depth: int = ...
) -> JsonValue: ...
def jsonable(
    value: object, arrays: Literal["list", "base64"] = "base64", depth: int = 0
) -> JsonValue:
    """``value`` as JSON data: numpy scalars become numbers, arrays follow ``arrays`` (the
    ``__ndarray__`` form of :mod:`envwire.spacecodec` for "base64"), tuples become lists,
    anything else unknown becomes its ``repr``. Used for ``info`` dicts, whose types are free.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value
    if depth > 32:
        return repr(value)
    if isinstance(value, np.generic):
        if isinstance(value, np.void):
            return repr(value)
        scalar: JsonValue = value.item()  # a bool, int, float or str (a complex is no JSON)
        return scalar
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            return [jsonable(v, arrays, depth + 1) for v in value.tolist()]
        if arrays == "list":
            nested: JsonValue = value.tolist()  # nested lists of bools, ints and floats
            return nested
        try:
            packed = tensor.encode(value)
        except ProtocolError:
            nested = value.tolist()
            return nested
        return {
            "__ndarray__": base64.b64encode(packed.data).decode("ascii"),
            "dtype": packed.dtype.name,
            "shape": list(packed.shape),
        }
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, arrays, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v, arrays, depth + 1) for v in value]
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return repr(value)


def sanitized(errors: Sequence[object]) -> list[dict[str, Any]]:
    """Validation error entries made JSON-safe (``ctx`` may hold exception objects)."""
    out: list[dict[str, Any]] = json.loads(json.dumps(errors, default=str))
    return out


def validation_detail(
    exc: ValidationError, prefix: tuple[str | int, ...] = (), *, include_url: bool = True
) -> list[dict[str, Any]]:
    """A pydantic error as a FastAPI ``detail`` list, ``loc`` prefixed with ``prefix``."""
    errors = exc.errors(include_url=include_url)
    for error in errors:
        error["loc"] = (*prefix, *error["loc"])
    return sanitized(list(errors))


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


# ---------------------------------------------------------------------------------------------
# HTTP bodies


class ResetRequest(BaseModel):
    """The body of ``POST /reset``; extra keys are passed to envs that accept them."""

    model_config = ConfigDict(extra="allow")

    seed: int | None = Field(default=None, ge=0, description="Seed of the episode")
    episode_id: str | None = Field(default=None, max_length=255, description="Episode identifier")


class StepRequest(BaseModel):
    """The body of ``POST /step``."""

    model_config = ConfigDict(extra="allow")

    action: dict[str, Any] = Field(description="The action's fields (see /schema)")
    timeout_s: float | None = Field(default=None, gt=0, description="Seconds the step may take")
    request_id: str | None = Field(default=None, max_length=255, description="For tracing")


class BodyError(Exception):
    """A request body that fails validation; answer ``status`` (422: FastAPI's detail list;
    400 for a body that Python's JSON decoder cannot read, as FastAPI answers) with
    ``{"detail": detail}``."""

    def __init__(self, detail: list[dict[str, Any]] | str, status: int = 422) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status


_Model = TypeVar("_Model", bound=BaseModel)


def _body(raw: bytes, model: type[_Model], default: JsonObject | None) -> _Model:
    if not raw.strip():
        if default is not None:
            return model.model_validate(default)
        raise BodyError(
            [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]
        )
    try:
        obj = jsonio.loads(raw)
    except jsonio.TooDeepError:
        raise BodyError("There was an error parsing the body", 400) from None
    except json.JSONDecodeError as exc:
        raise BodyError(
            [
                {
                    "type": "json_invalid",
                    "loc": ["body", exc.pos],
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": exc.msg},
                }
            ]
        ) from None
    except UnicodeDecodeError:
        raise BodyError("There was an error parsing the body", 400) from None
    if not isinstance(obj, dict):
        raise _not_an_object(obj)
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise BodyError(validation_detail(exc, ("body",), include_url=False)) from None


def _not_an_object(value: object) -> BodyError:
    return BodyError(
        [
            {
                "type": "model_attributes_type",
                "loc": ["body"],
                "msg": "Input should be a valid dictionary or object to extract fields from",
                "input": value,
            }
        ]
    )


def undeclared_body(raw: bytes) -> BodyError:
    """FastAPI's answer to a ``/reset`` or ``/step`` body declared as anything but JSON (a
    form, ``text/plain``): it validates the body's text, which is no object (422). A body that
    is not UTF-8 cannot be shown: 400, as for such a JSON body (FastAPI fails with a 500)."""
    try:
        return _not_an_object(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return BodyError("There was an error parsing the body", 400)


def parse_reset_body(raw: bytes) -> ResetRequest:
    """Validate a ``/reset`` body (empty = defaults).

    Raises:
        BodyError: with FastAPI's 422 detail list.
    """
    return _body(raw, ResetRequest, {})


def parse_step_body(raw: bytes) -> StepRequest:
    """Validate a ``/step`` body.

    Raises:
        BodyError: with FastAPI's 422 detail list.
    """
    return _body(raw, StepRequest, None)
