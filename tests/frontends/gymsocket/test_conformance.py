"""The conformance kit over gym-socket, against a real ``envwire serve``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import envwire
from envwire.testing import SERVER_ARGS, ConformanceTests, ServerProcess


class TestGymSocketConformance(ConformanceTests):
    server: ServerProcess

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _server(cls, request: pytest.FixtureRequest) -> Iterator[None]:
        with ServerProcess(args=SERVER_ARGS) as server:
            request.cls.server = server
            yield

    def connect(self, env_id: str) -> Any:
        return envwire.make(self.server.url("gym-socket", env_id), timeout=30)
