"""The act protocol, sans-IO: request bodies in, typed requests out; typed replies in, bytes out.

Nothing here touches a socket, a framework or the database. Two wire versions share one typed
vocabulary:

- v0 (no ``protocol_version``, or 0): actions name their request as ``"run": "<id>#<n>"``; the
  reply has ``action-requests`` (same run strings), ``errors`` and ``messages`` (strings);
  ``single_request: true`` asks for one request per reply.
- v1 (``"protocol_version": 1``): actions carry ``run`` and ``act_no``; optional
  ``parallel_runs``, ``to_abandon`` and ``client``; the reply has ``action_requests``,
  ``active_runs``, ``finished_runs`` and typed ``messages``.

Both parse into :class:`ActRequest`; a :class:`ActReply` encodes into either. Malformed bodies
raise the errors defined here (``ProtocolError`` subclasses), each naming the field at fault.
Percepts and outcomes travel inside replies as JSON text (:class:`RawJSON`), so a percept stored
in the database is sent without being decoded and encoded again.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Final, Literal, TypeVar

from envwire import jsonio
from envwire.errors import EnvwireError, ProtocolError
from envwire.jsonio import JsonValue
from envwire.protocols.http.status import STATUS, StatusTable, status_of, statuses

__all__ = [
    "ACT_STATUS",
    "SUPPORTED_VERSIONS",
    "ActReply",
    "ActRequest",
    "ActionIn",
    "ActionRequest",
    "BodyTooLargeError",
    "MalformedRequestError",
    "Message",
    "MessageType",
    "NotJSONError",
    "RawJSON",
    "UnsupportedVersionError",
    "decode_body",
    "dumps",
    "encode_reply",
    "error_body",
    "error_reply",
    "lax_bool",
    "lax_int",
    "parse_act_request",
]

SUPPORTED_VERSIONS = (0, 1)
MessageType = Literal["info", "warning", "error"]
_V0_RUN = re.compile(r"^([0-9]+)#([0-9]+)$")  # the original's pattern
_JSON_TYPES = ("application/json",)
_T = TypeVar("_T")


class MalformedRequestError(ProtocolError):
    """A request field is missing, of the wrong type or out of range.

    Attributes:
        field: the field's path in the body, e.g. ``actions[2].act_no``.
    """

    code = "malformed_request"

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class UnsupportedVersionError(ProtocolError):
    """``protocol_version`` names a version this server does not speak."""

    code = "unsupported_version"


class BodyTooLargeError(ProtocolError):
    """The request body is larger than the server accepts."""

    code = "body_too_large"


class NotJSONError(ProtocolError):
    """The request body is not declared as JSON (``Content-Type: application/json``)."""

    code = "not_json"


#: The act protocol's HTTP statuses (its codec's errors' rows beside the core tree's).
ACT_STATUS: Final[StatusTable] = statuses(STATUS, {BodyTooLargeError: 413, NotJSONError: 415})


class RawJSON(str):
    """Text that is already JSON; :func:`encode_reply` writes it as is."""

    __slots__ = ()


def dumps(value: object) -> RawJSON:
    """Compact JSON text for ``value``."""
    return RawJSON(json.dumps(value, separators=(",", ":")))


@dataclass(frozen=True, slots=True)
class ActionIn:
    """One action of a request: ``action`` for request ``act_no`` of run ``run``."""

    run: str
    act_no: int
    action: JsonValue


@dataclass(frozen=True, slots=True)
class ActRequest:
    """A parsed act request, whatever its wire version."""

    version: int
    agent: str
    pwd: str
    actions: tuple[ActionIn, ...] = ()
    parallel_runs: bool = True
    to_abandon: tuple[str, ...] = ()
    client: str = ""


@dataclass(frozen=True, slots=True)
class Message:
    """A message for the agent, about one run (``run``) or about the request (None)."""

    type: MessageType
    content: str
    run: str | None = None


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """What the server asks for: action ``act_no`` of ``run``, given ``percept``."""

    run: str
    act_no: int
    percept: RawJSON


@dataclass
class ActReply:
    """The body of a successful act reply, before encoding."""

    action_requests: list[ActionRequest] = field(default_factory=list)
    active_runs: list[str] = field(default_factory=list)
    finished_runs: dict[str, RawJSON] = field(default_factory=dict)
    messages: list[Message] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# requests


def decode_body(body: bytes, content_type: str | None, limit: int) -> JsonValue:
    """The JSON value of a request body.

    Raises:
        BodyTooLargeError: ``body`` is longer than ``limit`` bytes.
        NotJSONError: the content type is not JSON (``application/json`` or ``*/*+json``).
        MalformedRequestError: the body is empty or not valid JSON (field ``body``).
    """
    if len(body) > limit:
        raise BodyTooLargeError(f"request body of {len(body)} bytes is over the {limit} limit")
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media not in _JSON_TYPES and not media.endswith("+json"):
        shown = repr(content_type) if content_type else "none"
        raise NotJSONError(f"Content-Type must be application/json, got {shown}")
    if not body.strip():
        raise MalformedRequestError("body", "empty; expected a JSON object")
    try:
        return jsonio.loads(body)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, huge ints
        raise MalformedRequestError("body", f"not valid JSON ({exc})") from None


def _type_name(value: object) -> str:
    return {
        type(None): "null",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _expect(value: object, kind: type[_T], where: str, what: str) -> _T:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise MalformedRequestError(where, f"expected {what}, got {_type_name(value)}")
    return value


def _get(data: Mapping[str, JsonValue], key: str, kind: type[_T], what: str, default: _T) -> _T:
    if key not in data:
        return default
    return _expect(data[key], kind, key, what)


_LAX_INT = re.compile(r"[+-]?[0-9]+(?:_[0-9]+)*(?:\.0+)?")
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})
_INT_FLOAT_LIMIT = 2.0**63


def lax_int(value: object, where: str) -> int:
    """An integer field as the original server reads it (pydantic's lax mode).

    Accepts integers, booleans (``true`` is 1), floats without a fractional part (below 2**63
    in size) and strings of such a number (``"3"``, ``" 3 "``, ``"+3"``, ``"3.0"``, ``"1_000"``;
    surrounding whitespace is ignored).

    Raises:
        MalformedRequestError: anything else (``1.5``, ``"1e3"``, ``null``, a list), naming
            ``where``.
    """
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < _INT_FLOAT_LIMIT:
            return int(value)
        raise MalformedRequestError(where, f"expected an integer, got {value!r}")
    if isinstance(value, str):
        text = value.strip()
        if _LAX_INT.fullmatch(text):
            return int(text.split(".", 1)[0].replace("_", ""))
        raise MalformedRequestError(where, f"expected an integer, got the string {value!r}")
    raise MalformedRequestError(where, f"expected an integer, got {_type_name(value)}")


def lax_bool(value: object, where: str) -> bool:
    """A boolean field as the original server reads it (pydantic's lax mode).

    Accepts booleans, the numbers 0 and 1 (``0.0``, ``1.0`` too) and the strings ``true``,
    ``false``, ``yes``, ``no``, ``on``, ``off``, ``t``, ``f``, ``y``, ``n``, ``1``, ``0`` in any
    case.

    Raises:
        MalformedRequestError: anything else (``2``, ``"maybe"``, ``null``), naming ``where``.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        if value.lower() in _TRUE:
            return True
        if value.lower() in _FALSE:
            return False
    raise MalformedRequestError(where, f"expected a boolean, got {value!r}")


def _version(data: Mapping[str, JsonValue]) -> int:
    """``protocol_version`` compared as the original compares it: a number equal to 0 or 1
    (``true``, ``1.0``) names that version."""
    version = data.get("protocol_version", 0)
    if isinstance(version, bool | int | float) and version in SUPPORTED_VERSIONS:
        return int(version)
    raise UnsupportedVersionError(
        f"protocol_version: unsupported version {version!r} (this server speaks 0 and 1)"
    )


def _action(value: JsonValue, index: int, version: int) -> ActionIn:
    where = f"actions[{index}]"
    item = _expect(value, dict, where, "an object with run and action")
    if "run" not in item:
        raise MalformedRequestError(f"{where}.run", "missing")
    if "action" not in item:
        raise MalformedRequestError(f"{where}.action", "missing")
    run = _expect(item["run"], str, f"{where}.run", "a string")
    if version == 0:
        match = _V0_RUN.match(run)
        if match is None:
            raise MalformedRequestError(
                f"{where}.run", f"expected '<run id>#<action number>' such as '40#1', got {run!r}"
            )
        return ActionIn(match[1], int(match[2]), item["action"])
    if "act_no" not in item:
        raise MalformedRequestError(f"{where}.act_no", "missing")
    return ActionIn(run, lax_int(item["act_no"], f"{where}.act_no"), item["action"])


def parse_act_request(data: JsonValue) -> ActRequest:
    """Validate a decoded act request body (v0 or v1).

    Unknown fields are ignored, and integer and boolean fields are read as leniently as the
    original server reads them (:func:`lax_int`, :func:`lax_bool`; a ``protocol_version`` equal
    to 0 or 1, such as ``true`` or ``1.0``, names that version).

    Raises:
        MalformedRequestError: a field is missing or of the wrong type; the message names it.
        UnsupportedVersionError: ``protocol_version`` is not 0 or 1.
    """
    if not isinstance(data, dict):
        raise MalformedRequestError("body", f"expected a JSON object, got {_type_name(data)}")
    version = _version(data)
    for key in ("agent", "pwd"):
        if key not in data:
            raise MalformedRequestError(key, "missing")
    agent = _expect(data["agent"], str, "agent", "a string")
    pwd = _expect(data["pwd"], str, "pwd", "a string")
    raw_actions = _get(data, "actions", list, "a list of actions", [])
    actions = tuple(_action(item, i, version) for i, item in enumerate(raw_actions))
    if version == 0:
        single = lax_bool(data.get("single_request", False), "single_request")
        return ActRequest(0, agent, pwd, actions, parallel_runs=not single)
    parallel = lax_bool(data.get("parallel_runs", True), "parallel_runs")
    abandon = _get(data, "to_abandon", list, "a list of run ids", [])
    for i, run in enumerate(abandon):
        _expect(run, str, f"to_abandon[{i}]", "a run id string")
    client = _get(data, "client", str, "a string", "")
    return ActRequest(1, agent, pwd, actions, parallel, tuple(abandon), client)


# --------------------------------------------------------------------------------------------
# replies


def _v0_text(message: Message) -> str:
    return f"run {message.run}: {message.content}" if message.run is not None else message.content


def encode_reply(reply: ActReply, version: int) -> bytes:
    """The reply body for protocol ``version`` (percepts and outcomes embedded verbatim)."""
    q = json.dumps
    if version == 0:
        requests = ",".join(
            f'{{"run":{q(f"{r.run}#{r.act_no}")},"percept":{r.percept}}}'
            for r in reply.action_requests
        )
        texts = [_v0_text(m) for m in reply.messages]
        kinds = [m.type for m in reply.messages]
        errors = [t for t, k in zip(texts, kinds, strict=True) if k == "error"]
        others = [t for t, k in zip(texts, kinds, strict=True) if k != "error"]
        others += [f"run {run}: finished, outcome {o}" for run, o in reply.finished_runs.items()]
        return (
            f'{{"action-requests":[{requests}],"errors":{q(errors)},"messages":{q(others)}}}'
        ).encode()
    requests = ",".join(
        f'{{"run":{q(r.run)},"act_no":{r.act_no},"percept":{r.percept}}}'
        for r in reply.action_requests
    )
    finished = ",".join(f"{q(run)}:{o}" for run, o in reply.finished_runs.items())
    messages = q([{"type": m.type, "content": m.content, "run": m.run} for m in reply.messages])
    return (
        f'{{"action_requests":[{requests}],"active_runs":{q(reply.active_runs)},'
        f'"finished_runs":{{{finished}}},"messages":{messages}}}'
    ).encode()


def error_body(status: int, description: str) -> bytes:
    """``{"errorcode", "errorname", "description"}`` for an HTTP status."""
    try:
        name = HTTPStatus(status).phrase
    except ValueError:
        name = "Error"
    return json.dumps({"errorcode": status, "errorname": name, "description": description}).encode()


def error_reply(exc: EnvwireError, table: StatusTable = ACT_STATUS) -> tuple[int, bytes]:
    """The status and body that report ``exc`` (its status from ``table``: the arena's own
    for the errors of the layer above)."""
    status = status_of(exc, table)
    return status, error_body(status, exc.message)
