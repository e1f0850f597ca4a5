"""A real ``envwire serve`` with the gym-socket and gRPC front ends, for the adapter tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from envwire.testing import SERVER_ARGS, ServerProcess

# The dm_env adapter's tests run against the dm_env_rpc tests' server.
from tests.frontends.dmenvrpc.conftest import address, channel, grpc_server  # noqa: F401

ENVS = (
    "CartPole-v1",
    "test/Ticker-v0=tests.adapters.helpers:ticker@inline",
    "test/QuietTicker-v0=tests.adapters.helpers:quiet_ticker@inline",
)

#: URL scheme -> the front end that serves it.
SCHEMES = {"gym-socket": "gym-socket", "grpc": "grpc"}


@pytest.fixture(scope="session")
def adapter_server() -> Iterator[ServerProcess]:
    """One server for every adapter test (CartPole and the Ticker envs)."""
    with ServerProcess(ENVS, SERVER_ARGS, front_ends=tuple(SCHEMES.values())) as server:
        yield server


@pytest.fixture(params=sorted(SCHEMES))
def scheme(request: pytest.FixtureRequest) -> str:
    """Each URL scheme with a batched path."""
    return str(request.param)
