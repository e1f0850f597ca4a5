"""The sans-IO codec of the GymGodot protocol: every message, both roles, malformed input."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envwire.errors import InvalidArgumentError, ProtocolError, StateError
from envwire.protocols.godot.messages import (
    CloseCommand,
    Command,
    ErrorReply,
    GameSide,
    GymSide,
    InitObservation,
    Phase,
    RenderCommand,
    RenderResult,
    Reply,
    ResetCommand,
    StepCommand,
    StepResult,
    decode_command,
    decode_reply,
    encode_command,
    encode_reply,
    godot_error_name,
)

# --- commands -------------------------------------------------------------------------------

COMMANDS: list[tuple[Command, dict[str, Any]]] = [
    (ResetCommand(), {"cmd": "reset"}),
    (ResetCommand(seed=0), {"cmd": "reset", "seed": 0}),
    (StepCommand([2]), {"cmd": "step", "action": [2]}),
    (StepCommand([0.5, -1.25]), {"cmd": "step", "action": [0.5, -1.25]}),
    (RenderCommand(), {"cmd": "render"}),
    (CloseCommand(), {"cmd": "close"}),
]


@pytest.mark.parametrize(("command", "wire"), COMMANDS)
def test_command_round_trip(command: Command, wire: dict[str, Any]) -> None:
    text = encode_command(command)
    assert json.loads(text) == wire
    assert decode_command(text) == command
    assert decode_command(text.encode()) == command


def test_seed_zero_is_sent() -> None:
    assert json.loads(encode_command(ResetCommand(seed=0)))["seed"] == 0


def test_command_from_godot_style_json() -> None:
    # Godot 3's JSON makes numbers floats; spaces and key order vary.
    assert decode_command('{ "action": [1.0], "cmd": "step" }') == StepCommand([1.0])
    assert decode_command('{"cmd": "reset", "seed": 3.0}') == ResetCommand(seed=3)
    assert decode_command('{"cmd": "step", "action": 2}') == StepCommand([2])


def test_nan_action_cannot_be_sent() -> None:
    with pytest.raises(InvalidArgumentError, match="JSON"):
        encode_command(StepCommand([float("nan")]))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "malformed JSON"),
        ("[1, 2]", "JSON object"),
        ('{"action": [1]}', "missing 'cmd'"),
        ('{"cmd": "jump"}', "unknown cmd 'jump'"),
        ('{"cmd": 3}', "unknown cmd 3"),
        ('{"cmd": "step"}', "missing 'action'"),
        ('{"cmd": "step", "action": "left"}', "JSON list"),
        ('{"cmd": "reset", "seed": 1.5}', "seed must be an integer"),
        (b"\xff\xfe", "binary frame of 2 bytes that is not UTF-8 JSON"),
        (b"{]", "malformed JSON"),
    ],
)
def test_bad_commands(text: str | bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_command(text)


def test_binary_frames_holding_utf8_json_are_read() -> None:
    # A Godot peer left in binary write mode sends its UTF-8 JSON in binary frames.
    assert decode_reply(b'{"init_observation":[1,2]}') == InitObservation([1, 2])
    assert decode_command(b'{"cmd":"step","action":[2]}') == StepCommand([2])
    assert decode_reply('{"error":"caf\u00e9"}'.encode()) == ErrorReply("caf\u00e9")


@pytest.mark.parametrize("frame", [b"\x00\x01\x02\x03\xfe\xff", b"\x89PNG\r\n\x1a\n\x00\x00"])
def test_binary_garbage_gets_a_readable_message(frame: bytes) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode_reply(frame)
    message = str(caught.value)
    assert f"a reply came as a binary frame of {len(frame)} bytes" in message
    assert "utf-16" not in message.lower() and "utf-32" not in message.lower()
    assert frame[:4].hex(" ") in message


# --- replies --------------------------------------------------------------------------------

REPLIES: list[tuple[Reply, dict[str, Any]]] = [
    (InitObservation([0.0, 0.5]), {"init_observation": [0.0, 0.5]}),
    (StepResult([1.0], 0.5, False), {"observation": [1.0], "reward": 0.5, "done": False}),
    (StepResult([1.0], -1.0, True), {"observation": [1.0], "reward": -1.0, "done": True}),
    (RenderResult(0), {"render_error": "0"}),
    (RenderResult(13), {"render_error": "13"}),
    (ErrorReply("unknown cmd"), {"error": "unknown cmd"}),
    # Error replies with a stand-in: the awaited reply's keys, which a reader that does not
    # know the extension (GymGodot's ServerEnv) indexes, with "error" beside them.
    (
        ErrorReply("the env raised", StepResult([0.5], 0.0, True)),
        {"observation": [0.5], "reward": 0.0, "done": True, "error": "the env raised"},
    ),
    (
        ErrorReply("no reset", InitObservation([0.0])),
        {"init_observation": [0.0], "error": "no reset"},
    ),
    (ErrorReply("no frame", RenderResult(1)), {"render_error": "1", "error": "no frame"}),
]


@pytest.mark.parametrize(("reply", "wire"), REPLIES)
def test_reply_round_trip(reply: Reply, wire: dict[str, Any]) -> None:
    text = encode_reply(reply)
    assert json.loads(text) == wire
    assert decode_reply(text) == reply


def test_replies_as_godot_writes_them() -> None:
    assert decode_reply('{"init_observation":[0,0.446016]}') == InitObservation([0, 0.446016])
    step = decode_reply('{"done":false,"observation":[0.05,0.4],"reward":1}')
    assert step == StepResult([0.05, 0.4], 1.0, False)
    assert isinstance(step, StepResult)
    assert isinstance(step.reward, float)
    assert decode_reply('{"observation":[1],"reward":0,"done":1}') == StepResult([1], 0.0, True)
    render = decode_reply('{"render_error":"0"}')
    assert isinstance(render, RenderResult)
    assert render.ok
    assert decode_reply('{"render_error":2}') == RenderResult(2)
    assert decode_reply('{"error":{"why":"x"}}') == ErrorReply('{"why": "x"}')


def test_reply_nan_is_written_for_python_peers() -> None:
    text = encode_reply(StepResult([float("nan")], float("inf"), False))
    assert "NaN" in text
    assert "Infinity" in text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "malformed JSON"),
        ('"observation"', "JSON object"),
        ("{}", "exactly one of"),
        ('{"observation":[1],"init_observation":[1]}', "exactly one of"),
        ('{"observation":[1],"done":false}', "missing 'reward'"),
        ('{"observation":[1],"reward":1}', "missing 'done'"),
        ('{"observation":[1],"reward":"1","done":false}', "reward must be a number"),
        ('{"observation":[1],"reward":true,"done":false}', "reward must be a number"),
        ('{"observation":[1],"reward":1,"done":"no"}', "done flag must be a boolean"),
        ('{"observation":[1],"reward":1,"done":2}', "done flag must be a boolean"),
        ('{"render_error":"OK"}', "render_error must be an integer"),
        ('{"render_error":0.5}', "render_error must be an integer"),
        ('{"error":"x","observation":[1],"init_observation":[1]}', "exactly one of"),
        ('{"error":"x","observation":[1],"done":false}', "missing 'reward'"),
    ],
)
def test_bad_replies(text: str, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_reply(text)


def test_godot_error_names() -> None:
    assert godot_error_name(0) == "OK (0)"
    assert godot_error_name(13) == "ERR_FILE_CANT_WRITE (13)"
    assert godot_error_name(99) == "error 99"


# --- the two roles --------------------------------------------------------------------------

EXCHANGES: list[tuple[Command, Reply, Phase]] = [
    (ResetCommand(seed=1), InitObservation([0.0]), Phase.RESETTING),
    (StepCommand([1]), StepResult([1.0], 1.0, False), Phase.STEPPING),
    (RenderCommand(), RenderResult(0), Phase.RENDERING),
]


@pytest.mark.parametrize(("command", "reply", "phase"), EXCHANGES)
def test_gym_and_game_side_as_a_pair(command: Command, reply: Reply, phase: Phase) -> None:
    gym, game = GymSide(), GameSide()
    assert game.receive(gym.send(command)) == command
    assert gym.phase is phase
    assert game.phase is phase
    assert gym.receive(game.send(reply)) == reply
    assert gym.phase is game.phase is Phase.IDLE


def test_close_ends_both_sides() -> None:
    gym, game = GymSide(), GameSide()
    assert game.receive(gym.send(CloseCommand())) == CloseCommand()
    assert gym.phase is game.phase is Phase.CLOSED
    with pytest.raises(StateError, match="cannot send reset to the game: connection is closed"):
        gym.send(ResetCommand())
    with pytest.raises(ProtocolError, match="closed"):
        gym.receive('{"init_observation": [0]}')
    with pytest.raises(StateError, match="closed"):
        game.send(ErrorReply("late"))
    with pytest.raises(ProtocolError, match="closed"):
        game.receive('{"cmd": "reset"}')


def test_gym_side_refuses_a_second_command_before_the_reply() -> None:
    gym = GymSide()
    gym.send(StepCommand([0]))
    with pytest.raises(StateError, match=r"cannot send reset.*waiting for the reply to step"):
        gym.send(ResetCommand())


def test_gym_side_checks_the_reply_kind() -> None:
    gym = GymSide()
    gym.send(StepCommand([0]))
    with pytest.raises(ProtocolError, match=r"expected StepResult.*got InitObservation"):
        gym.receive('{"init_observation": [0]}')


def test_gym_side_refuses_unasked_replies() -> None:
    with pytest.raises(ProtocolError, match="while the connection is idle"):
        GymSide().receive('{"init_observation": [0]}')


def test_an_error_reply_answers_any_command() -> None:
    gym = GymSide()
    gym.send(RenderCommand())
    assert gym.receive('{"error": "no viewport"}') == ErrorReply("no viewport")
    assert gym.phase is Phase.IDLE


def test_game_side_answers_malformed_commands_with_an_error() -> None:
    game = GameSide()
    with pytest.raises(ProtocolError):
        game.receive("{nope")
    assert game.phase is Phase.IDLE
    assert game.awaited is None
    with pytest.raises(StateError, match="ErrorReply with a StepResult stand-in"):
        game.send(ErrorReply("malformed", StepResult([0], 0.0, True)))
    assert json.loads(game.send(ErrorReply("malformed"))) == {"error": "malformed"}


def test_a_malformed_command_still_owes_its_reply() -> None:
    game = GameSide()
    with pytest.raises(ProtocolError, match="action must be a JSON list"):
        game.receive('{"cmd": "step", "action": "left"}')
    assert game.phase is Phase.STEPPING
    assert game.awaited is StepResult
    with pytest.raises(
        StateError, match=r"InitObservation stand-in.*waiting for the reply to step"
    ):
        game.send(ErrorReply("bad", InitObservation([0])))
    wire = json.loads(game.send(ErrorReply("bad", StepResult([0], 0.0, True))))
    assert wire == {"observation": [0], "reward": 0.0, "done": True, "error": "bad"}
    assert game.phase is Phase.IDLE


def test_gym_side_checks_the_stand_in_kind() -> None:
    gym = GymSide()
    gym.send(ResetCommand())
    with pytest.raises(ProtocolError, match=r"expected InitObservation.*got StepResult"):
        gym.receive('{"error": "x", "observation": [0], "reward": 0, "done": true}')
    gym = GymSide()
    gym.send(ResetCommand())
    reply = gym.receive('{"error": "x", "init_observation": [0]}')
    assert reply == ErrorReply("x", InitObservation([0]))


def test_game_side_checks_its_replies() -> None:
    game = GameSide()
    with pytest.raises(StateError, match=r"cannot send StepResult.*idle"):
        game.send(StepResult([0], 0.0, False))
    game.receive('{"cmd": "reset"}')
    with pytest.raises(StateError, match=r"cannot send RenderResult.*reset"):
        game.send(RenderResult(0))
    with pytest.raises(ProtocolError, match="while the connection is waiting"):
        game.receive('{"cmd": "step", "action": [0]}')


# --- garbage in, only the protocol's own error out ------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["cmd", "action", "seed", "observation", "reward", "done", "error"])
            | st.text(max_size=5),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@given(st.text() | st.binary())
def test_garbage_frames_raise_only_protocol_errors(frame: str | bytes) -> None:
    for decode in (decode_command, decode_reply):
        with contextlib.suppress(ProtocolError):
            decode(frame)


@given(JSON_VALUES)
def test_arbitrary_json_raises_only_protocol_errors(value: Any) -> None:
    text = json.dumps(value)
    for decode in (decode_command, decode_reply):
        with contextlib.suppress(ProtocolError):
            decode(text)
