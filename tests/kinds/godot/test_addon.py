"""envwire's GDScript addon in the real headless Godot 3, driven by raw seed messages.

The server here is written from the seed alone (a websockets server sending JSON commands), so
the addon is checked against the protocol itself, not against our own Python side.
"""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from gymnasium.spaces import Box, Discrete
from websockets.sync.server import Server, ServerConnection, serve

from envwire.errors import EnvCrashedError
from envwire.kinds.godot import GodotEnv


@dataclass
class Session:
    game: subprocess.Popen[bytes]
    ws: ServerConnection
    render_dir: Path

    def ask(self, message: dict[str, Any] | str) -> dict[str, Any]:
        self.ws.send(message if isinstance(message, str) else json.dumps(message))
        reply: dict[str, Any] = json.loads(self.ws.recv(timeout=20))
        return reply


@pytest.fixture
def session(godot_binary: str, example_project: Path, tmp_path: Path) -> Iterator[Session]:
    arrivals: queue.Queue[ServerConnection] = queue.Queue()
    done = threading.Event()

    def handler(ws: ServerConnection) -> None:
        arrivals.put(ws)
        done.wait(60)

    server: Server = serve(handler, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.socket.getsockname()[1]
    game = subprocess.Popen(
        [
            godot_binary,
            "--path",
            str(example_project),
            "--fixed-fps",
            "60",
            "--disable-render-loop",
            "--serverIP=127.0.0.1",
            f"--serverPort={port}",
            f"--renderPath={tmp_path}/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield Session(game, arrivals.get(timeout=30), tmp_path)
    finally:
        done.set()
        game.kill()
        game.wait()
        server.shutdown()


def test_every_seed_message(session: Session) -> None:
    reset = session.ask({"cmd": "reset"})
    assert list(reset) == ["init_observation"]
    assert reset["init_observation"][0] == 0
    step = session.ask({"cmd": "step", "action": [2]})
    assert sorted(step) == ["done", "observation", "reward"]
    assert step["observation"][0] == pytest.approx(0.05, abs=1e-6)
    assert step["reward"] == pytest.approx(0.05, abs=1e-6)
    assert step["done"] is False
    assert session.ask({"cmd": "render"}) == {"render_error": "0"}
    assert (session.render_dir / "0.png").is_file()
    assert session.ask({"cmd": "render"}) == {"render_error": "0"}
    assert (session.render_dir / "1.png").is_file()
    session.ws.send(json.dumps({"cmd": "close"}))
    assert session.game.wait(timeout=30) == 0


def test_actions_arrive_as_godot_floats(session: Session) -> None:
    session.ask({"cmd": "reset"})
    step = session.ask({"cmd": "step", "action": [2.0]})
    assert step["observation"][0] == pytest.approx(0.05, abs=1e-6)


def test_small_values_keep_their_precision(session: Session) -> None:
    # Godot 3's JSON.print would write 6 decimals; the addon writes ~16 significant digits.
    first = session.ask({"cmd": "reset", "seed": 11})
    target = first["init_observation"][1]
    assert len(repr(target).rstrip("0")) > 9


def test_the_seed_extension(session: Session) -> None:
    first = session.ask({"cmd": "reset", "seed": 123})
    session.ask({"cmd": "step", "action": [0]})
    again = session.ask({"cmd": "reset", "seed": 123})
    assert first == again


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ({"cmd": "jump"}, 'unknown cmd "jump"'),
        ({"action": [1]}, '"cmd" field'),
        ({"cmd": "step"}, 'step needs an "action" array'),
        ({"cmd": "step", "action": "left"}, 'step needs an "action" array'),
        ("this is not JSON", "malformed JSON"),
        ("[1, 2]", '"cmd" field'),
    ],
)
def test_the_error_extension(session: Session, message: dict[str, Any] | str, error: str) -> None:
    reply = session.ask(message)
    assert list(reply) == ["error"]
    assert error in reply["error"]
    assert "init_observation" in session.ask({"cmd": "reset"})  # still serving


def test_the_game_quits_when_the_server_goes(session: Session) -> None:
    session.ask({"cmd": "reset"})
    session.ws.close()
    assert session.game.wait(timeout=30) == 4


def test_an_env_node_without_hooks(
    godot_binary: str, example_project: Path, tmp_path: Path
) -> None:
    """The addon refuses a scene whose env node lacks a hook, instead of hanging on a step."""
    shutil.copytree(example_project / "addons" / "envwire", tmp_path / "addons" / "envwire")
    (tmp_path / "project.godot").write_text(
        'config_version=4\n\n[application]\n\nrun/main_scene="res://main.tscn"\n'
    )
    (tmp_path / "main.tscn").write_text(
        "[gd_scene load_steps=2 format=2]\n\n"
        '[ext_resource path="res://addons/envwire/agent.gd" type="Script" id=1]\n\n'
        '[node name="NotAnEnv" type="Node"]\n\n'
        '[node name="EnvwireAgent" type="Node" parent="."]\n'
        "script = ExtResource( 1 )\n"
        'env_node = NodePath("..")\n'
    )
    env = GodotEnv(Discrete(3), Box(-1.0, 1.0, shape=(2,)), [godot_binary, "--path", str(tmp_path)])
    try:
        with pytest.raises(EnvCrashedError, match=r"code 2 \(bad setup") as caught:
            env.reset()
        assert "has no apply_action() method" in str(caught.value)
    finally:
        env.close()
