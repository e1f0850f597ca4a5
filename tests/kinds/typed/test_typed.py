"""Typed envs in process: the base class, the adapter, transforms, tools and the built-ins."""

from __future__ import annotations

import uuid
from typing import Any

import gymnasium
import pytest
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action as OEAction
from openenv.core.env_server.types import Observation as OEObservation
from openenv.core.env_server.types import State as OEState

from envwire import spacecodec
from envwire.envs.coding import CodeAction, CodingEnv
from envwire.envs.connect4 import Connect4Action, Connect4Env, winner
from envwire.envs.echo import EchoAction, EchoEnv, EchoObservation
from envwire.errors import (
    ConfigError,
    EnvError,
    InvalidActionError,
    InvalidArgumentError,
    StateError,
    UnsupportedError,
)
from envwire.kinds.typed import (
    Compose,
    ModelSpace,
    RewardScaling,
    Tool,
    TypedGymEnv,
    as_gymnasium,
    is_typed_env,
    tool,
    wire_fields,
)
from envwire.registry import EnvSpec


def test_echo_wire_shapes() -> None:
    env = EchoEnv()
    first = env.reset(episode_id="e")
    assert wire_fields(first) == {"echoed_message": "Echo environment ready!", "message_length": 0}
    assert (first.reward, first.done) == (0.0, False)
    result = env.step(EchoAction(message="Hello, World!"))
    assert wire_fields(result) == {"echoed_message": "Hello, World!", "message_length": 13}
    assert result.reward == 1.3  # exactly, not 1.3000000000000003
    assert env.state.model_dump() == {"episode_id": "e", "step_count": 1}


def test_adapter_spaces_and_validation() -> None:
    env = as_gymnasium(EchoEnv())
    assert isinstance(env, TypedGymEnv)
    assert (
        env.action_space == ModelSpace(EchoAction)
        and repr(env.action_space) == "ModelSpace(EchoAction)"
    )
    assert EchoAction(message="x") in env.action_space
    assert {"message": "x"} not in env.action_space
    with pytest.raises(UnsupportedError):
        env.action_space.sample()
    spacecodec.check(env.action_space, EchoAction(message="ok"))
    with pytest.raises(InvalidActionError):
        spacecodec.check(env.action_space, {"message": "not a model"})
    obs, info = env.reset(seed=0, options={"episode_id": "a", "unknown_keyword": 1})
    assert isinstance(obs, EchoObservation) and info == {}
    # a mapping is validated into the model (for front ends that send plain JSON)
    assert env.step({"message": "abc"})[1] == pytest.approx(0.3)
    with pytest.raises(InvalidActionError, match="message: Field required"):
        env.step({})
    assert env.extension("state").step_count == 1
    with pytest.raises(InvalidArgumentError, match="unknown typed-env operation"):
        env.extension("nope")


def test_transforms_are_applied_by_the_host() -> None:
    env = as_gymnasium(EchoEnv(transform=RewardScaling()))
    env.reset()
    _, reward, *_ = env.step(EchoAction(message="Hello"))
    assert reward == pytest.approx(0.05)
    _, reward, *_ = env.step(EchoAction(message="x" * 300))
    assert reward == 1.0  # 30 / 10, clipped to [0, 1]
    twice = as_gymnasium(
        EchoEnv(transform=Compose(RewardScaling(), RewardScaling(divisor=0.5, high=5)))
    )
    twice.reset()
    assert twice.step(EchoAction(message="Hello"))[1] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="divisor"):
        RewardScaling(divisor=0)


def test_wrong_observation_type_is_an_env_error() -> None:
    class Broken(EchoEnv):
        def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
            return {"echoed_message": "not a model"}

    env = as_gymnasium(Broken())
    env.reset()
    with pytest.raises(EnvError, match="expected EchoObservation"):
        env.step(EchoAction(message="x"))


def test_tools() -> None:
    env = as_gymnasium(EchoEnv())
    specs = env.action_space.tools
    assert [s["name"] for s in specs] == ["echo_message"]
    assert specs[0]["inputSchema"]["required"] == ["message"]
    assert env.extension("call_tool", "echo_message", {"message": "m"}) == "m"
    with pytest.raises(InvalidArgumentError, match="unknown tool"):
        env.extension("call_tool", "nope", {})
    with pytest.raises(InvalidArgumentError, match="message: Field required"):
        env.extension("call_tool", "echo_message", {})

    class Reserved(EchoEnv):
        @tool(name="reset")
        def bad(self) -> None:
            """Shadows the API."""

    with pytest.raises(ValueError, match="reserved"):
        Reserved().tools()
    built = Tool.from_method(lambda a, b=2: a + b, "add")
    assert built.call({"a": 1}) == 3 and built.input_schema["required"] == ["a"]


def test_connect4_rules() -> None:
    env = Connect4Env()
    start = env.reset()
    assert start.board == [[0] * 7 for _ in range(6)] and start.next_player == 1
    for column in (0, 1, 0, 1, 0, 1):
        result = env.step(Connect4Action(column=column))
        assert not result.done and result.reward == 0.0
    win = env.step(Connect4Action(column=0))
    assert win.done and win.winner == 1 and win.reward == 1.0 and win.next_player == 2
    with pytest.raises(StateError):
        env.step(Connect4Action(column=3))
    env.reset()
    for _ in range(6):
        env.step(Connect4Action(column=6))
    with pytest.raises(InvalidActionError, match="column 6 is full"):
        env.step(Connect4Action(column=6))
    assert env.state.step_count == 6
    with pytest.raises(ValueError, match="less than or equal to 6"):
        Connect4Action(column=7)


def test_connect4_winner_detection() -> None:
    board = [[0] * 7 for _ in range(6)]
    assert winner(board) is None
    for i in range(4):
        board[5 - i][i] = 2
    assert winner(board) == 2
    full = [[1 if (r // 2 + c) % 2 else 2 for c in range(7)] for r in range(6)]
    assert winner(full) == 0


def test_coding_env_rewards_and_language() -> None:
    env = CodingEnv(wall_time=5, runs_per_episode=2)
    env.reset()
    ok = env.step(CodeAction(code="print(6 * 7)"))
    assert (ok.stdout, ok.stderr, ok.exit_code, ok.reward, ok.done) == ("42\n", "", 0, 1.0, False)
    failed = env.step(CodeAction(code="1 / 0"))
    assert failed.exit_code == 1 and failed.reward == 0.0 and failed.done
    assert "ZeroDivisionError" in failed.stderr
    assert env.state.last_exit_code == 1
    with pytest.raises(InvalidActionError, match="only 'python'"):
        env.step(CodeAction(code="puts 1", language="ruby"))
    with pytest.raises(ValueError):
        CodingEnv(runs_per_episode=0)


class OEAct(OEAction):
    value: int


class OEObs(OEObservation):
    doubled: int


class ForeignEnv(Environment[OEAct, OEObs, OEState]):
    """An env written against openenv-core's own base classes."""

    def __init__(self) -> None:
        super().__init__(transform=None)
        self._state = OEState(episode_id=None, step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> OEObs:
        self._state = OEState(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return OEObs(doubled=0)

    def step(self, action: OEAct, timeout_s: float | None = None, **kwargs: Any) -> OEObs:
        self._state.step_count += 1
        return OEObs(doubled=2 * action.value, reward=1.0)

    @property
    def state(self) -> OEState:
        return self._state


def test_openenv_core_environments_are_hosted_too() -> None:
    assert is_typed_env(ForeignEnv()) and not is_typed_env(object())
    env = as_gymnasium(ForeignEnv())
    assert env.action_space.model is OEAct and env.observation_space.state_model is OEState
    env.reset(options={"episode_id": "f"})
    obs, reward, *_ = env.step({"value": 4})
    assert obs.doubled == 8 and reward == 1.0
    assert env.extension("state").episode_id == "f"
    assert (
        env.observation_space.about is not None and env.observation_space.about.name == "ForeignEnv"
    )
    with pytest.raises(ConfigError, match=r"neither a gymnasium\.Env nor a typed env"):
        as_gymnasium(object())


def test_registry_hosts_typed_entry_points() -> None:
    env = EnvSpec("my/Echo-v0", "envwire.envs.echo:EchoEnv").make()
    assert isinstance(env, TypedGymEnv)
    made = gymnasium.make("envwire/Connect4-v0")
    assert isinstance(made.unwrapped, TypedGymEnv)
    expected = r"expected a gymnasium\.Env, a dm_env\.Environment or a typed env"
    with pytest.raises(ConfigError, match=expected):
        EnvSpec("bad", "envwire.kinds.typed.models:State").make()
    assert EnvSpec("envwire/Echo-v0", "gym:envwire/Echo-v0").resolved_isolation == "inline"
