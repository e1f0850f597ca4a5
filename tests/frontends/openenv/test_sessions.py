"""Sessions that scale and never leak: many WebSocket sessions, vanished clients, half-open
connections, idle reaping, hung envs."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from envwire.testing import ServerProcess, wait_until
from tests.frontends.openenv.conftest import http_server

SESSIONS = 500

# Opens SESSIONS WebSocket sessions at once from one asyncio process, steps each of them, prints
# READY with the number of correct replies, then waits to be killed (never closing anything).
CROWD = r"""
import asyncio, json, sys
from websockets.asyncio.client import connect

async def one(url, i, ready):
    ws = await connect(url, compression=None, open_timeout=60, ping_interval=None)
    await ws.send(json.dumps({"type": "reset", "data": {"episode_id": f"e{i}"}}))
    assert json.loads(await ws.recv())["type"] == "observation"
    good = 0
    for n in range(5):
        message = f"{i}-{n}"
        await ws.send(json.dumps({"type": "step", "data": {"message": message}}))
        reply = json.loads(await ws.recv())
        good += reply["data"]["observation"]["echoed_message"] == message
    await ws.send(json.dumps({"type": "state"}))
    state = json.loads(await ws.recv())["data"]
    good += state == {"episode_id": f"e{i}", "step_count": 5}
    ready.append(good)
    return ws

async def main(url, n):
    ready = []
    sockets = await asyncio.gather(*(one(url, i, ready) for i in range(n)))
    print("READY", sum(ready), len(sockets), flush=True)
    await asyncio.sleep(3600)

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def status(base: str) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(f"{base}/status", timeout=PATIENCE).json()
    return data


#: Seconds any one wait of these tests may take: generous, for a loaded machine (a late reply
#: fails nothing; only what never comes does).
PATIENCE = 60.0
#: Seconds a session of ``reaping_server`` may go unused: long enough that a loaded machine
#: sees a new session before it goes.
IDLE = 8.0
#: Seconds a step of ``hanging_server`` may take (an Echo step takes microseconds).
STEP_TIMEOUT = 3


@pytest.fixture(scope="module")
def crowd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("crowd")
    # Pinged after 1 s of silence; a pong may be a minute late while 500 sessions share one
    # client process on a busy machine.
    with http_server(tmp, ["envwire/Echo-v0"], ping_interval=1.0, ping_timeout=PATIENCE) as server:
        yield server


@pytest.fixture(scope="module")
def pinging_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("pinging")
    # Its client never answers: the timeouts are the server's, never the test's to meet.
    with http_server(tmp, ["envwire/Echo-v0"], ping_interval=1.0, ping_timeout=5.0) as server:
        yield server


@pytest.fixture(scope="module")
def reaping_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("reaping")
    # Sessions unused for IDLE seconds go; pings every 0.3 s of silence do not count as use
    # (a late pong is no reason to drop a connection here).
    with http_server(
        tmp,
        ["envwire/Echo-v0"],
        ping_interval=0.3,
        ping_timeout=PATIENCE,
        reap_interval=0.2,
        idle_timeout=IDLE,
    ) as server:
        yield server


@pytest.fixture(scope="module")
def hanging_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp: Path = tmp_path_factory.mktemp("hanging")
    # HangEnv's second step never returns; sessions are never reaped for being idle in the
    # test's lifetime.
    with http_server(
        tmp,
        ["envwire/Echo-v0", "test/HangInline-v0=envwire.testing.envs:HangEnv@inline"],
        ("--step-timeout", str(STEP_TIMEOUT)),
    ) as server:
        yield server


def url_of(server: ServerProcess) -> str:
    return f"http://{server.host}:{server.ports['http']}"


def test_500_websocket_sessions_then_clients_vanish(crowd_server: ServerProcess) -> None:
    base = url_of(crowd_server)
    ws_url = "ws" + base[4:] + "/envs/envwire/Echo-v0/ws"
    crowd = subprocess.Popen(
        [sys.executable, "-c", CROWD, ws_url, str(SESSIONS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert crowd.stdout is not None
        line = crowd.stdout.readline().split()
        assert line[:1] == ["READY"], crowd.stderr.read() if crowd.stderr else ""
        assert int(line[1]) == SESSIONS * 6 and int(line[2]) == SESSIONS  # no reply lost
        live = status(base)
        assert live["openenv"]["websocket"] == SESSIONS and live["sessions"] == SESSIONS
    finally:
        crowd.kill()  # every client vanishes at once, without a close frame
        crowd.wait(30)
        for pipe in (crowd.stdout, crowd.stderr):
            if pipe is not None:
                pipe.close()
    assert wait_until(lambda: status(base)["sessions"] == 0, PATIENCE), status(base)
    assert status(base)["openenv"] == {"websocket": 0, "http": 0, "mcp": 0}


def test_half_open_connection_is_dropped_by_keepalive_pings(
    pinging_server: ServerProcess,
) -> None:
    # This server never reaps idle sessions in the test's lifetime: only pings can end it.
    base = url_of(pinging_server)
    before = status(base)["sessions"]
    # A client that completes the handshake, then never reads or answers again.
    sock = socket.create_connection((pinging_server.host, pinging_server.ports["http"]))
    try:
        sock.sendall(
            b"GET /envs/envwire/Echo-v0/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        )
        assert sock.recv(4096).startswith(b"HTTP/1.1 101 ")
        assert wait_until(lambda: status(base)["sessions"] == before + 1, PATIENCE)
        # silence: pinged after 1 s, dropped when no pong came 5 s later
        assert wait_until(lambda: status(base)["sessions"] == before, PATIENCE), status(base)
    finally:
        sock.close()


def test_idle_http_session_is_reaped(reaping_server: ServerProcess) -> None:
    base = url_of(reaping_server)
    with httpx.Client(base_url=base) as http:
        token = http.post("/reset").headers["envwire-session"]
        assert status(base)["openenv"]["http"] == 1
        assert wait_until(lambda: status(base)["openenv"]["http"] == 0, IDLE + PATIENCE)
        gone = http.post(
            "/step", json={"action": {"message": "late"}}, headers={"envwire-session": token}
        )
        assert gone.status_code == 404


def test_idle_websocket_session_is_reaped_with_a_message(reaping_server: ServerProcess) -> None:
    base = url_of(reaping_server)
    with connect("ws" + base[4:] + "/ws") as ws:  # answers pings, but sends nothing
        notice = json.loads(ws.recv(timeout=IDLE + PATIENCE))
        assert notice["type"] == "error" and notice["data"]["code"] == "SESSION_ERROR"
        assert "without requests" in notice["data"]["message"]
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=PATIENCE)
    assert wait_until(lambda: status(base)["sessions"] == 0, PATIENCE)


def test_hung_inline_env_over_websocket(hanging_server: ServerProcess) -> None:
    base = url_of(hanging_server)
    with (
        connect("ws" + base[4:] + "/envs/test/HangInline-v0/ws") as ws,
        connect("ws" + base[4:] + "/ws") as bystander,
    ):
        bystander.send('{"type":"reset"}')
        bystander.recv(timeout=PATIENCE)
        ws.send('{"type":"reset","data":{"seed":0}}')
        ws.recv(timeout=PATIENCE)
        ws.send('{"type":"step","data":{"action":[0,[0,1]]}}')
        ws.recv(timeout=PATIENCE)
        ws.send('{"type":"step","data":{"action":[0,[0,1]]}}')  # hangs on step 2
        error = json.loads(ws.recv(timeout=STEP_TIMEOUT + PATIENCE))
        assert error["data"]["code"] == "EXECUTION_ERROR"
        assert "did not return within" in error["data"]["message"]
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=PATIENCE)
        bystander.send('{"type":"step","data":{"message":"still fine"}}')
        assert json.loads(bystander.recv(timeout=PATIENCE))["type"] == "observation"
    assert wait_until(lambda: status(base)["sessions"] == 0, PATIENCE)


def test_hung_inline_env_over_http(hanging_server: ServerProcess) -> None:
    base = url_of(hanging_server)
    with httpx.Client(base_url=f"{base}/envs/test/HangInline-v0", timeout=PATIENCE) as http:
        http.post("/reset", json={"seed": 0})
        http.post("/step", json={"action": {"action": [0, [0, 1]]}})
        hung = http.post("/step", json={"action": {"action": [0, [0, 1]]}})
        assert hung.status_code == 504
        assert (
            hung.json()["code"] == "env_timeout"
            and "did not return within" in hung.json()["detail"]
        )
    assert wait_until(lambda: status(base)["sessions"] == 0, PATIENCE)
