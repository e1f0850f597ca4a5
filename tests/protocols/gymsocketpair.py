"""A gym-socket client and server codec, each past its handshake with the other side's bytes:
the lean paths' tests compare what both paths make of the same bytes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gymnasium import spaces

from envwire.errors import ProtocolError
from envwire.protocols.gymsocket import ClientConnection, Flags, ServerConnection
from tests.spaces_catalog import assert_same

__all__ = ["ACTIONS", "EXTENDED", "connected_client", "connected_server", "same_reads"]

EXTENDED = Flags.ERRORS | Flags.MONITOR_REPLY | Flags.EXTENDED
ACTIONS = spaces.Discrete(3)


def connected_client(flags: Flags, observation_space: spaces.Space[Any]) -> ClientConnection:
    """A client codec with ``flags`` whose handshake was accepted, the spaces set."""
    client = ClientConnection(flags)
    client.send_handshake("x")
    client.receive_data(ServerConnection().send_handshake_reply(""))
    client.next_event()
    client.set_spaces(ACTIONS, observation_space)
    return client


def connected_server(observation_space: spaces.Space[Any]) -> ServerConnection:
    """A server codec past an extended client's handshake, the spaces set."""
    server = ServerConnection()
    server.receive_data(ClientConnection(EXTENDED).send_handshake("x"))
    server.next_event()
    server.set_spaces(ACTIONS, observation_space)
    return server


def same_reads(general: Callable[[], Any], lean: Callable[[], tuple[Any, bool]]) -> bool:
    """Read one reply by the general path and by the lean one (falling back as the transport
    does), check that both give the same result or the same ``ProtocolError``, and say whether
    the lean path read it."""
    try:
        expected: Any = general()
    except ProtocolError as exc:
        expected = exc
    try:
        got, was_lean = lean()
    except ProtocolError as exc:
        got, was_lean = exc, False
    if isinstance(expected, ProtocolError):
        assert type(got) is ProtocolError and str(got) == str(expected)
    else:
        assert_same(got, expected)
    return bool(was_lean)


def lean_request(client: ClientConnection, action: object) -> bytes | None:
    """The bytes of ``client``'s lean step of ``action`` (None where it has none), sent as
    the transport sends it when the step's own read cannot read its reply: its reply is then
    expected, for the codec's lean reads or the general path."""
    step = client.lean_step(action)
    if step is None:
        return None
    client.lean_sent()
    return step.request
