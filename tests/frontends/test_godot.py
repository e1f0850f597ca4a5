"""The reverse bridge, driven by a GymGodot-style Python side written here from the seed.

The test server does what GymGodot's Python side does: it listens, launches the "game" with the
command-line contract, sends the seed's JSON commands and reads the replies.
"""

from __future__ import annotations

import json
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from PIL import Image
from websockets.sync.server import Server, ServerConnection, serve

from envwire.frontends.godot import (
    EXIT_CLOSED,
    EXIT_CONNECTION_LOST,
    EXIT_NO_SERVER,
    main,
    run_bridge,
)
from envwire.kinds.godot import GodotEnv


@dataclass
class GymGodotServer:
    """A seed-001 server side: accepts one game and exchanges JSON with it."""

    server: Server
    arrivals: queue.Queue[ServerConnection] = field(default_factory=queue.Queue)
    released: threading.Event = field(default_factory=threading.Event)
    ws: ServerConnection | None = None

    @property
    def port(self) -> int:
        port: int = self.server.socket.getsockname()[1]
        return port

    def accept(self) -> None:
        self.ws = self.arrivals.get(timeout=30)

    def ask(self, message: dict[str, Any] | str) -> dict[str, Any]:
        assert self.ws is not None
        self.ws.send(message if isinstance(message, str) else json.dumps(message))
        reply: dict[str, Any] = json.loads(self.ws.recv(timeout=30))
        return reply

    def tell(self, message: dict[str, Any]) -> None:
        assert self.ws is not None
        self.ws.send(json.dumps(message))


@pytest.fixture
def gymgodot() -> Iterator[GymGodotServer]:
    holder: list[GymGodotServer] = []

    def handler(ws: ServerConnection) -> None:
        holder[0].arrivals.put(ws)
        holder[0].released.wait(60)

    side = GymGodotServer(serve(handler, "127.0.0.1", 0))
    holder.append(side)
    threading.Thread(target=side.server.serve_forever, daemon=True).start()
    yield side
    side.released.set()
    side.server.shutdown()


def contract(server: GymGodotServer, render_dir: Path) -> list[str]:
    return [
        "--fixed-fps",
        "60",
        "--disable-render-loop",
        "--serverIP=127.0.0.1",
        f"--serverPort={server.port}",
        f"--renderPath={render_dir}/",
    ]


def test_cartpole_as_a_game_executable(gymgodot: GymGodotServer, tmp_path: Path) -> None:
    game = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "envwire",
            "godot-bridge",
            "CartPole-v1",
            *contract(gymgodot, tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        gymgodot.accept()
        first = gymgodot.ask({"cmd": "reset", "seed": 0})["init_observation"]
        assert len(first) == 4
        assert gymgodot.ask({"cmd": "reset", "seed": 0})["init_observation"] == first
        done, steps = False, 0
        while not done:
            reply = gymgodot.ask({"cmd": "step", "action": [steps % 2]})
            assert sorted(reply) == ["done", "observation", "reward"]
            assert reply["reward"] == 1.0
            done = reply["done"]
            steps += 1
        assert steps < 500
        # Without pygame CartPole cannot draw; the error code says so instead of a hang.
        assert set(gymgodot.ask({"cmd": "render"})) == {"render_error"}
        assert "unknown cmd" in gymgodot.ask({"cmd": "jump"})["error"]
        assert "malformed JSON" in gymgodot.ask("{oops")["error"]
        assert "not in Discrete(2)" in gymgodot.ask({"cmd": "step", "action": [5]})["error"]
        gymgodot.tell({"cmd": "close"})
        assert game.wait(timeout=30) == EXIT_CLOSED
    finally:
        game.kill()
        game.wait()
        assert game.stderr is not None
        game.stderr.close()


class Painter(gym.Env[np.ndarray, int]):
    """A tiny env with an rgb_array renderer, and a step that fails on action 2."""

    metadata = {"render_modes": ["rgb_array"]}  # noqa: RUF012

    def __init__(self) -> None:
        self.action_space = spaces.Discrete(3)
        self.observation_space = spaces.Box(0, 255, shape=(2, 2), dtype=np.uint8)
        self.render_mode = "rgb_array"
        self.level = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self.level = 0 if seed is None else seed
        return self._obs(), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if action == 2:
            raise RuntimeError("the paint ran out")
        self.level += 1
        return self._obs(), 0.5, False, self.level >= 10, {}

    def _obs(self) -> np.ndarray:
        return np.full((2, 2), self.level, dtype=np.uint8)

    def render(self) -> np.ndarray:
        frame = np.zeros((4, 5, 3), dtype=np.uint8)
        frame[..., 0] = self.level
        return frame


def bridge_thread(
    factory: Callable[[], gym.Env[Any, Any]], server: GymGodotServer, render_dir: Path
) -> tuple[threading.Thread, list[int]]:
    codes: list[int] = []

    def run() -> None:
        codes.append(run_bridge(factory, "127.0.0.1", server.port, render_path=f"{render_dir}/"))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, codes


def test_render_seed_truncation_and_env_errors(gymgodot: GymGodotServer, tmp_path: Path) -> None:
    thread, codes = bridge_thread(Painter, gymgodot, tmp_path)
    gymgodot.accept()
    assert gymgodot.ask({"cmd": "reset", "seed": 7}) == {"init_observation": [7] * 4}
    assert gymgodot.ask({"cmd": "render"}) == {"render_error": "0"}
    with Image.open(tmp_path / "0.png") as image:
        assert np.asarray(image)[0, 0].tolist() == [7, 0, 0]
    error = gymgodot.ask({"cmd": "step", "action": [2]})["error"]
    assert error == "the env raised RuntimeError: the paint ran out"
    replies = [gymgodot.ask({"cmd": "step", "action": [1.0]}) for _ in range(3)]
    assert [r["done"] for r in replies] == [False, False, True]  # truncation counts as done
    assert replies[-1] == {"observation": [10] * 4, "reward": 0.5, "done": True}
    gymgodot.ask({"cmd": "reset"})
    gymgodot.ask({"cmd": "render"})
    assert (tmp_path / "0.png").is_file()  # the frame counter restarts at each reset
    assert not (tmp_path / "1.png").exists()
    gymgodot.tell({"cmd": "close"})
    thread.join(30)
    assert codes == [EXIT_CLOSED]


def test_the_server_goes_away(gymgodot: GymGodotServer, tmp_path: Path) -> None:
    thread, codes = bridge_thread(Painter, gymgodot, tmp_path)
    gymgodot.accept()
    gymgodot.ask({"cmd": "reset"})
    assert gymgodot.ws is not None
    gymgodot.ws.close()
    thread.join(30)
    assert codes == [EXIT_CONNECTION_LOST]


def test_no_server() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nobody listens there
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    assert run_bridge(Painter, "127.0.0.1", free_port, connect_timeout=0.3) == EXIT_NO_SERVER


def test_unknown_env_id() -> None:
    assert main(["NoSuchEnv-v9", "--serverPort=1"]) == 2


def test_godot_env_drives_the_bridge() -> None:
    """Both of envwire's sides together: GodotEnv launches the bridge as its game."""
    env = GodotEnv(
        spaces.Discrete(2),
        spaces.Box(-np.inf, np.inf, shape=(4,), dtype=np.float32),
        [sys.executable, "-m", "envwire.frontends.godot", "CartPole-v1", "--render-mode=none"],
        connect_timeout=30.0,
    )
    try:
        obs, _ = env.reset(seed=3)
        reference = gym.make("CartPole-v1")
        expected, _ = reference.reset(seed=3)
        np.testing.assert_array_equal(obs, expected)
        for action in (0, 1, 1, 0):
            obs, reward, _, _, _ = env.step(action)
            expected, _, _, _, _ = reference.step(action)
            np.testing.assert_array_equal(obs, expected)
            assert reward == 1.0
        reference.close()
        env.close()
        assert env.game_exit_code == EXIT_CLOSED
    finally:
        env.close()
