"""OpenEnv-style envs served unmodified by ``envwire serve``, driven by openenv-core's clients.

The envs (``tests/openenv_envs``) are written from openenv-core's public interfaces in the
shapes of OpenEnv's own: an ``MCPEnvironment`` with FastMCP tools given to ``create_app`` (like
echo), an env directory with an ``openenv.yaml`` whose app gives an untyped ``Environment`` and
its models to ``create_app`` (like connect4), and an ``Environment[Act, Obs, State]`` class
named directly. They are served by naming them, as their authors wrote them.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction
from openenv.core.generic_client import GenericEnvClient
from openenv.core.mcp_client import MCPToolClient
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from envwire.testing import ServerProcess
from tests.frontends.openenv.conftest import http_server
from tests.openenv_envs.guess_env.models import GuessAction, GuessObservation
from tests.openenv_envs.walk import MoveAction

ENVS = (
    "oe/Notes-v0=tests.openenv_envs.notes:app",
    "oe/Guess-v0=tests/openenv_envs/guess_env",
    "oe/Walk-v0=tests.openenv_envs.walk:WalkEnvironment",
    "envwire/Echo-v0",
)

#: Seconds to wait for a server to start: the envs import openenv-core (and FastMCP) first,
#: seconds of CPU that take minutes on a loaded machine; the tests that start one get as long.
START = 300.0
pytestmark = pytest.mark.timeout(START + 60)


def _url(server: ServerProcess) -> str:
    return f"http://{server.host}:{server.ports['http']}"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("native")
    with http_server(tmp, ENVS, ("--step-timeout", "20"), start_timeout=START) as proc:
        yield _url(proc)


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("native-strict")
    with http_server(tmp, ENVS, ("--openenv-compat", "strict"), start_timeout=START) as proc:
        yield _url(proc)


def test_every_form_is_served_with_its_own_models(base: str) -> None:
    assert httpx.get(f"{base}/envs").json()["envs"] == [env.split("=")[0] for env in ENVS]
    guess = httpx.get(f"{base}/envs/oe/Guess-v0/schema").json()
    assert guess["action"] == GuessAction.model_json_schema()
    assert guess["observation"] == GuessObservation.model_json_schema()
    walk = httpx.get(f"{base}/envs/oe/Walk-v0/schema").json()
    assert walk["action"] == MoveAction.model_json_schema()
    notes = httpx.get(f"{base}/envs/oe/Notes-v0/metadata").json()
    assert notes["name"] == "NotesEnvironment"


def test_generic_client_plays_the_create_app_env(base: str) -> None:
    secret = random.Random(7).randint(0, 100)
    with GenericEnvClient(base_url=f"{base}/envs/oe/Guess-v0").sync() as env:
        first = env.reset(seed=7)
        assert first.observation["hint"] == "guess a number in 0..100" and not first.done
        low = env.step({"number": 0 if secret else 1})
        assert low.observation["hint"] in ("higher", "lower") and low.reward == 0
        won = env.step({"number": secret})
        assert won.done and won.reward == 1 and won.observation["guesses"] == 2
        assert env.state()["secret"] == secret and env.state()["step_count"] == 2
        refused = GenericEnvClient(base_url=f"{base}/envs/oe/Guess-v0").sync()
        with refused, pytest.raises(RuntimeError, match=r"1/1 sessions.*CAPACITY_REACHED"):
            refused.reset()  # create_app's default max_concurrent_envs is 1


def test_a_step_before_reset_reaches_the_env(base: str) -> None:
    # openenv-core hands every step to the env; the guess env answers with its default state.
    with GenericEnvClient(base_url=f"{base}/envs/oe/Guess-v0").sync() as env:
        assert env.step({"number": 5}).observation["hint"] == "lower"


def test_generic_typed_env_gets_reset_keywords(base: str) -> None:
    with GenericEnvClient(base_url=f"{base}/envs/oe/Walk-v0").sync() as env:
        assert env.reset(start=2).observation["position"] == 2
        moved = env.step({"direction": "right"})
        assert moved.done and moved.reward == 1.0 and moved.observation["position"] == 3
        assert env.state()["position"] == 3
    with GenericEnvClient(base_url=f"{base}/envs/oe/Walk-v0").sync() as env:
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            env.step({"direction": "up"})
        assert env.reset().observation["position"] == 0  # the session goes on


@pytest.mark.parametrize("env_id", ["oe/Notes-v0", "envwire/Echo-v0"])
def test_mcp_tool_client_in_both_modes(base: str, env_id: str) -> None:
    tool, args = ("add_note", {"text": "a b"}) if env_id == "oe/Notes-v0" else ("echo_message", {})
    args = args or {"message": "m"}

    async def main(production: bool) -> tuple[list[str], Any]:
        client = MCPToolClient(base_url=f"{base}/envs/{env_id}")
        client.use_production_mode = production
        try:
            await client.reset()
            names = [t.name for t in await client.list_tools()]
            return names, await client.call_tool(tool, **args)
        finally:
            await client.close()

    for production in (False, True):
        names, value = asyncio.run(main(production))
        assert tool in names
        assert value == (1 if env_id == "oe/Notes-v0" else "m")


def test_mcp_actions_and_state_of_an_mcp_env(base: str) -> None:
    with GenericEnvClient(base_url=f"{base}/envs/oe/Notes-v0").sync() as env:
        env.reset()
        listed = env.step(ListToolsAction().model_dump())
        names = {tool["name"] for tool in listed.observation["tools"]}
        assert names == {"add_note", "list_notes", "word_count", "fail"}
        env.step(CallToolAction(tool_name="add_note", arguments={"text": "x"}).model_dump())
        notes = env.step(CallToolAction(tool_name="list_notes", arguments={}).model_dump())
        assert notes.observation["result"]["data"] == ["x"]
        failed = env.step(CallToolAction(tool_name="fail", arguments={"reason": "r"}).model_dump())
        assert failed.observation["error"]["error_type"] == "execution_error"
        assert env.state()["step_count"] == 4  # the env counts its own steps


def test_mcp_endpoint_reaches_the_env_tools(base: str) -> None:
    rpc: dict[str, Any] = {"jsonrpc": "2.0", "id": 1}
    with httpx.Client(base_url=f"{base}/envs/oe/Notes-v0", timeout=30) as http:
        listed = http.post("/mcp", json={**rpc, "method": "tools/list"}).json()["result"]
        count = next(t for t in listed["tools"] if t["name"] == "word_count")
        assert count["input_schema"]["required"] == ["text"]
        params = {"name": "word_count", "arguments": {"text": "one two"}}
        called = http.post("/mcp", json={**rpc, "method": "tools/call", "params": params})
        result = called.json()["result"]
        assert result["structured_content"] == {"words": 2, "chars": 7}
        assert result["is_error"] is False
        params = {"name": "fail", "arguments": {"reason": "no"}}
        failed = http.post("/mcp", json={**rpc, "method": "tools/call", "params": params})
        assert failed.json()["error"]["code"] == -32603
        walk = httpx.post(f"{base}/envs/oe/Walk-v0/mcp", json={**rpc, "method": "tools/list"})
        assert walk.json()["result"] == {"tools": []}  # deliberate: no tools is an empty list


def test_strict_mode_answers_as_openenv_core(strict: str) -> None:
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    with httpx.Client(base_url=f"{strict}/envs/oe/Walk-v0", timeout=30) as http:
        assert http.post("/mcp", json=rpc).json()["error"]["code"] == -32603
        assert http.delete("/session").status_code == 404
        assert http.get("/sample").status_code == 404
        assert http.post("/reset", content=b'{"x": "\xff"}').status_code == 400
        # Stateless HTTP: every request gets a fresh env.
        assert http.post("/reset", json={"start": 2}).json()["observation"]["position"] == 2
        step = http.post("/step", json={"action": {"direction": "right"}}).json()
        assert step["observation"]["position"] == 1
    assert httpx.get(f"{strict}/envs").status_code == 404
    with connect(f"{strict.replace('http', 'ws', 1)}/envs/oe/Walk-v0/ws") as ws:
        ws.send(json.dumps({"type": "spaces"}))
        assert json.loads(ws.recv(timeout=10))["data"]["code"] == "UNKNOWN_TYPE"
        ws.send("[1]")  # JSON that is not an object ends the session, as in openenv-core
        assert json.loads(ws.recv(timeout=10))["data"]["code"] == "SESSION_ERROR"
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=10)


def test_default_mode_keeps_http_sessions(base: str) -> None:
    with httpx.Client(base_url=f"{base}/envs/oe/Walk-v0", timeout=30) as http:
        assert http.post("/reset", json={"start": 2}).json()["observation"]["position"] == 2
        step = http.post("/step", json={"action": {"direction": "left"}}).json()
        assert step["observation"]["position"] == 1
        assert http.delete("/session").status_code == 200
        assert http.post("/reset", content=b'{"x": "\xff"}').status_code == 400


def test_a_directory_without_manifest_is_refused(tmp_path: Path) -> None:
    from envwire.errors import ConfigError
    from envwire.registry import parse_env_arg

    with pytest.raises(ConfigError, match=r"openenv\.yaml"):
        parse_env_arg(f"oe/X-v0={tmp_path}")
    spec = parse_env_arg("tests/openenv_envs/guess_env")
    assert spec.id == "guess_env" and spec.openenv is not None
