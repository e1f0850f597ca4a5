"""A real ``envwire serve`` with the gRPC front end, shared by the dm_env_rpc tests."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from envwire.client.dmenvrpc.stream import CHANNEL_OPTIONS
from envwire.testing import CONFORMANCE_ENVS, SERVER_ARGS, ServerProcess

#: The conformance envs and a two-player game.
ENVS = (*CONFORMANCE_ENVS, "envwire/Connect4-v0")


@pytest.fixture(scope="session")
def grpc_server() -> Iterator[ServerProcess]:
    """``envwire serve`` with only the gRPC front end on a free port."""
    args = (*SERVER_ARGS, "--capacity", "64")
    with ServerProcess(ENVS, args, front_ends=("grpc",)) as server:
        yield server


@pytest.fixture
def address(grpc_server: ServerProcess) -> str:
    return f"{grpc_server.host}:{grpc_server.ports['grpc']}"


@pytest.fixture
def channel(address: str) -> Iterator[grpc.Channel]:
    """A channel to the server, closed after the test."""
    opened = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    grpc.channel_ready_future(opened).result(timeout=30)
    yield opened
    opened.close()
