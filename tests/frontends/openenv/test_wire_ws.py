"""Wire shapes of the WebSocket protocol: every message type and every error code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect


@pytest.fixture
def ws_base(base: str) -> str:
    return "ws" + base[4:]


@pytest.fixture
def echo(ws_base: str) -> Iterator[ClientConnection]:
    with connect(f"{ws_base}/envs/envwire/Echo-v0/ws") as ws:
        yield ws


def call(ws: ClientConnection, message: Any) -> dict[str, Any]:
    ws.send(message if isinstance(message, str) else json.dumps(message))
    reply: dict[str, Any] = json.loads(ws.recv(timeout=30))
    return reply


def test_reset_step_state(echo: ClientConnection) -> None:
    assert call(echo, {"type": "reset", "data": {"seed": 1, "episode_id": "w1", "custom": 3}}) == {
        "type": "observation",
        "data": {
            "observation": {"echoed_message": "Echo environment ready!", "message_length": 0},
            "reward": 0.0,
            "done": False,
        },
    }
    assert call(echo, {"type": "step", "data": {"message": "hi"}}) == {
        "type": "observation",
        "data": {
            "observation": {"echoed_message": "hi", "message_length": 2},
            "reward": 0.2,
            "done": False,
        },
    }
    assert call(echo, {"type": "state"}) == {
        "type": "state",
        "data": {"episode_id": "w1", "step_count": 1},
    }
    assert call(echo, {"type": "reset"})["type"] == "observation"  # data is optional


def test_error_codes(echo: ClientConnection) -> None:
    invalid = call(echo, "nope")["data"]
    assert invalid["code"] == "INVALID_JSON" and invalid["message"].startswith(
        "Invalid JSON: Expecting value"
    )
    unknown = call(echo, {"type": "dance"})["data"]
    assert unknown == {"message": "Unknown message type: dance", "code": "UNKNOWN_TYPE"}
    assert call(echo, {"data": {}})["data"]["message"] == "Unknown message type: "
    before = call(echo, {"type": "step", "data": {"message": "x"}})["data"]
    assert before["code"] == "SESSION_ERROR" and "reset first" in before["message"]
    call(echo, {"type": "reset"})
    wrong = call(echo, {"type": "step", "data": {"message": 5}})["data"]
    assert wrong["code"] == "VALIDATION_ERROR"
    assert [(e["type"], e["loc"]) for e in wrong["errors"]] == [("string_type", ["message"])]
    missing = call(echo, {"type": "step"})["data"]
    assert missing["code"] == "VALIDATION_ERROR" and missing["errors"][0]["loc"] == ["data"]
    extra = call(echo, {"type": "state", "data": {}})["data"]
    assert extra["errors"][0]["type"] == "extra_forbidden"
    seed = call(echo, {"type": "reset", "data": {"seed": -1}})["data"]
    assert seed["code"] == "VALIDATION_ERROR" and seed["errors"][0]["loc"] == ["data", "seed"]
    not_object = call(echo, "[1]")["data"]
    assert not_object["code"] == "VALIDATION_ERROR"
    # after every error the session goes on
    assert call(echo, {"type": "step", "data": {"message": "ok"}})["data"]["reward"] == 0.2


def test_execution_error(ws_base: str) -> None:
    with connect(f"{ws_base}/envs/test/Raise-v0/ws") as ws:
        call(ws, {"type": "reset", "data": {"seed": 0}})
        call(ws, {"type": "step", "data": {"action": [0, [0, 1]]}})
        failed = call(ws, {"type": "step", "data": {"action": [0, [0, 1]]}})["data"]
        assert failed["code"] == "EXECUTION_ERROR" and failed["envwire_code"] == "env_error"


def test_close_message_closes_cleanly(echo: ClientConnection) -> None:
    echo.send(json.dumps({"type": "close"}))
    with pytest.raises(ConnectionClosed) as closed:
        echo.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000


def test_factory_error_for_unknown_env(ws_base: str) -> None:
    with connect(f"{ws_base}/envs/CartPole-v7/ws") as ws:
        error = call(ws, {"type": "reset"})
        assert error["type"] == "error"
        assert error["data"]["code"] == "FACTORY_ERROR"
        assert "did you mean 'CartPole-v1'" in error["data"]["message"]
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=10)


def test_mcp_message_and_mcp_websocket(echo: ClientConnection, ws_base: str) -> None:
    listed = call(
        echo, {"type": "mcp", "data": {"jsonrpc": "2.0", "method": "tools/list", "id": 7}}
    )
    assert listed["type"] == "mcp" and listed["data"]["id"] == 7
    assert listed["data"]["result"]["tools"][0]["input_schema"]["required"] == ["message"]
    bad = call(echo, {"type": "mcp", "data": {"method": "tools/list"}})
    assert bad["data"]["error"]["code"] == -32600
    with connect(f"{ws_base}/envs/envwire/Echo-v0/mcp") as mcp:
        mcp.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "method": "tools/call",
                    "id": 1,
                    "params": {"name": "echo_message", "arguments": {"message": "m"}},
                }
            )
        )
        assert json.loads(mcp.recv(timeout=30))["result"]["data"] == "m"
        mcp.send("{")
        assert json.loads(mcp.recv(timeout=30))["error"]["code"] == -32700


def test_extensions_spaces_and_sample(ws_base: str) -> None:
    with connect(f"{ws_base}/envs/CartPole-v1/ws") as ws:
        spaces = call(ws, {"type": "spaces"})
        assert spaces["type"] == "spaces" and spaces["data"]["kind"] == "gymnasium"
        assert spaces["data"]["action_space"] == {
            "type": "Discrete",
            "n": 2,
            "start": 0,
            "dtype": "int64",
        }
        assert spaces["data"]["arrays"] == "base64"
        sample = call(ws, {"type": "sample"})
        assert sample["type"] == "sample" and sample["data"]["action"] in (0, 1)
        reset = call(ws, {"type": "reset", "data": {"seed": 0}})["data"]
        assert reset["observation"]["obs"]["shape"] == [4] and reset["reward"] is None
        step = call(ws, {"type": "step", "data": {"action": 1}})["data"]
        assert step["observation"]["terminated"] is False and step["reward"] == 1.0


def test_fragmented_and_binary_messages(ws_base: str) -> None:
    with connect(f"{ws_base}/envs/envwire/Echo-v0/ws") as ws:
        ws.send(iter(['{"type":', '"reset"}']))  # a fragmented text message
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"
        # A binary frame ends the session, as in openenv-core (which reads only text).
        ws.send(b'{"type":"state"}')
        error = json.loads(ws.recv(timeout=10))
        assert error["type"] == "error" and error["data"]["code"] == "SESSION_ERROR"
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=10)


def test_root_ws_serves_the_first_env(ws_base: str) -> None:
    with connect(f"{ws_base}/ws") as ws:
        assert call(ws, {"type": "spaces"})["data"]["env_id"] == "envwire/Echo-v0"


def test_bad_handshakes(base: str) -> None:
    import httpx

    with httpx.Client(base_url=base) as http:
        headers = {"upgrade": "websocket", "connection": "Upgrade", "sec-websocket-version": "8"}
        refused = http.get(
            "/ws", headers={**headers, "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ=="}
        )
        assert refused.status_code == 400 and "Sec-WebSocket-Version" in refused.json()["detail"]
    with httpx.Client(base_url=base) as http:
        headers = {"upgrade": "websocket", "connection": "Upgrade", "sec-websocket-version": "13"}
        assert http.get("/ws", headers={**headers, "sec-websocket-key": "short"}).status_code == 400
    with httpx.Client(base_url=base) as http:
        headers = {"upgrade": "websocket", "connection": "Upgrade", "sec-websocket-version": "13"}
        assert (
            http.get(
                "/health", headers={**headers, "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ=="}
            ).status_code
            == 404
        )


def test_client_pings_are_answered_during_a_long_step(ws_base: str) -> None:
    # openenv-core's client pings every 20 s and drops a connection whose pong is 20 s late;
    # here it pings every 0.2 s and waits 1 s, while one step takes 1.6 s (the coding env's
    # default 10 s wall time leaves the sandbox room to start on a loaded machine).
    url = f"{ws_base}/envs/envwire/Coding-v0/ws"
    with connect(url, ping_interval=0.2, ping_timeout=1.0) as ws:
        call(ws, {"type": "reset"})
        slow = call(
            ws, {"type": "step", "data": {"code": "import time\ntime.sleep(1.6)\nprint('done')"}}
        )
        assert slow["type"] == "observation" and slow["data"]["observation"]["stdout"] == "done\n"
        assert call(ws, {"type": "state"})["data"]["step_count"] == 1
