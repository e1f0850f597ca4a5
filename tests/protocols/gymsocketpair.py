"""A gym-socket client and server codec, each past its handshake with the other side's bytes:
the lean paths' tests compare what both paths make of the same bytes."""

from __future__ import annotations

from typing import Any

from gymnasium import spaces

from envwire.protocols.gymsocket import ClientConnection, Flags, ServerConnection

__all__ = ["ACTIONS", "EXTENDED", "connected_client", "connected_server"]

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
