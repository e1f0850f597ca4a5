"""Wire shapes of every HTTP endpoint, 422 bodies included (FastAPI's conventions)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest


@pytest.fixture
def http(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, timeout=30) as client:
        yield client


ECHO = "/envs/envwire/Echo-v0"


def open_session(http: httpx.Client, prefix: str = ECHO, **body: Any) -> str:
    response = http.post(f"{prefix}/reset", json=body)
    assert response.status_code == 200, response.text
    return response.headers["envwire-session"]


def test_health(http: httpx.Client) -> None:
    for path in ("/health", f"{ECHO}/health", "/envs/CartPole-v1/health"):
        response = http.get(path)
        assert response.status_code == 200
        health = response.json()
        assert health["status"] == "healthy" and set(health) <= {"status", "sandbox"}


def test_metadata(http: httpx.Client) -> None:
    typed = http.get(f"{ECHO}/metadata").json()
    assert set(typed) == {
        "name",
        "description",
        "readme_content",
        "version",
        "author",
        "documentation_url",
    }
    assert typed["name"] == "envwire/Echo-v0" and "0.1 per character" in typed["description"]
    gym = http.get("/envs/CartPole-v1/metadata").json()
    assert gym["name"] == "CartPole-v1" and "Discrete(2)" in gym["description"]


def test_schema_typed(http: httpx.Client) -> None:
    schema = http.get(f"{ECHO}/schema").json()
    assert set(schema) == {"action", "observation", "state"}
    assert schema["action"]["title"] == "EchoAction"
    assert schema["action"]["required"] == ["message"]
    assert schema["action"]["additionalProperties"] is False
    assert {"echoed_message", "message_length", "done", "reward", "metadata"} <= set(
        schema["observation"]["properties"]
    )
    assert {"episode_id", "step_count"} <= set(schema["state"]["properties"])
    coding = http.get("/envs/envwire/Coding-v0/schema").json()
    assert "last_exit_code" in coding["state"]["properties"]


def test_schema_gymnasium(http: httpx.Client) -> None:
    schema = http.get("/envs/CartPole-v1/schema").json()
    assert schema["action"]["properties"]["action"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": 1,
    }
    assert schema["action"]["x-envwire-space"]["type"] == "Discrete"
    observation = schema["observation"]
    assert set(observation["properties"]) == {"obs", "terminated", "truncated", "info"}
    assert observation["x-envwire-space"]["type"] == "Box"


def test_reset_opens_a_session_in_header_and_cookie(http: httpx.Client) -> None:
    response = http.post(f"{ECHO}/reset", json={"seed": 1, "episode_id": "e-1", "extra": True})
    assert response.status_code == 200
    assert response.json() == {
        "observation": {"echoed_message": "Echo environment ready!", "message_length": 0},
        "reward": 0.0,
        "done": False,
    }
    token = response.headers["envwire-session"]
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"envwire_session={token};")
    assert "Path=/envs/envwire/Echo-v0" in cookie and "HttpOnly" in cookie
    # the client kept the cookie: the episode goes on without the header
    step = http.post(f"{ECHO}/step", json={"action": {"message": "hello"}})
    assert step.json() == {
        "observation": {"echoed_message": "hello", "message_length": 5},
        "reward": 0.5,
        "done": False,
    }
    assert http.get(f"{ECHO}/state").json() == {"episode_id": "e-1", "step_count": 1}


def test_state_advances_across_requests_with_the_header(base: str) -> None:
    with httpx.Client(base_url=base) as first:
        token = open_session(first)
    with httpx.Client(base_url=base, headers={"envwire-session": token}) as other:
        for n in range(1, 4):
            other.post(f"{ECHO}/step", json={"action": {"message": "x" * n}, "timeout_s": 5})
            assert other.get(f"{ECHO}/state").json()["step_count"] == n


def test_requests_without_a_session_are_refused(base: str) -> None:
    with httpx.Client(base_url=base) as http:
        step = http.post(f"{ECHO}/step", json={"action": {"message": "x"}})
        assert step.status_code == 400
        assert "no session" in step.json()["detail"]
        assert step.json()["code"] == "no_session"
        assert http.get(f"{ECHO}/state").status_code == 400
        unknown = http.get(f"{ECHO}/state", headers={"envwire-session": "nope"})
        assert unknown.status_code == 404 and "expired" in unknown.json()["detail"]


def test_sessions_are_per_env(base: str) -> None:
    with httpx.Client(base_url=base) as http:
        token = open_session(http)
        response = http.get("/envs/envwire/Connect4-v0/state", headers={"envwire-session": token})
        assert response.status_code == 404


def test_session_endpoint_opens_describes_and_closes(base: str) -> None:
    with httpx.Client(base_url=base) as http:
        opened = http.post("/envs/CartPole-v1/session").json()
        assert opened["env_id"] == "CartPole-v1" and opened["describe"]["kind"] == "gymnasium"
        headers = {"envwire-session": opened["session_id"]}
        assert (
            http.get("/envs/CartPole-v1/session", headers=headers).json()["session"]["state"]
            == "new"
        )
        closed = http.delete("/envs/CartPole-v1/session", headers=headers)
        assert closed.json() == {"session_id": opened["session_id"], "closed": True}
        assert http.get("/envs/CartPole-v1/state", headers=headers).status_code == 404


def test_step_422_bodies(http: httpx.Client) -> None:
    open_session(http)
    cases: list[tuple[Any, list[dict[str, Any]]]] = [
        (
            {},
            [{"type": "missing", "loc": ["body", "action"], "msg": "Field required", "input": {}}],
        ),
        (
            {"action": 3},
            [
                {
                    "type": "dict_type",
                    "loc": ["body", "action"],
                    "msg": "Input should be a valid dictionary",
                    "input": 3,
                }
            ],
        ),
        (
            {"action": {"message": "x"}, "timeout_s": -1},
            [
                {
                    "type": "greater_than",
                    "loc": ["body", "timeout_s"],
                    "msg": "Input should be greater than 0",
                    "input": -1,
                    "ctx": {"gt": 0.0},
                }
            ],
        ),
    ]
    for body, detail in cases:
        response = http.post(f"{ECHO}/step", json=body)
        assert response.status_code == 422
        assert response.json()["detail"] == detail
    # the action's own fields: loc is the field path, as openenv-core reports it
    missing = http.post(f"{ECHO}/step", json={"action": {}}).json()["detail"]
    assert [(e["type"], e["loc"], e["msg"]) for e in missing] == [
        ("missing", ["message"], "Field required")
    ]
    extra = http.post(f"{ECHO}/step", json={"action": {"message": "x", "bogus": 1}}).json()[
        "detail"
    ]
    assert [(e["type"], e["loc"], e["input"]) for e in extra] == [("extra_forbidden", ["bogus"], 1)]
    wrong = http.post(f"{ECHO}/step", json={"action": {"message": 5}}).json()["detail"]
    assert wrong[0]["type"] == "string_type" and wrong[0]["input"] == 5


def test_invalid_json_and_non_object_bodies(http: httpx.Client) -> None:
    token = open_session(http)
    bad = http.post(f"{ECHO}/step", content=b"not json", headers={"envwire-session": token})
    assert bad.status_code == 422
    assert bad.json()["detail"] == [
        {
            "type": "json_invalid",
            "loc": ["body", 0],
            "msg": "JSON decode error",
            "input": {},
            "ctx": {"error": "Expecting value"},
        }
    ]
    listed = http.post(f"{ECHO}/reset", json=[])
    assert listed.status_code == 422
    assert listed.json()["detail"][0]["type"] == "model_attributes_type"
    assert listed.json()["detail"][0]["loc"] == ["body"]


def test_reset_422_bodies(http: httpx.Client) -> None:
    negative = http.post(f"{ECHO}/reset", json={"seed": -1}).json()["detail"]
    assert negative == [
        {
            "type": "greater_than_equal",
            "loc": ["body", "seed"],
            "msg": "Input should be greater than or equal to 0",
            "input": -1,
            "ctx": {"ge": 0},
        }
    ]
    text = http.post(f"{ECHO}/reset", json={"seed": "abc"}).json()["detail"]
    assert text[0]["type"] == "int_parsing" and text[0]["loc"] == ["body", "seed"]
    episode = http.post(f"{ECHO}/reset", json={"episode_id": 5}).json()["detail"]
    assert episode[0]["type"] == "string_type" and episode[0]["loc"] == ["body", "episode_id"]


def test_empty_reset_body_is_a_default_reset(http: httpx.Client) -> None:
    response = http.post(f"{ECHO}/reset")
    assert response.status_code == 200 and response.json()["reward"] == 0.0


def test_invalid_action_values_are_422_with_our_code(http: httpx.Client) -> None:
    open_session(http, "/envs/CartPole-v1", seed=0)
    response = http.post("/envs/CartPole-v1/step", json={"action": {"action": 7}})
    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "invalid_action"
    assert "not in Discrete(2)" in body["detail"][0]["msg"]
    assert body["detail"][0]["loc"] == ["body", "action"]
    shape = http.post("/envs/CartPole-v1/step", json={"action": {"action": [1, 2]}}).json()
    assert shape["code"] == "invalid_argument" and shape["detail"][0]["loc"] == ["action"]


def test_gymnasium_step_shape(http: httpx.Client) -> None:
    reset = http.post("/envs/CartPole-v1/reset", json={"seed": 0}).json()
    assert set(reset) == {"observation", "reward", "done"}
    assert reset["reward"] is None and reset["done"] is False
    assert set(reset["observation"]) == {"obs", "terminated", "truncated", "info"}
    assert set(reset["observation"]["obs"]) == {"__ndarray__", "dtype", "shape"}
    step = http.post("/envs/CartPole-v1/step", json={"action": {"action": 0}}).json()
    assert step["reward"] == 1.0 and step["observation"]["terminated"] is False
    sample = http.post("/envs/CartPole-v1/sample").json()
    assert sample["action"] in (0, 1)


def test_env_errors_have_status_and_code(http: httpx.Client) -> None:
    http.post("/envs/test/Raise-v0/reset", json={"seed": 0})
    http.post("/envs/test/Raise-v0/step", json={"action": {"action": [0, [0, 1]]}})
    failed = http.post("/envs/test/Raise-v0/step", json={"action": {"action": [0, [0, 1]]}})
    assert failed.status_code == 500
    assert (
        failed.json()["code"] == "env_error" and failed.json()["openenv_code"] == "EXECUTION_ERROR"
    )
    assert "RaiseEnv fails on purpose" in failed.json()["detail"]
    after = http.post("/envs/test/Raise-v0/step", json={"action": {"action": [0, [0, 1]]}})
    assert after.status_code == 409 and after.json()["code"] == "bad_state"


def test_unknown_paths_methods_and_envs(http: httpx.Client) -> None:
    assert http.get("/nope").status_code == 404
    assert http.get("/nope").json() == {"detail": "Not Found"}
    wrong = http.get("/step")
    assert wrong.status_code == 405 and wrong.json() == {"detail": "Method Not Allowed"}
    assert wrong.headers["allow"] == "POST"
    unknown = http.get("/envs/CartPole-v2/health")
    assert unknown.status_code == 404
    assert "did you mean 'CartPole-v1'" in unknown.json()["detail"]
    assert http.get("/ws").status_code == 400


def test_envs_status_and_index(http: httpx.Client) -> None:
    envs = http.get("/envs").json()
    assert envs["default"] == "envwire/Echo-v0" and "CartPole-v1" in envs["envs"]
    status = http.get("/status").json()
    assert {"sessions", "capacity", "openenv", "connections"} <= set(status)
    index = http.get(ECHO).json()
    assert index["env_id"] == "envwire/Echo-v0" and index["websocket"] == f"{ECHO}/ws"


def test_openapi_and_docs(http: httpx.Client) -> None:
    root = http.get("/openapi.json").json()
    assert root["info"]["version"] == "1.0.0"
    assert {"/reset", "/step", "/state", "/health", "/metadata", "/schema", "/mcp"} <= set(
        root["paths"]
    )
    assert "servers" not in root
    per_env = http.get("/envs/CartPole-v1/openapi.json").json()
    assert per_env["servers"] == [{"url": "/envs/CartPole-v1"}]
    assert per_env["components"]["schemas"]["Action"]["required"] == ["action"]
    docs = http.get(f"{ECHO}/docs")
    assert docs.status_code == 200 and docs.headers["content-type"].startswith("text/html")
    assert "/envs/envwire/Echo-v0/openapi.json" in docs.text


def test_mcp_over_http(http: httpx.Client) -> None:
    empty = http.post("/mcp", json={})
    assert empty.status_code == 200
    assert empty.json()["jsonrpc"] == "2.0" and empty.json()["error"]["code"] == -32600
    parse = http.post("/mcp", content=b"{").json()
    assert parse == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error", "data": None},
    }
    listed = http.post("/mcp", json={"jsonrpc": "2.0", "method": "tools/list", "id": 1}).json()
    assert listed["id"] == 1 and listed["result"]["tools"][0]["name"] == "echo_message"
    called = http.post(
        "/mcp",
        json={
            "jsonrpc": "2.0",
            "method": "tools/call",
            "id": "c",
            "params": {"name": "echo_message", "arguments": {"message": "hi"}},
        },
    ).json()
    # openenv-core's key names (FastMCP's result, dumped by field name).
    assert called["result"]["data"] == "hi" and called["result"]["is_error"] is False
    assert called["result"]["content"] == [
        {"type": "text", "text": "hi", "annotations": None, "meta": None}
    ]
    assert called["result"]["structured_content"] == {"result": "hi"}
    unknown = http.post(
        "/mcp", json={"jsonrpc": "2.0", "method": "tools/call", "id": 2, "params": {"name": "nope"}}
    ).json()
    assert unknown["error"]["code"] == -32603 and "Unknown tool" in unknown["error"]["message"]
    bad_args = http.post(
        "/mcp",
        json={
            "jsonrpc": "2.0",
            "method": "tools/call",
            "id": 3,
            "params": {"name": "echo_message", "arguments": {}},
        },
    ).json()
    assert bad_args["error"]["code"] == -32603 and "message" in bad_args["error"]["message"]
    missing = http.post("/mcp", json={"jsonrpc": "2.0", "method": "resources/list", "id": 4}).json()
    assert missing["error"] == {
        "code": -32601,
        "message": "Method not found: resources/list",
        "data": None,
    }
    assert http.post(
        "/envs/CartPole-v1/mcp", json={"jsonrpc": "2.0", "method": "tools/list", "id": 5}
    ).json()["result"] == {"tools": []}


def test_mcp_sessions_over_http(http: httpx.Client) -> None:
    created = http.post(
        "/envs/envwire/Coding-v0/mcp",
        json={"jsonrpc": "2.0", "method": "openenv/session/create", "id": 1},
    ).json()
    token = created["result"]["session_id"]
    call = {
        "jsonrpc": "2.0",
        "method": "tools/call",
        "id": 2,
        "params": {"name": "run_python", "arguments": {"code": "print('ok')"}, "session_id": token},
    }
    assert (
        http.post("/envs/envwire/Coding-v0/mcp", json=call).json()["result"]["data"]["stdout"]
        == "ok\n"
    )
    close = {
        "jsonrpc": "2.0",
        "method": "openenv/session/close",
        "id": 3,
        "params": {"session_id": token},
    }
    assert http.post("/envs/envwire/Coding-v0/mcp", json=close).json()["result"] == {
        "session_id": token,
        "closed": True,
    }
    again = http.post("/envs/envwire/Coding-v0/mcp", json=close).json()
    assert again["error"]["code"] == -32602


def test_keep_alive_and_head(http: httpx.Client) -> None:
    for _ in range(3):
        assert http.get("/health").status_code == 200
    head = http.head("/health")
    assert head.status_code == 200 and head.content == b""
