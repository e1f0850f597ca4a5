"""OpenEnv's own envs hosted as openenv-core's server hosts them."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction
from openenv.core.env_server.types import Observation, State

from envwire.errors import EnvError, InvalidArgumentError
from envwire.kinds.openenv_core.appmodule import OpenEnvTarget, StepCall, load_app
from envwire.kinds.openenv_core.gymenv import OpenEnvGymEnv, OpenEnvSpace, openenv_jsonable
from tests.openenv_envs.walk import MoveAction, PositionObservation, WalkEnvironment

# openenv-core 0.3.0 reads FastMCP's tool schema under its old name when it lists tools.
pytestmark = pytest.mark.filterwarnings("ignore:Accessing `Tool.inputSchema` is deprecated")


def walk_target(**changes: Any) -> OpenEnvTarget:
    base = OpenEnvTarget(WalkEnvironment, MoveAction, PositionObservation, name="WalkEnvironment")
    return dataclasses.replace(base, **changes)


@pytest.fixture(scope="module")
def notes() -> Any:
    env = OpenEnvGymEnv(load_app("tests.openenv_envs.notes:app"), "oe/Notes-v0")
    yield env
    env.close()


def test_reset_keywords_are_filtered_by_the_signature() -> None:
    env = OpenEnvGymEnv(walk_target())
    observation, info = env.reset(options={"start": 2, "episode_id": "e1", "unknown": 1})
    assert (observation.position, info) == (2, {})
    assert env.extension("state") == {"episode_id": "e1", "step_count": 0, "position": 2}
    observation, reward, terminated, truncated, _ = env.step(MoveAction(direction="right"))
    assert (observation.position, reward, terminated, truncated) == (3, 1.0, True, False)
    # Step keywords reach a step that accepts them.
    observation, *_ = env.step(StepCall(MoveAction(direction="left"), {"timeout_s": 2.5}))
    assert observation.metadata == {"timeout_s": 2.5}
    env.close()


def test_spaces_hold_the_models_and_metadata() -> None:
    env = OpenEnvGymEnv(walk_target())
    assert isinstance(env.action_space, OpenEnvSpace)
    assert env.action_space.model is MoveAction
    assert env.observation_space.state_model is State  # openenv-core's /schema state
    assert env.observation_space.about is not None
    assert env.observation_space.about.name == "WalkEnvironment"
    assert env.action_space.contains(StepCall(MoveAction(direction="left"), {}))
    assert env.action_space.contains(ListToolsAction())  # any action model may be sent
    assert not env.action_space.contains({"direction": "left"})
    env.close()


def test_an_mcp_env_steps_through_its_tools(notes: OpenEnvGymEnv) -> None:
    observation, _ = notes.reset(options={"episode_id": "n1"})
    assert type(observation) is Observation  # not the declared CallToolObservation
    assert observation.metadata == {"status": "ready"}
    call = CallToolAction(tool_name="add_note", arguments={"text": "hello"})
    observation, reward, terminated, *_ = notes.step(call)
    assert observation.result.data == 1
    assert (reward, terminated) == (0.0, False)
    listed, *_ = notes.step(ListToolsAction())
    assert [t.name for t in listed.tools] == ["add_note", "list_notes", "word_count", "fail"]
    assert notes.extension("state") == {"episode_id": "n1", "step_count": 2}


def test_mcp_requests_reach_the_env_tools(notes: OpenEnvGymEnv) -> None:
    listed = notes.extension("mcp", "tools/list", {})["result"]["tools"]
    assert [t["name"] for t in listed] == ["add_note", "list_notes", "word_count", "fail"]
    called = notes.extension(
        "mcp", "tools/call", {"name": "word_count", "arguments": {"text": "a b"}}
    )
    result = called["result"]
    assert result["data"] == {"words": 2, "chars": 3}
    assert result["structured_content"] == {"words": 2, "chars": 3}
    assert result["is_error"] is False
    assert result["content"][0]["type"] == "text"
    failed = notes.extension("mcp", "tools/call", {"name": "fail", "arguments": {"reason": "no"}})
    assert failed["error"]["code"] == -32603
    assert "no" in failed["error"]["message"]
    unknown = notes.extension("mcp", "tools/call", {"name": "nope"})
    assert unknown["error"]["code"] == -32603
    missing = notes.extension("mcp", "tools/call", {"arguments": {}})
    assert missing["error"] == {"code": -32602, "message": "Missing 'name' in params"}
    with pytest.raises(InvalidArgumentError):
        notes.extension("teleport")


def test_an_env_without_mcp_says_so() -> None:
    env = OpenEnvGymEnv(walk_target())
    answer = env.extension("mcp", "tools/list", {})
    assert answer == {"error": {"code": -32603, "message": "Environment does not support MCP"}}
    env.close()


def test_a_failing_factory_is_reported_with_its_name() -> None:
    def broken() -> WalkEnvironment:
        raise RuntimeError("no licence")

    with pytest.raises(EnvError, match=r"Environment factory 'broken' failed.*no licence"):
        OpenEnvGymEnv(walk_target(factory=broken, name="broken"))


def test_a_wrong_return_type_is_an_env_error() -> None:
    class Sloppy(WalkEnvironment):
        def reset(
            self, seed: int | None = None, episode_id: str | None = None, start: int = 0
        ) -> Any:
            return {"position": 0}

    env = OpenEnvGymEnv(walk_target(factory=Sloppy))
    with pytest.raises(EnvError, match="returned dict, expected an Observation"):
        env.reset()
    env.close()


class Pinned(Environment[MoveAction, PositionObservation, State]):
    """Records the thread of every call."""

    REQUIRES_SINGLE_THREAD_EXECUTOR = True
    threads: set[int] = set()  # noqa: RUF012

    def __init__(self) -> None:
        super().__init__()
        Pinned.threads.add(threading.get_ident())

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Any:
        Pinned.threads.add(threading.get_ident())
        return PositionObservation(position=0)

    def step(self, action: MoveAction, timeout_s: float | None = None, **kw: Any) -> Any:
        Pinned.threads.add(threading.get_ident())
        return PositionObservation(position=1)

    @property
    def state(self) -> State:
        return State()


def test_single_thread_envs_run_on_one_thread() -> None:
    target = walk_target(factory=Pinned, name="Pinned")
    envs = [OpenEnvGymEnv(target) for _ in range(2)]
    for env in envs:
        env.reset()
        env.step(MoveAction(direction="left"))
        env.close()
    assert len(Pinned.threads) == 1
    assert threading.get_ident() not in Pinned.threads


def test_tool_results_become_json_as_openenv_core_makes_them() -> None:
    @dataclasses.dataclass
    class Result:
        content: list[Any]
        is_error: bool

    class Opaque:
        __slots__ = ()

        def __str__(self) -> str:
            return "opaque"

    value = Result([State(step_count=1), (1, 2.5), {"k": None}], False)
    assert openenv_jsonable(value) == {
        "content": [{"episode_id": None, "step_count": 1}, [1, 2.5], {"k": None}],
        "is_error": False,
    }
    assert openenv_jsonable(Opaque()) == "opaque"
