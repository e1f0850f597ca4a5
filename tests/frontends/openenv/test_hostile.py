"""The OpenEnv front end against a hostile client: JSON nested too deep, a message type that is
not a string, lone surrogates, and a client that sends without reading its replies."""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from envwire.testing import ServerProcess
from tests.frontends.openenv.conftest import http_server

DEEP = "[" * 5000 + "]" * 5000
ECHO = "/envs/envwire/Echo-v0"


@pytest.fixture
def echo(base: str) -> Iterator[ClientConnection]:
    with connect(f"ws{base[4:]}{ECHO}/ws") as ws:
        yield ws


def call(ws: ClientConnection, text: str) -> dict[str, Any]:
    ws.send(text)
    reply: dict[str, Any] = json.loads(ws.recv(timeout=30))
    return reply


def test_deep_json_over_http_is_400_and_json_rpc_parse_error(base: str) -> None:
    with httpx.Client(base_url=base, timeout=30) as http:
        reply = http.post(f"{ECHO}/reset", content='{"seed":' + DEEP + "}")
        assert reply.status_code == 400
        assert reply.json() == {"detail": "There was an error parsing the body"}
        session = http.post(f"{ECHO}/reset", json={}).headers["envwire-session"]
        body = '{"action":{"message":' + DEEP + "}}"
        reply = http.post(f"{ECHO}/step", content=body, headers={"envwire-session": session})
        assert reply.status_code == 400
        reply = http.post(f"{ECHO}/mcp", content=DEEP)
        assert reply.status_code == 200 and reply.json()["error"]["code"] == -32700
        # the connection and the session go on
        step = {"action": {"message": "still here"}}
        reply = http.post(f"{ECHO}/step", json=step, headers={"envwire-session": session})
        assert reply.status_code == 200, reply.text
        assert reply.json()["observation"]["echoed_message"] == "still here"


def test_deep_json_and_odd_types_over_the_websocket_keep_the_session(
    echo: ClientConnection,
) -> None:
    assert call(echo, '{"type":"reset"}')["type"] == "observation"
    error = call(echo, DEEP)["data"]
    assert error["code"] == "INVALID_JSON" and "nested deeper than 100 levels" in error["message"]
    error = call(echo, '{"type":"step","data":{"message":' + DEEP + "}}")["data"]
    assert error["code"] == "INVALID_JSON"
    for kind in ('["step"]', '{"step":1}'):
        error = call(echo, '{"type":' + kind + ',"data":{}}')["data"]
        assert error["code"] == "UNKNOWN_TYPE", error
        assert error["message"].startswith("Unknown message type: ")
    reply = call(echo, '{"type":"step","data":{"message":"ok"}}')
    assert reply["data"]["observation"]["echoed_message"] == "ok"
    assert call(echo, '{"type":"state"}')["data"]["step_count"] == 1


def test_a_lone_surrogate_is_echoed_as_its_escape(base: str, echo: ClientConnection) -> None:
    call(echo, '{"type":"reset"}')
    echo.send('{"type":"step","data":{"message":"a\\ud800b"}}')
    raw = echo.recv(timeout=30)
    assert "\\ud800" in raw  # written back as the escape it came in as
    assert json.loads(raw)["data"]["observation"]["echoed_message"] == "a\ud800b"
    assert call(echo, '{"type":"state"}')["data"]["step_count"] == 1
    with httpx.Client(base_url=base, timeout=30) as http:
        session = http.post(f"{ECHO}/reset", json={}).headers["envwire-session"]
        body = '{"action":{"message":"\\udfff"}}'
        reply = http.post(f"{ECHO}/step", content=body, headers={"envwire-session": session})
        assert reply.status_code == 200, reply.text
        assert json.loads(reply.content)["observation"]["echoed_message"] == "\udfff"
        state = http.get(f"{ECHO}/state", headers={"envwire-session": session}).json()
        assert state["step_count"] == 1


# -- backpressure -----------------------------------------------------------------------------

SEND_TIMEOUT = 2.0
MAX_QUEUED = 256 * 1024
#: A generous ceiling for what a client that never reads can make the server hold: the socket
#: buffers of loopback (a few MiB each way), the read-ahead queue and one reply.
HELD_CEILING = 48 * 1024 * 1024


@pytest.fixture(scope="module")
def strict_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    tmp = tmp_path_factory.mktemp("backpressure")
    settings = {"send_timeout": SEND_TIMEOUT, "max_queued": MAX_QUEUED}
    server = http_server(tmp, ("envwire/Echo-v0",), **settings)
    server.command[3:3] = ["--log-level", "INFO"]  # before the subcommand
    with server:
        yield server


def rss_kib(server: ServerProcess) -> int:
    assert server.process is not None
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def frame(payload: bytes) -> bytes:
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    size = len(payload)
    head = bytes([0x81, 0x80 | 126]) + struct.pack("!H", size) if size < 65536 else b""
    assert head, "frames here stay under 64 KiB"
    return head + mask + masked


def flood(sock: socket.socket, message: bytes, seconds: float) -> int:
    """Send ``message`` over and over without reading, until the server has taken nothing for
    one second (it stopped reading) or ``seconds`` pass; returns the bytes it took."""
    sock.setblocking(False)
    sent, stalled_since, deadline = 0, None, time.monotonic() + seconds
    pending = memoryview(message)
    while time.monotonic() < deadline:
        try:
            n = sock.send(pending)
        except BlockingIOError:
            n = 0
        if n:
            sent, stalled_since = sent + n, None
            pending = pending[n:] or memoryview(message)
            continue
        stalled_since = stalled_since or time.monotonic()
        if time.monotonic() - stalled_since > 1.0:
            break
        time.sleep(0.01)
    return sent


def server_status(server: ServerProcess) -> dict[str, Any]:
    with httpx.Client(timeout=30) as http:
        result: dict[str, Any] = http.get(
            f"http://{server.host}:{server.ports['http']}/status"
        ).json()
    return result


def test_a_websocket_client_that_never_reads_is_held_back_then_dropped(
    strict_server: ServerProcess,
) -> None:
    port = strict_server.ports["http"]
    before = rss_kib(strict_server)
    key = base64.b64encode(os.urandom(16)).decode()
    step = frame(json.dumps({"type": "step", "data": {"message": "x" * 60_000}}).encode())
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            f"GET {ECHO}/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
            + frame(b'{"type":"reset"}')
        )
        sent = flood(sock, step, seconds=60)
        held = rss_kib(strict_server) - before
        print(f"the server took {sent} bytes, then stopped reading; its RSS grew {held} KiB")
        # The server stopped reading: the client's sends block, as openenv-core's do. Before
        # the bound, the same client drove a server to gigabytes in seconds.
        assert sent < HELD_CEILING, sent
        assert held * 1024 < HELD_CEILING, held
        # The replies are not drained: after the send timeout the server drops the client.
        assert strict_server.wait_for(
            lambda: server_status(strict_server)["openenv"]["websocket"] == 0, timeout=120
        )
    assert strict_server.wait_for(
        lambda: any("did not read its replies" in line for line in strict_server.output),
        timeout=10,
    )
    [line] = [x for x in strict_server.output if "did not read its replies" in x]
    assert "envwire.http ('127.0.0.1'," in line  # with the peer's address
    # and what it held is given back
    assert rss_kib(strict_server) - before < HELD_CEILING // 1024


def test_an_http_client_that_never_reads_is_dropped(strict_server: ServerProcess) -> None:
    port = strict_server.ports["http"]
    # Pipelined requests for a large response (the OpenAPI document, about 7 KB): the server
    # answers them until the socket buffers are full, then waits at most the send timeout.
    request = f"GET {ECHO}/openapi.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sent = flood(sock, request * 200, seconds=60)
        assert sent < HELD_CEILING
        assert strict_server.wait_for(
            lambda: any("did not read a response" in line for line in strict_server.output),
            timeout=120,
        )
    with httpx.Client(timeout=30) as http:  # everyone else is still served
        assert http.get(f"http://127.0.0.1:{port}/health").status_code == 200
