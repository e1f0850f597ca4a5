"""GodotEnv against fake games (Python processes and threads): failures, timeouts, the contract.

The real Godot runs in test_godot_env_real.py; these tests need no Godot and cover the ways a
game can misbehave, each of which must end in a clear error, never in a hang.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from envwire.errors import (
    ConfigError,
    EnvCrashedError,
    EnvError,
    EnvTimeoutError,
    InvalidActionError,
    InvalidArgumentError,
    ProtocolError,
    RemoteError,
    StateError,
    TransportError,
    UnsupportedError,
)
from envwire.kinds.godot import GodotEnv
from tests.kinds.godot.conftest import FAKE_GAME

MakeEnv = Callable[..., GodotEnv]
FakeCmd = Callable[[str], list[str]]
COUNTER = (spaces.Discrete(2), spaces.Box(0, 10, shape=(1,), dtype=np.float32))


def launched(make_env: MakeEnv, fake_game_cmd: FakeCmd, mode: str, **kwargs: Any) -> GodotEnv:
    kwargs.setdefault("connect_timeout", 10.0)
    kwargs.setdefault("reply_timeout", 10.0)
    return make_env(*COUNTER, fake_game_cmd(mode), **kwargs)


# --- a well-behaved launched game ------------------------------------------------------------


def test_a_launched_game_plays_episodes(make_env: MakeEnv, fake_game_cmd: FakeCmd) -> None:
    env = launched(make_env, fake_game_cmd, "normal", render_mode="rgb_array")
    for _ in range(2):
        obs, info = env.reset()
        assert info == {}
        np.testing.assert_array_equal(obs, np.array([0.0], dtype=np.float32))
        done, steps = False, 0
        while not done:
            obs, reward, done, truncated, _ = env.step(1)
            steps += 1
            assert obs.dtype == np.float32
            assert reward == 1.0
            assert truncated is False
        assert steps == 3
    frame = env.render()
    assert frame is not None
    assert frame.shape == (2, 3, 3)
    assert tuple(frame[0, 0]) == (255, 0, 0)
    assert not any(env.render_dir.iterdir())  # the env's own frames are read, then removed
    env.close()
    assert env.game_exit_code == 0


def test_the_contract_arguments(make_env: MakeEnv, fake_game_cmd: FakeCmd) -> None:
    env = launched(make_env, fake_game_cmd, "normal", fixed_fps=30, window_render=True)
    args = env.game_args()
    assert args[:2] == ["--fixed-fps", "30"]
    assert "--disable-render-loop" not in args
    assert f"--serverPort={env.port}" in args
    assert f"--renderPath={env.render_dir}/" in args
    quiet = launched(make_env, fake_game_cmd, "normal")
    assert "--disable-render-loop" in quiet.game_args()


def test_render_without_rgb_array_keeps_the_file(
    make_env: MakeEnv, fake_game_cmd: FakeCmd, tmp_path: Any
) -> None:
    env = launched(make_env, fake_game_cmd, "normal", render_dir=tmp_path)
    env.reset()
    assert env.render() is None
    assert (tmp_path / "0.png").exists()


# --- games that misbehave --------------------------------------------------------------------


def test_a_game_that_dies_mid_step(make_env: MakeEnv, fake_game_cmd: FakeCmd) -> None:
    env = launched(make_env, fake_game_cmd, "exit-on-step")
    env.reset()
    with pytest.raises(EnvCrashedError, match="exited with code 7 while waiting for the reply"):
        env.step(0)
    with pytest.raises(StateError, match="failed earlier"):
        env.reset()


def test_a_missing_reply_times_out(make_env: MakeEnv, fake_game_cmd: FakeCmd) -> None:
    env = launched(make_env, fake_game_cmd, "silent-step", reply_timeout=0.5, shutdown_timeout=0.5)
    env.reset()
    with pytest.raises(EnvTimeoutError, match=r"no reply to step within 0.5 s"):
        env.step(0)
    with pytest.raises(StateError, match="close this env"):
        env.step(0)
    env.close()
    assert env.game_exit_code is not None


def test_malformed_json_from_the_game(make_env: MakeEnv, fake_game_cmd: FakeCmd) -> None:
    env = launched(make_env, fake_game_cmd, "bad-json")
    env.reset()
    with pytest.raises(ProtocolError, match=r"bad reply to step.*malformed JSON"):
        env.step(0)


def test_a_reply_to_another_command(make_env: MakeEnv, fake_game_cmd: FakeCmd) -> None:
    env = launched(make_env, fake_game_cmd, "wrong-reply")
    env.reset()
    with pytest.raises(ProtocolError, match="expected StepResult"):
        env.step(0)


def test_a_game_that_hangs_up(make_env: MakeEnv, fake_game_cmd: FakeCmd) -> None:
    env = launched(make_env, fake_game_cmd, "hang-up")
    env.reset()
    with pytest.raises(EnvCrashedError, match="exited with code 0 while waiting"):
        env.step(0)


def test_a_game_that_exits_before_connecting(make_env: MakeEnv, fake_game_cmd: FakeCmd) -> None:
    env = launched(make_env, fake_game_cmd, "exit-early")
    with pytest.raises(EnvCrashedError, match="code 5 while waiting for it to connect") as caught:
        env.reset()
    assert "fake game: mode exit-early" in str(caught.value)  # the game's own output


def test_a_launched_game_that_never_connects(make_env: MakeEnv, fake_game_cmd: FakeCmd) -> None:
    env = launched(make_env, fake_game_cmd, "no-connect", connect_timeout=0.5)
    with pytest.raises(EnvTimeoutError, match=r"no Godot game connected .* within 0.5 s"):
        env.reset()
    env.close()
    assert env.game_exit_code == -15  # SIGTERM


def test_close_kills_a_game_that_ignores_sigterm(make_env: MakeEnv, fake_game_cmd: FakeCmd) -> None:
    env = launched(make_env, fake_game_cmd, "ignore-term", shutdown_timeout=0.5)
    log = env.game_log
    assert log is not None
    deadline = time.monotonic() + 30
    while "mode ignore-term" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.02)  # until the game has set SIGTERM aside
    env.close()
    assert env.game_exit_code == -9  # SIGKILL
    env.close()  # idempotent


def test_nobody_connects(make_env: MakeEnv) -> None:
    env = make_env(*COUNTER, connect_timeout=0.3)
    assert env.game_pid is None
    with pytest.raises(EnvTimeoutError, match=r"within 0.3 s; start it with: --fixed-fps 60"):
        env.wait_for_game()


def test_a_port_in_use(make_env: MakeEnv) -> None:
    first = make_env(*COUNTER)
    with pytest.raises(ConfigError, match=f"cannot listen for the Godot game on .*:{first.port}"):
        GodotEnv(*COUNTER, port=first.port)


def test_a_command_that_cannot_start() -> None:
    with pytest.raises(ConfigError, match="cannot start the Godot game"):
        GodotEnv(*COUNTER, ["/nonexistent/godot"])


def test_gymgodot_shell_form_runs_in_the_project(make_env: MakeEnv, tmp_path: Path) -> None:
    # GymGodot's users write exeCmd = "cd PROJECT && godot scene": the game runs in PROJECT.
    project = tmp_path / "my project"
    project.mkdir()
    shutil.copy(FAKE_GAME, project / "game.py")
    command = f"cd {shlex.quote(str(project))} && {shlex.quote(sys.executable)} game.py"
    env = make_env(*COUNTER, command, connect_timeout=10.0, reply_timeout=10.0)
    assert env._process is not None
    assert env._process.command[:2] == [sys.executable, "game.py"]
    obs, _ = env.reset()
    assert obs.tolist() == [0.0]
    assert env.step(1)[0].tolist() == [1.0]


@pytest.mark.parametrize(
    ("command", "why"),
    [
        ("cd /p && godot a.tscn > log.txt", "uses '>'"),
        ("godot a.tscn; echo done", "uses ';'"),
        ("cd /p && cd q && godot", "uses '&&'"),
        ("godot --path $PROJECT", "uses '$PROJECT'"),
        ("", "is empty"),
    ],
)
def test_other_shell_command_lines_show_the_list_form(command: str, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        GodotEnv(*COUNTER, command)
    message = str(caught.value)
    assert why in message
    assert 'exe_cmd=["godot", "--path", "PROJECT", "scene.tscn"], cwd="PROJECT"' in message


# --- a game played from a thread, for exact control of the frames ----------------------------


@pytest.fixture
def waiting_env(make_env: MakeEnv) -> GodotEnv:
    return make_env(*COUNTER, reply_timeout=5.0, connect_timeout=5.0)


@pytest.fixture
def game(waiting_env: GodotEnv) -> Iterator[ClientConnection]:
    with connect(f"ws://127.0.0.1:{waiting_env.port}/", proxy=None) as ws:
        waiting_env.wait_for_game()
        yield ws


def answer_next(ws: ClientConnection, reply: dict[str, Any] | str | bytes) -> threading.Thread:
    """Answer the next command in a thread; the command lands in ``thread.command``."""

    def run() -> None:
        thread.command = json.loads(ws.recv(timeout=5))  # type: ignore[attr-defined]
        ws.send(reply if isinstance(reply, str | bytes) else json.dumps(reply))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_the_seed_extension(waiting_env: GodotEnv, game: ClientConnection) -> None:
    answerer = answer_next(game, {"init_observation": [4]})
    obs, _ = waiting_env.reset(seed=0)
    answerer.join()
    assert answerer.command == {"cmd": "reset", "seed": 0}  # type: ignore[attr-defined]
    assert obs.tolist() == [4.0]
    answerer = answer_next(game, {"init_observation": [4]})
    waiting_env.reset()
    answerer.join()
    assert answerer.command == {"cmd": "reset"}  # type: ignore[attr-defined]


def test_the_error_extension(waiting_env: GodotEnv, game: ClientConnection) -> None:
    answer_next(game, {"init_observation": [0]})
    waiting_env.reset()
    answerer = answer_next(game, {"error": "unknown cmd"})
    with pytest.raises(RemoteError, match="could not step: unknown cmd"):
        waiting_env.step(1)
    answerer.join()
    assert answerer.command == {"cmd": "step", "action": [1]}  # type: ignore[attr-defined]
    answer_next(game, {"observation": [1], "reward": 0, "done": False})
    assert waiting_env.step(0)[0].tolist() == [1.0]  # still usable


def test_a_render_error_code(waiting_env: GodotEnv, game: ClientConnection) -> None:
    answer_next(game, {"render_error": "7"})
    with pytest.raises(EnvError, match=r"could not save frame .*0.png: ERR_FILE_NOT_FOUND"):
        waiting_env.render()


def test_a_missing_frame_file(make_env: MakeEnv) -> None:
    env = make_env(*COUNTER, render_mode="rgb_array")
    with connect(f"ws://127.0.0.1:{env.port}/", proxy=None) as ws:
        answer_next(ws, {"render_error": "0"})
        with pytest.raises(EnvError, match="cannot read the frame"):
            env.render()


@pytest.mark.parametrize("command", ["reset", "step"])
def test_an_observation_of_the_wrong_length_breaks_the_env(
    waiting_env: GodotEnv, game: ClientConnection, command: str
) -> None:
    if command == "step":
        answer_next(game, {"init_observation": [0]})
        waiting_env.reset()
        answer_next(game, {"observation": [1, 2], "reward": 0, "done": False})
        call: Callable[[], Any] = lambda: waiting_env.step(1)  # noqa: E731
    else:
        answer_next(game, {"init_observation": [1, 2]})
        call = waiting_env.reset
    with pytest.raises(ProtocolError, match=rf"bad reply to {command} .*observation .* has 2"):
        call()
    # As docs/protocols/godot.md promises for every protocol error: the env is no longer usable.
    with pytest.raises(StateError, match=r"failed earlier .*has 2 values"):
        waiting_env.reset()


def test_a_binary_frame_that_is_not_text(waiting_env: GodotEnv, game: ClientConnection) -> None:
    answer_next(game, b"\x00\x05\xff\x10")
    with pytest.raises(ProtocolError, match="binary frame of 4 bytes that is not UTF-8") as caught:
        waiting_env.reset()
    assert "utf-16" not in str(caught.value).lower()


def test_a_closed_connection_without_a_process(
    waiting_env: GodotEnv, game: ClientConnection
) -> None:
    game.close()
    with pytest.raises(TransportError, match="connection closed while waiting"):
        waiting_env.reset()


def test_a_second_game_is_turned_away(waiting_env: GodotEnv, game: ClientConnection) -> None:
    with (
        connect(f"ws://127.0.0.1:{waiting_env.port}/", proxy=None) as second,
        pytest.raises(ConnectionClosed) as caught,
    ):
        second.recv(timeout=5)
    assert caught.value.rcvd is not None
    assert caught.value.rcvd.code == 1013


def test_close_sends_close(waiting_env: GodotEnv, game: ClientConnection) -> None:
    closer = threading.Thread(target=waiting_env.close)
    closer.start()
    assert json.loads(game.recv(timeout=5)) == {"cmd": "close"}
    game.close()  # a game hangs up on close; the env waits for that, then stops listening
    closer.join(30)
    assert not closer.is_alive()
    with pytest.raises(StateError, match="closed"):
        waiting_env.reset()


# --- argument checks -------------------------------------------------------------------------


def test_step_before_reset(make_env: MakeEnv) -> None:
    with pytest.raises(StateError, match="reset"):
        make_env(*COUNTER).step(0)


def test_invalid_action(waiting_env: GodotEnv, game: ClientConnection) -> None:
    answer_next(game, {"init_observation": [0]})
    waiting_env.reset()
    with pytest.raises(InvalidActionError, match="action 5 is not in Discrete"):
        waiting_env.step(5)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"render_mode": "human"}, InvalidArgumentError, "render_mode"),
        ({"reply_timeout": 0}, InvalidArgumentError, "reply_timeout must be a positive"),
        ({"port": -5}, InvalidArgumentError, "port must be in 0..65535"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        GodotEnv(*COUNTER, **kwargs)


def test_unsupported_spaces() -> None:
    with pytest.raises(UnsupportedError, match="observation space is Dict"):
        GodotEnv(spaces.Discrete(2), spaces.Dict({"a": spaces.Discrete(2)}))


def test_reset_options_are_refused(make_env: MakeEnv) -> None:
    with pytest.raises(InvalidArgumentError, match="no reset options"):
        make_env(*COUNTER).reset(options={"level": 2})
