"""``/metrics`` and ``/dashboard`` with tokens on: the same rule as the other routes, with
``public_metrics`` opening ``/metrics`` alone; the standalone ``--metrics`` listener keeps the
rule, speaks TLS and bounds its scrapers."""

from __future__ import annotations

import base64
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from envwire.app import Server
from envwire.observe import scrape as metrics_listener
from envwire.registry import Catalog, parse_env_arg
from envwire.settings import Settings
from tests.server.security.conftest import OTHER_TOKEN, TOKEN, Secrets

BEARER = {"authorization": f"Bearer {TOKEN}"}


def _basic(password: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"anyone:{password}".encode()).decode()}


def _start(ports: dict[str, int | None], **options: Any) -> Server:
    keys = {name.replace("-", "_"): port for name, port in ports.items()}
    server = Server(Catalog([parse_env_arg("CartPole-v1")]), Settings.of(**keys, **options))
    server.start()
    return server


def _base(server: Server, name: str, scheme: str = "http") -> str:
    host, port = server.addresses[name]
    return f"{scheme}://{host}:{port}"


@pytest.fixture
def http_server(secrets: Secrets) -> Iterator[Server]:
    server = _start({"gym-socket": None, "http": 0, "grpc": None}, token_file=secrets.token_file)
    try:
        yield server
    finally:
        server.shutdown()


@pytest.mark.parametrize("path", ["/metrics", "/dashboard", "/dashboard/api/live"])
def test_observe_routes_need_a_token(http_server: Server, path: str) -> None:
    base = _base(http_server, "http")
    for headers in ({}, {"authorization": f"Bearer {OTHER_TOKEN}"}, _basic(OTHER_TOKEN)):
        refused = httpx.get(base + path, headers=headers, timeout=10)
        assert refused.status_code == 401, (headers, refused.text)
        assert refused.json()["code"] == "unauthenticated"
        assert TOKEN not in refused.text
        scheme = "Basic" if path.startswith("/dashboard") else "Bearer"
        assert refused.headers["www-authenticate"] == f'{scheme} realm="envwire"'
    # a POST without a token learns nothing either
    assert httpx.post(base + path, timeout=10).status_code == 401
    for headers in (BEARER, _basic(TOKEN)):
        answered = httpx.get(base + path, headers=headers, timeout=10)
        assert answered.status_code == 200, answered.text


def test_public_metrics_opens_metrics_alone(secrets: Secrets) -> None:
    server = _start(
        {"gym-socket": None, "http": 0, "grpc": None},
        token_file=secrets.token_file,
        public_metrics=True,
    )
    try:
        base = _base(server, "http")
        scraped = httpx.get(base + "/metrics", timeout=10)
        assert scraped.status_code == 200
        assert "envwire_sessions_opened_total" in scraped.text
        assert httpx.get(base + "/dashboard", timeout=10).status_code == 401
        assert httpx.get(base + "/dashboard/api/live", timeout=10).status_code == 401
        assert httpx.post(base + "/reset", json={}, timeout=10).status_code == 401
    finally:
        server.shutdown()


def test_standalone_listener_follows_the_token_rule(secrets: Secrets) -> None:
    ports: dict[str, int | None] = {"gym-socket": 0, "http": None, "grpc": None, "metrics": 0}
    server = _start(ports, token_file=secrets.token_file)
    try:
        base = _base(server, "metrics")
        refused = httpx.get(base + "/metrics", timeout=10)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == 'Bearer realm="envwire"'
        assert refused.json()["code"] == "unauthenticated"
        answered = httpx.get(base + "/metrics", headers=BEARER, timeout=10)
        assert answered.status_code == 200
        assert "envwire_steps_total" in answered.text
    finally:
        server.shutdown()
    server = _start(ports, token_file=secrets.token_file, public_metrics=True)
    try:
        assert httpx.get(_base(server, "metrics") + "/metrics", timeout=10).status_code == 200
    finally:
        server.shutdown()


def _silent(address: tuple[str, int]) -> socket.socket:
    """A connection that sends nothing."""
    return socket.create_connection(address, timeout=10)


def _closed_at_once(address: tuple[str, int]) -> bool:
    """Whether the listener closes a new connection without an answer."""
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        try:
            return sock.recv(100) == b""
        except ConnectionResetError:
            return True


def test_standalone_listener_speaks_tls_and_bounds_its_scrapers(
    secrets: Secrets, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics_listener, "SCRAPE_TIMEOUT", 2.0)
    ports: dict[str, int | None] = {"gym-socket": 0, "http": None, "grpc": None, "metrics": 0}
    server = _start(
        ports,
        token_file=secrets.token_file,
        tls_cert=secrets.tls.cert,
        tls_key=secrets.tls.key,
    )
    address = server.addresses["metrics"]
    url = _base(server, "metrics", "https") + "/metrics"
    held: list[socket.socket] = []
    try:
        trusted = ssl.create_default_context(cafile=secrets.tls.ca)
        answered = httpx.get(url, headers=BEARER, verify=trusted, timeout=10)
        assert answered.status_code == 200
        # plain HTTP is not served: the connection fails (not a timeout, not an answer)
        with pytest.raises((httpx.NetworkError, httpx.RemoteProtocolError)):
            httpx.get(url.replace("https", "http"), headers=BEARER, timeout=10)
        # a silent connection (no TLS hello) holds a slot, not the listener
        held.append(_silent(address))
        started = time.monotonic()
        assert httpx.get(url, headers=BEARER, verify=trusted, timeout=10).is_success
        assert time.monotonic() - started < 5
        # every slot taken: the next connection is closed at once
        held += [_silent(address) for _ in range(metrics_listener.MAX_SCRAPERS - 1)]
        time.sleep(0.3)
        assert _closed_at_once(address)
        # silent connections time out and free their slots
        time.sleep(3.0)
        assert httpx.get(url, headers=BEARER, verify=trusted, timeout=10).is_success
    finally:
        for sock in held:
            sock.close()
        server.shutdown()


def test_serve_flag_public_metrics(tmp_path: Path, secrets: Secrets) -> None:
    """``--public-metrics`` reaches the server's settings from the command line."""
    from envwire.cli import _parser
    from envwire.settings import given

    args = _parser().parse_args(
        ["serve", "--token-file", str(secrets.token_file), "--public-metrics"]
    )
    assert given(args)["public_metrics"] is True
    args = _parser().parse_args(["serve"])
    assert "public_metrics" not in given(args)
