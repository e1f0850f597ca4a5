"""The HTTP front end: tokens, Host and Origin checks, content types, session bounds."""

from __future__ import annotations

import base64
import json
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

import envwire
from envwire.errors import UnauthenticatedError
from envwire.testing import ServerProcess
from tests.server.security.conftest import OTHER_TOKEN, TOKEN, Secrets, secured, serve

ENVS = ("envwire/Echo-v0", "envwire/Coding-v0", "CartPole-v1")
BEARER = {"authorization": f"Bearer {TOKEN}"}


def base_of(server: ServerProcess, scheme: str = "http") -> str:
    return f"{scheme}://{server.host}:{server.ports['http']}"


@pytest.fixture(scope="module")
def token_server(
    secrets: Secrets, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("http-token")
    with serve(tmp, ["http"], envs=ENVS, **secured(secrets)) as server:
        yield server


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """No tokens, as on loopback by default, with small session bounds."""
    tmp = tmp_path_factory.mktemp("http-open")
    settings = {"http_max_sessions": 6, "http_sessions_per_address": 4}
    with serve(tmp, ["http"], envs=ENVS, **settings) as server:
        yield server


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/reset"),
        ("POST", "/step"),
        ("GET", "/state"),
        ("GET", "/schema"),
        ("GET", "/docs"),
        ("GET", "/metadata"),
        ("GET", "/openapi.json"),
        ("POST", "/mcp"),
        ("GET", "/status"),
        ("GET", "/envs"),
        ("POST", "/envs/CartPole-v1/reset"),
    ],
)
def test_every_route_but_health_needs_the_token(
    token_server: ServerProcess, method: str, path: str
) -> None:
    base = base_of(token_server)
    for headers in ({}, {"authorization": f"Bearer {OTHER_TOKEN}"}, {"authorization": TOKEN}):
        reply = httpx.request(method, base + path, headers=headers, json={})
        assert reply.status_code == 401, (path, headers)
        body = reply.json()
        assert body["code"] == "unauthenticated" and "token" in body["detail"]
        assert reply.headers["www-authenticate"].startswith("Bearer")
        assert TOKEN not in reply.text and OTHER_TOKEN not in reply.text
    assert httpx.request(method, base + path, headers=BEARER, json={}).status_code != 401


def test_health_stays_open(token_server: ServerProcess) -> None:
    base = base_of(token_server)
    assert httpx.get(base + "/health").json()["status"] == "healthy"
    assert httpx.get(base + "/envs/CartPole-v1/health").status_code == 200


def test_bearer_and_basic_credentials(token_server: ServerProcess) -> None:
    base = base_of(token_server)
    reply = httpx.post(base + "/envs/envwire/Echo-v0/reset", headers=BEARER, json={})
    assert reply.status_code == 200
    basic = httpx.post(
        base.replace("http://", f"http://anyone:{TOKEN}@") + "/envs/envwire/Echo-v0/reset",
        json={},
    )
    assert basic.status_code == 200


def test_websocket_upgrade_checks_the_token(token_server: ServerProcess) -> None:
    url = base_of(token_server, "ws") + "/envs/envwire/Echo-v0/ws"
    with pytest.raises(InvalidStatus) as info:
        ws_connect(url)
    assert info.value.response.status_code == 401
    with ws_connect(url, additional_headers=BEARER) as ws:
        ws.send(json.dumps({"type": "reset", "data": {}}))
        assert json.loads(ws.recv())["type"] == "observation"


def test_openenv_core_clients_with_the_token_in_the_url(token_server: ServerProcess) -> None:
    """openenv-core 0.3 takes no headers: the URL's user info becomes Basic credentials."""
    base = base_of(token_server).replace("http://", f"http://envwire:{TOKEN}@")
    with GenericEnvClient(base_url=f"{base}/envs/envwire/Echo-v0").sync() as env:
        env.reset()
        assert env.step({"message": "hi"}).observation["echoed_message"] == "hi"
    plain = base_of(token_server)
    with (
        pytest.raises(ConnectionError, match="401"),
        GenericEnvClient(base_url=f"{plain}/envs/envwire/Echo-v0").sync() as env,
    ):
        env.reset()


def test_envwire_clients_take_the_token(
    token_server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    for scheme in ("http", "ws"):
        url = base_of(token_server, scheme) + "/envs/CartPole-v1"
        with pytest.raises(UnauthenticatedError):
            envwire.make(url)
        env = envwire.make(url, token=TOKEN)
        env.reset(seed=0)
        env.step(1)
        env.close()
        monkeypatch.setenv("ENVWIRE_TOKEN", TOKEN)
        envwire.make(url).close()
        monkeypatch.delenv("ENVWIRE_TOKEN")


def raw_request(server: ServerProcess, head: str, body: bytes = b"") -> tuple[int, bytes]:
    """Send one request as given; (status, whole response)."""
    with socket.create_connection((server.host, server.ports["http"]), timeout=10) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
            if b"\r\n\r\n" in data and (b"101 Switching" in data or len(data) > 4096):
                break
    return int(data.split(b" ", 2)[1]), data


def test_dns_rebinding_hosts_are_refused(open_server: ServerProcess) -> None:
    port = open_server.ports["http"]
    for host, status in [
        (f"evil.example:{port}", 403),
        ("evil.example", 403),
        (f"127.0.0.1:{port}", 200),
        (f"localhost:{port}", 200),
    ]:
        got, data = raw_request(
            open_server, f"GET /health HTTP/1.1\nHost: {host}\nConnection: close\n"
        )
        assert got == status, (host, data)
    got, _ = raw_request(open_server, "GET /health HTTP/1.1\nConnection: close\n")
    assert got == 400  # HTTP/1.1 requires a Host


def test_a_foreign_origin_cannot_open_a_websocket(open_server: ServerProcess) -> None:
    """Cross-site WebSocket hijacking: a page elsewhere got 101 and ran code."""
    port = open_server.ports["http"]
    key = base64.b64encode(b"0123456789abcdef").decode()
    head = (
        "GET /envs/envwire/Coding-v0/ws HTTP/1.1\n"
        f"Host: 127.0.0.1:{port}\nUpgrade: websocket\nConnection: Upgrade\n"
        f"Sec-WebSocket-Key: {key}\nSec-WebSocket-Version: 13\n"
    )
    status, data = raw_request(open_server, head + "Origin: http://evil.example\n")
    assert status == 403 and b"101" not in data.split(b"\r\n")[0]
    status, _ = raw_request(open_server, head + f"Origin: http://127.0.0.1:{port}\n")
    assert status == 101
    url = base_of(open_server, "ws") + "/envs/envwire/Echo-v0/ws"
    with ws_connect(url, origin=f"http://127.0.0.1:{port}"):  # type: ignore[arg-type]
        pass


def test_cross_site_posts_cannot_run_code(open_server: ServerProcess) -> None:
    """POST /mcp with text/plain (a form or no-cors fetch) ran run_python without a session."""
    base = base_of(open_server)
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "run_python", "arguments": {"code": "print(6 * 7)"}},
    }
    plain = httpx.post(
        base + "/envs/envwire/Coding-v0/mcp",
        content=json.dumps(call),
        headers={"content-type": "text/plain"},
    )
    assert plain.status_code == 415
    assert "42" not in plain.text
    form = httpx.post(base + "/envs/envwire/Echo-v0/reset", data={"seed": "1"})
    assert form.status_code == 415
    foreign = httpx.post(
        base + "/envs/envwire/Echo-v0/reset", json={}, headers={"origin": "http://evil.example"}
    )
    assert foreign.status_code == 403
    for reply in (
        httpx.post(base + "/envs/envwire/Echo-v0/reset"),  # no body
        httpx.post(base + "/envs/envwire/Echo-v0/reset", json={}),
        httpx.post(base + "/envs/envwire/Echo-v0/reset", content=b"{}"),  # no type: curl, scripts
    ):
        assert reply.status_code == 200
        close_session(base, reply)


def close_session(base: str, reply: httpx.Response) -> None:
    headers = {"envwire-session": reply.headers["envwire-session"]}
    assert httpx.delete(base + "/envs/envwire/Echo-v0/session", headers=headers).status_code == 200


def status(server: ServerProcess) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(base_of(server) + "/status").json()
    return data


def test_http_sessions_are_capped(open_server: ServerProcess) -> None:
    """Each cookie-less reset opens a session: 5,000 of them used to stay an hour."""
    base = base_of(open_server)
    url = base + "/envs/envwire/Echo-v0/reset"
    assert status(open_server)["sessions"] == 0
    opened = [httpx.post(url, json={}) for _ in range(4)]
    assert all(r.status_code == 200 for r in opened)
    refused = httpx.post(url, json={})
    assert refused.status_code == 503
    assert refused.json()["openenv_code"] == "CAPACITY_REACHED"
    assert "holds 4 http sessions" in refused.json()["detail"]
    assert refused.headers["retry-after"]
    for reply in opened:  # closing frees the address's share
        close_session(base, reply)
    close_session(base, httpx.post(url, json={}))


def test_the_total_of_http_sessions_is_capped(tmp_path: Path) -> None:
    with serve(tmp_path, ["http"], envs=ENVS, http_max_sessions=3) as server:
        url = base_of(server) + "/envs/envwire/Echo-v0/reset"
        assert all(httpx.post(url, json={}).status_code == 200 for _ in range(3))
        refused = httpx.post(url, json={})
        assert refused.status_code == 503
        assert "at capacity (3 http sessions)" in refused.json()["detail"]
        # WebSocket sessions live with their connection and are not HTTP sessions
        with ws_connect(base_of(server, "ws") + "/envs/envwire/Echo-v0/ws") as ws:
            ws.send(json.dumps({"type": "reset", "data": {}}))
            assert json.loads(ws.recv())["type"] == "observation"


def test_idle_http_sessions_are_reaped(tmp_path: Path) -> None:
    settings = {"http_session_idle": 1.0, "reap_interval": 0.2}
    with serve(tmp_path, ["http"], envs=ENVS, **settings) as server:
        assert_reaped(base_of(server))


def assert_reaped(base: str) -> None:
    reply = httpx.post(base + "/envs/envwire/Echo-v0/reset", json={})
    token = reply.headers["envwire-session"]
    headers = {"envwire-session": token}
    assert httpx.get(base + "/envs/envwire/Echo-v0/state", headers=headers).status_code == 200
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        got = httpx.get(base + "/envs/envwire/Echo-v0/state", headers=headers).status_code
        if got == 404:
            break
        time.sleep(1.5)  # idle for longer than http_session_idle
    assert got == 404


def test_secure_cookie_under_tls(secrets: Secrets, tmp_path: Path) -> None:
    with serve(tmp_path, ["http"], envs=ENVS, **secured(secrets, tls=True)) as server:
        base = base_of(server, "https")
        verify = ssl.create_default_context(cafile=secrets.tls.ca)
        with httpx.Client(verify=verify, headers=BEARER) as client:
            reply = client.post(base + "/envs/envwire/Echo-v0/reset", json={})
        assert reply.status_code == 200
        cookie = reply.headers["set-cookie"]
        assert "; Secure" in cookie and "HttpOnly" in cookie
        with pytest.raises(httpx.HTTPError):  # plain HTTP on a TLS port
            httpx.get(base_of(server, "http") + "/health", timeout=5).raise_for_status()
