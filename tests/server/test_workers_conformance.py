"""The conformance kit against ``envwire serve --workers 2``, on every front end: to its clients
the server of two workers is one server (its capacity is the whole server's)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import envwire
from envwire.testing import SERVER_ARGS, ConformanceTests, ServerProcess


@pytest.fixture(scope="module")
def two_workers() -> Iterator[ServerProcess]:
    with ServerProcess(
        args=SERVER_ARGS, front_ends=("gym-socket", "http", "grpc"), workers=2
    ) as server:
        assert len(server.children()) == 2
        yield server


class _OnTwoWorkers(ConformanceTests):
    scheme = ""
    front_end = ""
    prefix = ""
    server: ServerProcess

    @pytest.fixture(autouse=True)
    def _server(self, two_workers: ServerProcess) -> None:
        self.server = two_workers

    def connect(self, env_id: str) -> Any:
        url = self.server.url(self.scheme, self.prefix + env_id, self.front_end)
        return envwire.make(url, timeout=30)


class TestGymSocketOnTwoWorkers(_OnTwoWorkers):
    scheme, front_end = "gym-socket", "gym-socket"


class TestHttpOnTwoWorkers(_OnTwoWorkers):
    scheme, front_end, prefix = "http", "http", "envs/"


class TestWebSocketOnTwoWorkers(_OnTwoWorkers):
    scheme, front_end, prefix = "ws", "http", "envs/"


class TestGrpcOnTwoWorkers(_OnTwoWorkers):
    scheme, front_end = "grpc", "grpc"
