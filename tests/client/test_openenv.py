"""Our OpenEnv client: URL forms, error mapping, against an openenv-core server, the launcher."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import gymnasium
import httpx
import pytest

import envwire
from envwire.client.openenv import TypedClient, base_url, rpc_result
from envwire.envs.echo import EchoObservation
from envwire.errors import (
    InvalidActionError,
    InvalidArgumentError,
    RemoteError,
    StateError,
    TransportError,
)
from envwire.jsonio import JsonObject, JsonValue
from envwire.kinds.typed import State
from envwire.launcher import launch

ROOT = Path(__file__).resolve().parents[2]
FORK_BOMB = (
    "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
)


def test_rpc_errors_become_remote_errors_whatever_their_shape() -> None:
    assert rpc_result({"jsonrpc": "2.0", "result": {"data": 3}, "id": 1}, "m") == {"data": 3}
    with pytest.raises(RemoteError, match="tools/call: no such tool") as caught:
        rpc_result({"error": {"code": -32601, "message": "no such tool"}}, "tools/call")
    assert caught.value.remote_code == "-32601"
    with pytest.raises(RemoteError, match="tools/list: broken"):  # a peer's bare string
        rpc_result({"error": "broken"}, "tools/list")


class _Tools:
    """A connection whose MCP answers are given (the rest of the protocol is not used)."""

    url = "fake://tools"

    def __init__(self, result: JsonValue) -> None:
        self.result = result
        self.calls: list[tuple[str, JsonObject | None]] = []

    def mcp(self, method: str, params: JsonObject | None = None) -> JsonValue:
        self.calls.append((method, params))
        return self.result

    def close(self) -> None:
        pass


def test_tool_listing_keeps_the_tool_objects_only() -> None:
    tools = [{"name": "echo"}, "junk", {"name": "add"}]
    client = TypedClient(_Tools({"tools": tools}))  # type: ignore[arg-type]
    assert client.list_tools() == [{"name": "echo"}, {"name": "add"}]
    assert TypedClient(_Tools({"tools": "junk"})).list_tools() == []  # type: ignore[arg-type]
    assert TypedClient(_Tools(None)).list_tools() == []  # type: ignore[arg-type]
    called = _Tools({"data": [1, 2]})
    assert TypedClient(called).call_tool("add", a=1, b=2) == [1, 2]  # type: ignore[arg-type]
    assert called.calls == [("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("ws://h:1", ("ws", "ws://h:1")),
        ("ws://h:1/", ("ws", "ws://h:1")),
        ("http://h:1/envs/CartPole-v1", ("http", "http://h:1/envs/CartPole-v1")),
        ("http://h:1/envs/envwire/Echo-v0/ws", ("http", "http://h:1/envs/envwire/Echo-v0")),
        ("wss://h/envwire/Echo-v0", ("wss", "wss://h/envs/envwire/Echo-v0")),
    ],
)
def test_url_forms(url: str, expected: tuple[str, str]) -> None:
    assert base_url(url) == expected


def test_bad_urls() -> None:
    for url in ("ftp://h/x", "ws:///x"):
        with pytest.raises(InvalidArgumentError):
            base_url(url)
    with pytest.raises(TransportError):
        envwire.make("ws://127.0.0.1:9/envs/x", timeout=2)


@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_typed_client(base: str, scheme: str) -> None:
    url = f"{scheme}{base[4:]}/envs/envwire/Echo-v0"
    with envwire.make(url, observation_type=EchoObservation, state_type=State) as env:
        assert isinstance(env, TypedClient)
        assert (
            env.metadata["name"] == "envwire/Echo-v0"
            and env.schema["action"]["title"] == "EchoAction"
        )
        with pytest.raises(StateError):
            env.step({"message": "early"})
        first = env.reset(episode_id="t")
        assert isinstance(first.observation, EchoObservation)
        result = env.step({"message": "four"})
        assert result.observation.message_length == 4 and result.reward == 0.4
        assert env.state() == State(episode_id="t", step_count=1)
        assert env.call_tool("echo_message", message="x") == "x"
        assert [t["name"] for t in env.list_tools()] == ["echo_message"]
        with pytest.raises(InvalidArgumentError):
            env.step({"message": 1})


@pytest.mark.parametrize("scheme", ["ws", "http"])
def test_gymnasium_client_passes_check_env(base: str, scheme: str) -> None:
    from gymnasium.utils.env_checker import check_env

    env = envwire.make(f"{scheme}{base[4:]}/envs/envwire/Catch-v0")
    try:
        assert isinstance(env, gymnasium.Env)
        check_env(env.unwrapped, skip_render_check=True)
        env.reset(seed=0)
        with pytest.raises(InvalidActionError):
            env.step(9)
    finally:
        env.close()


def test_gymnasium_make_remote(base: str) -> None:
    env = gymnasium.make("envwire/Remote-v0", url=f"ws{base[4:]}/envs/CartPole-v1")
    try:
        obs, _ = env.reset(seed=0)
        assert obs.shape == (4,)
    finally:
        env.close()


def test_fork_bomb_through_the_server_costs_one_error(base: str) -> None:
    with envwire.make(f"ws{base[4:]}/envs/test/QuickCoding-v0") as env:
        env.reset()
        bomb = env.step({"code": FORK_BOMB})
        assert bomb.observation["exit_code"] != 0 and bomb.reward == 0.0 and bomb.done
        env.reset()
        assert env.step({"code": "print('alive')"}).observation["stdout"] == "alive\n"
    health = httpx.get(f"{base}/health").json()
    assert health["status"] == "healthy" and health["sandbox"]["runs"] == 8  # probed by now


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_our_client_against_openenv_cores_own_server() -> None:
    port = free_port()
    code = (
        "import uvicorn\nfrom tests.frontends.openenv.oe_server import app\n"
        f"uvicorn.run(app, host='127.0.0.1', port={port}, log_level='warning')"
    )
    env_vars = dict(os.environ, ENABLE_WEB_INTERFACE="false")
    server = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env_vars)
    try:
        # importing openenv-core (FastAPI, gradio) takes ~40 s on a loaded 2-core machine
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, "openenv-core's server exited"

            try:
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        with envwire.make(f"ws://127.0.0.1:{port}") as env:
            assert isinstance(env, TypedClient) and env.schema == {}
            env.reset()
            assert env.step({"message": "hey"}).observation == {
                "echoed_message": "hey",
                "message_length": 3,
            }
    finally:
        server.terminate()
        server.wait(30)


def test_launcher_local_process() -> None:
    launched = launch("envwire/Echo-v0", protocol="http")
    try:
        assert launched.url.startswith("http://127.0.0.1:") and launched.url.endswith(
            "/envs/envwire/Echo-v0"
        )
        assert launched.reset().observation["message_length"] == 0
        assert launched.step({"message": "ab"}).reward == 0.2
    finally:
        launched.close()
    with pytest.raises(httpx.ConnectError):  # the server was stopped with the client
        httpx.get(launched.url.replace("/envs/envwire/Echo-v0", "/health"), timeout=2)


def test_launcher_context_manager_gives_a_gymnasium_env() -> None:
    with launch("CartPole-v1", image="envwire/not-an-image:none") as env:  # no engine: local
        assert isinstance(env, gymnasium.Env)
        obs, _ = env.reset(seed=1)
        assert obs.shape == (4,)


def test_websocket_pipelining_keeps_order_and_isolates_errors(base: str) -> None:
    import numpy as np

    env = envwire.make(f"ws{base[4:]}/envs/CartPole-v1")
    local = gymnasium.make("CartPole-v1")
    try:
        env.reset(seed=2)
        local.reset(seed=2)
        remote = env.unwrapped
        for action in (1, 0, 7, 1):  # 7 is not in Discrete(2): its own reply is the error
            remote.step_async(action)
        for action in (1, 0):
            np.testing.assert_array_equal(remote.step_wait()[0], local.step(action)[0])
        with pytest.raises(InvalidActionError):
            remote.step_wait()
        np.testing.assert_array_equal(remote.step_wait()[0], local.step(1)[0])
    finally:
        env.close()
