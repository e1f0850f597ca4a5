"""The connection state machine: :data:`TRANSITIONS`, a table of what each request does in
each :class:`Phase`, and the kind of each request."""

from __future__ import annotations

from enum import Enum
from typing import Final

from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from google.protobuf.message import DecodeError

from envwire.errors import ProtocolError, StateError
from envwire.protocols.dmenvrpc.tensors import PayloadMessage

__all__ = [
    "SAME",
    "TRANSITIONS",
    "WORLD_DECIDES",
    "Kind",
    "Next",
    "Phase",
    "next_phase",
    "parse_request",
    "request_kind",
]


class Kind(Enum):
    """A request's kind: the name of its ``EnvironmentRequest.payload`` field."""

    CREATE_WORLD = "create_world"
    JOIN_WORLD = "join_world"
    STEP = "step"
    RESET = "reset"
    RESET_WORLD = "reset_world"
    LEAVE_WORLD = "leave_world"
    DESTROY_WORLD = "destroy_world"
    EXTENSION = "extension"

    # Members are singletons compared by identity: the identity hash is as good as Enum's
    # (by name, a Python call), and every request looks a kind and a phase up in dicts.
    __hash__ = object.__hash__


#: Kind by payload field name (a dict lookup; calling the Enum costs more per request).
_KINDS: dict[str, Kind] = {kind.value: kind for kind in Kind}


class Phase(Enum):
    """Where one connection is: not joined, or joined and in one of dm_env_rpc's states.

    JOINED, TERMINATED and INTERRUPTED are the non-RUNNING states: the next Step ignores its
    actions and starts a sequence.
    """

    UNJOINED = "not joined"
    JOINED = "joined"
    RUNNING = "running"
    TERMINATED = "terminated"
    INTERRUPTED = "interrupted"

    __hash__ = object.__hash__  # as Kind's


class _Marker(Enum):
    SAME = "same"
    WORLD_DECIDES = "world decides"


#: The phase does not change.
SAME: Final = _Marker.SAME
#: The world decides (a Step of a running sequence: RUNNING, TERMINATED or INTERRUPTED).
WORLD_DECIDES: Final = _Marker.WORLD_DECIDES

Next = Phase | _Marker

_ANYWHERE: dict[Kind, Next] = {
    Kind.CREATE_WORLD: SAME,
    Kind.RESET_WORLD: SAME,  # the world moves its own joined connections
    Kind.DESTROY_WORLD: SAME,
    Kind.EXTENSION: SAME,
}
_JOINED: dict[Kind, Next] = {
    **_ANYWHERE,
    Kind.STEP: Phase.RUNNING,  # a sequence starts; the step's actions are ignored
    Kind.RESET: Phase.INTERRUPTED,
    Kind.LEAVE_WORLD: Phase.UNJOINED,
}

#: What each request does in each phase; a request missing from a phase's row is refused.
TRANSITIONS: dict[Phase, dict[Kind, Next]] = {
    Phase.UNJOINED: {**_ANYWHERE, Kind.JOIN_WORLD: Phase.JOINED, Kind.LEAVE_WORLD: SAME},
    Phase.JOINED: _JOINED,
    Phase.RUNNING: {**_JOINED, Kind.STEP: WORLD_DECIDES},
    Phase.TERMINATED: _JOINED,
    Phase.INTERRUPTED: _JOINED,
}

_REFUSALS = {
    (False, Kind.STEP): "Step before JoinWorld: join a world first",
    (False, Kind.RESET): "Reset before JoinWorld: join a world first",
    (True, Kind.JOIN_WORLD): "JoinWorld while joined to world {world!r}: leave it first "
    "(one world per connection; open another connection to join another)",
}


def next_phase(phase: Phase, kind: Kind, world: str = "") -> Next:
    """What ``kind`` does in ``phase`` (:data:`TRANSITIONS`).

    Raises:
        StateError: the phase does not allow it; the message names the request and the phase.
    """
    row = TRANSITIONS[phase]
    if kind in row:
        return row[kind]
    template = _REFUSALS.get((phase is not Phase.UNJOINED, kind))
    if template is None:  # pragma: no cover - the table covers every refusal
        template = f"{kind.value} is not allowed while the connection is {phase.value}"
    raise StateError(template.format(world=world))


def parse_request(data: bytes) -> pb.EnvironmentRequest:
    """An ``EnvironmentRequest`` from its serialized bytes.

    Raises:
        ProtocolError: the bytes are not one.
    """
    try:
        return pb.EnvironmentRequest.FromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ProtocolError(
            f"cannot parse an EnvironmentRequest from {len(data)} bytes: {exc}"
        ) from None


def request_kind(request: PayloadMessage) -> Kind:
    """The kind of an ``EnvironmentRequest``.

    Raises:
        ProtocolError: the request has no payload.
    """
    field = request.WhichOneof("payload")
    if field is None:
        raise ProtocolError("EnvironmentRequest has no payload (none of create_world, ... is set)")
    return _KINDS[field]
