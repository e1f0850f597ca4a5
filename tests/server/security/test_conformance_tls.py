"""The conformance kit over TLS, with a token, on every front end: gym-sockets://, https://,
wss:// and grpcs:// against one server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import envwire
from envwire.testing import CONFORMANCE_ENVS, SERVER_ARGS, ConformanceTests, ServerProcess
from tests.server.security.conftest import TOKEN, Secrets, secured, serve


@pytest.fixture(scope="module")
def tls_server(
    secrets: Secrets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("conformance-tls")
    front_ends = ["gym-socket", "http", "grpc"]
    with serve(
        tmp, front_ends, envs=CONFORMANCE_ENVS, args=SERVER_ARGS, **secured(secrets, tls=True)
    ) as server:
        yield server


class _OverTls(ConformanceTests):
    scheme = ""
    front_end = ""
    prefix = ""
    server: ServerProcess
    ca: str

    @pytest.fixture(autouse=True)
    def _server(self, tls_server: ServerProcess, secrets: Secrets) -> None:
        self.server = tls_server
        self.ca = secrets.tls.ca

    def connect(self, env_id: str) -> Any:
        url = self.server.url(self.scheme, self.prefix + env_id, self.front_end)
        return envwire.make(url, token=TOKEN, ca=self.ca, timeout=30)


class TestGymSocketOverTls(_OverTls):
    scheme, front_end = "gym-sockets", "gym-socket"


class TestHttpsConformance(_OverTls):
    scheme, front_end, prefix = "https", "http", "envs/"


class TestWssConformance(_OverTls):
    scheme, front_end, prefix = "wss", "http", "envs/"


class TestGrpcsConformance(_OverTls):
    scheme, front_end = "grpcs", "grpc"


def test_clients_verify_the_certificate(tls_server: ServerProcess) -> None:
    """Without the CA the server's certificate is not trusted: no silent fallback."""
    from envwire.errors import TransportError

    for scheme, front_end, prefix in [
        ("gym-sockets", "gym-socket", ""),
        ("https", "http", "envs/"),
        ("wss", "http", "envs/"),
        ("grpcs", "grpc", ""),
    ]:
        url = tls_server.url(scheme, prefix + "CartPole-v1", front_end)
        with pytest.raises(TransportError):
            envwire.make(url, token=TOKEN, timeout=5)


@pytest.mark.parametrize(
    ("scheme", "front_end"), [("gym-sockets", "gym-socket"), ("grpcs", "grpc")]
)
def test_vector_envs_over_tls(
    tls_server: ServerProcess, secrets: Secrets, scheme: str, front_end: str
) -> None:
    url = tls_server.url(scheme, "CartPole-v1", front_end)
    envs = envwire.make_vec(url, 4, token=TOKEN, ca=secrets.tls.ca, timeout=30)
    try:
        observations, _ = envs.reset(seed=0)
        assert observations.shape == (4, 4)
        _, rewards, *_ = envs.step(envs.action_space.sample())
        assert list(rewards) == [1.0] * 4
    finally:
        envs.close()
