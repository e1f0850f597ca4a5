"""openenv-core's own clients and tools, unmodified, against ``envwire serve``."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
import time
from typing import Any

import httpx
import numpy as np
import pytest
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.types import Action, Observation, State
from openenv.core.generic_client import GenericEnvClient
from openenv.core.mcp_client import MCPToolClient

from envwire.testing import ServerProcess
from tests.frontends.openenv.conftest import http_server


class EchoAction(Action):
    message: str


class EchoObservation(Observation):
    echoed_message: str
    message_length: int = 0


class EchoClient(EnvClient[EchoAction, EchoObservation, State]):
    """A typed client written the way OpenEnv's env packages write theirs."""

    def _step_payload(self, action: EchoAction) -> dict[str, Any]:
        return {"message": action.message}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[EchoObservation]:
        observation = EchoObservation(
            **payload["observation"], reward=payload.get("reward"), done=payload.get("done", False)
        )
        return StepResult(
            observation=observation, reward=payload.get("reward"), done=payload["done"]
        )

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(**payload)


def sessions(base: str) -> int:
    count: int = httpx.get(f"{base}/status").json()["sessions"]
    return count


def test_generic_client_sync_reset_step_state_close(base: str) -> None:
    before = sessions(base)
    with GenericEnvClient(base_url=f"{base}/envs/envwire/Echo-v0").sync() as env:
        first = env.reset(seed=3, episode_id="episode-7")
        assert first.observation == {
            "echoed_message": "Echo environment ready!",
            "message_length": 0,
        }
        assert (first.reward, first.done) == (0.0, False)
        result = env.step({"message": "Hello, World!"})
        assert result.observation == {"echoed_message": "Hello, World!", "message_length": 13}
        assert result.reward == 1.3
        assert result.done is False
        env.step({"message": "again"})
        assert env.state() == {"episode_id": "episode-7", "step_count": 2}
        env.reset()
        assert env.state()["step_count"] == 0
        assert sessions(base) == before + 1
    deadline = time.monotonic() + 10  # close() frees the session on the server
    while sessions(base) != before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sessions(base) == before


def test_generic_client_async(base: str) -> None:
    async def main() -> tuple[Any, Any, Any]:
        async with GenericEnvClient(base_url=f"{base}/envs/envwire/Connect4-v0") as env:
            first = await env.reset(episode_id="g1")
            moved = await env.step({"column": 3})
            state = await env.state()
            return first, moved, state

    first, moved, state = asyncio.run(main())
    assert first.observation["board"] == [[0] * 7 for _ in range(6)]
    assert first.observation["next_player"] == 1 and first.observation["winner"] is None
    assert moved.observation["board"][5][3] == 1 and moved.observation["next_player"] == 2
    assert (moved.reward, moved.done) == (0.0, False)
    assert state == {"episode_id": "g1", "step_count": 1}


def test_generic_client_error_paths(base: str) -> None:
    with GenericEnvClient(base_url=f"{base}/envs/envwire/Echo-v0").sync() as env:
        with pytest.raises(RuntimeError, match=r"reset first.*SESSION_ERROR"):
            env.step({"message": "too early"})
        env.reset()
        with pytest.raises(
            RuntimeError, match=r"message: Input should be a valid string.*VALIDATION_ERROR"
        ):
            env.step({"message": 5})
        with pytest.raises(RuntimeError, match=r"Extra inputs are not permitted.*VALIDATION_ERROR"):
            env.step({"message": "x", "volume": 11})
        assert env.step({"message": "still here"}).observation["message_length"] == 10


def test_generic_client_illegal_connect4_move_is_an_error(base: str) -> None:
    with GenericEnvClient(base_url=f"{base}/envs/envwire/Connect4-v0").sync() as env:
        env.reset()
        for _ in range(6):
            env.step({"column": 0})
        with pytest.raises(RuntimeError, match=r"column 0 is full.*VALIDATION_ERROR"):
            env.step({"column": 0})
        with pytest.raises(RuntimeError, match="less than or equal to 6"):
            env.step({"column": 7})
        assert env.step({"column": 1}).observation["board"][5][1] == 1


def test_generic_client_unknown_env_gets_factory_error(base: str) -> None:
    with (
        GenericEnvClient(base_url=f"{base}/envs/envwire/Ech-v0").sync() as env,
        pytest.raises(RuntimeError, match=r"did you mean 'envwire/Echo-v0'.*FACTORY_ERROR"),
    ):
        env.reset()


def test_generic_client_drives_a_gymnasium_env(base: str) -> None:
    import gymnasium

    local = gymnasium.make("CartPole-v1")
    expected, _ = local.reset(seed=5)
    with GenericEnvClient(base_url=f"{base}/envs/CartPole-v1").sync() as env:
        result = env.reset(seed=5)
        packed = result.observation["obs"]
        assert packed["dtype"] == "float32" and packed["shape"] == [4]
        obs = np.frombuffer(base64.b64decode(packed["__ndarray__"]), np.float32)
        np.testing.assert_array_equal(obs, expected)
        for _ in range(3):
            result = env.step({"action": 1})
            want = local.step(1)
            got = np.frombuffer(
                base64.b64decode(result.observation["obs"]["__ndarray__"]), np.float32
            )
            np.testing.assert_array_equal(got, want[0])
            assert result.reward == want[1]
        assert env.state()["step_count"] == 3


def test_typed_env_client_subclass(base: str) -> None:
    with EchoClient(base_url=f"{base}/envs/envwire/Echo-v0").sync() as env:
        env.reset()
        result = env.step(EchoAction(message="typed"))
        assert isinstance(result.observation, EchoObservation)
        assert result.observation.echoed_message == "typed"
        assert result.observation.reward == 0.5
        assert env.state().step_count == 1


def test_reward_scaling_transform(base: str) -> None:
    with EchoClient(base_url=f"{base}/envs/test/ScaledEcho-v0").sync() as env:
        env.reset()
        assert env.step(EchoAction(message="Hello")).reward == 0.05  # 0.5 / 10
        assert env.step(EchoAction(message="x" * 500)).reward == 1.0  # 50 / 10, clipped


def test_root_paths_serve_the_first_env(base: str) -> None:
    with GenericEnvClient(base_url=base).sync() as env:
        env.reset()
        assert env.step({"message": "root"}).observation["echoed_message"] == "root"


def test_capacity_reached(tmp_path: Any) -> None:
    with http_server(tmp_path, ["envwire/Echo-v0"], ("--capacity", "1")) as server:
        url = f"http://{server.host}:{server.ports['http']}"
        with GenericEnvClient(base_url=url).sync() as first:
            first.reset()
            with GenericEnvClient(base_url=url).sync() as second:  # noqa: SIM117
                with pytest.raises(RuntimeError, match=r"capacity.*CAPACITY_REACHED"):
                    second.reset()
            first.step({"message": "the first session goes on"})


def test_mcp_tool_client_production_mode(base: str) -> None:
    async def main() -> tuple[list[Any], Any, Any]:
        client = MCPToolClient(base_url=f"{base}/envs/envwire/Coding-v0")
        client.use_production_mode = True
        try:
            tools = await client.list_tools()
            result = await client.call_tool("run_python", code="print(2 ** 10)")
            failed = await client.call_tool("run_python", code="raise SystemExit(3)")
        finally:
            await client.close()
        return tools, result, failed

    tools, result, failed = asyncio.run(main())
    assert [t.name for t in tools] == ["run_python"]
    assert tools[0].input_schema["required"] == ["code"]
    assert result == {"stdout": "1024\n", "stderr": "", "exit_code": 0}
    assert failed["exit_code"] == 3


@pytest.mark.parametrize("path", ["", "/envs/CartPole-v1"])
def test_openenv_validate_cli(server: ServerProcess, base: str, path: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "openenv.cli", "validate", "--url", f"{base}{path}"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["passed"] is True and report["mode"] == "simulation"
    assert report["standard_profile"] == "openenv-http/1.x"


@pytest.mark.parametrize("env_id", ["envwire/Coding-v0", "envwire/Connect4-v0", "test/Dict-v0"])
def test_openenv_validate_every_env(base: str, env_id: str) -> None:
    from openenv.cli._validation import validate_running_environment

    report = validate_running_environment(f"{base}/envs/{env_id}", timeout_s=30)
    assert report["passed"] is True, report["summary"]
