"""The conformance kit over OpenEnv's WebSocket and over envwire's stateful HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import envwire
from envwire.testing import CONFORMANCE_ENVS, SERVER_ARGS, ConformanceTests, ServerProcess
from tests.frontends.openenv.conftest import http_server


@pytest.fixture(scope="module")
def conformance_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("conformance")
    with http_server(tmp, CONFORMANCE_ENVS, SERVER_ARGS) as server:
        yield server


class TestWebSocketConformance(ConformanceTests):
    server: ServerProcess

    @pytest.fixture(autouse=True)
    def _server(self, conformance_server: ServerProcess) -> None:
        self.server = conformance_server

    def connect(self, env_id: str) -> Any:
        return envwire.make(self.server.url("ws", f"envs/{env_id}", "http"), timeout=30)


class TestHttpConformance(ConformanceTests):
    server: ServerProcess

    @pytest.fixture(autouse=True)
    def _server(self, conformance_server: ServerProcess) -> None:
        self.server = conformance_server

    def connect(self, env_id: str) -> Any:
        return envwire.make(self.server.url("http", f"envs/{env_id}"), timeout=30)
