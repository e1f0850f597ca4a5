"""The reverse bridge, driven by a GymGodot-style Python side written here from the seed.

The test server does what GymGodot's Python side does: it listens, launches the "game" with the
command-line contract, sends the seed's JSON commands and reads the replies. The frames marked
``SERVER_ENV`` are the exact text GymGodot's ``ServerEnv`` sends (``json.dumps`` of its
messages), and :func:`read_as_server_env` reads a reply with the keys ``ServerEnv`` indexes and
nothing more: a reply it cannot read fails there as it would fail in ``ServerEnv``.
"""

from __future__ import annotations

import json
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.wrappers import OrderEnforcing
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

#: Seconds any one wait of these tests may take: generous, for a loaded machine, where a game
#: (a Python process that imports gymnasium) takes tens of seconds to start. A test still
#: fails the moment what it waits for goes wrong (an exit, an error reply).
PATIENCE = 180.0


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

    def accept(self, game: subprocess.Popen[bytes] | None = None) -> None:
        """Wait for the game to connect (failing at once if ``game`` exits first)."""
        deadline = time.monotonic() + PATIENCE
        while self.ws is None:
            try:
                self.ws = self.arrivals.get(timeout=0.5)
            except queue.Empty:
                if game is not None and game.poll() is not None:
                    assert game.stderr is not None
                    pytest.fail(f"the game exited with {game.returncode}: {game.stderr.read()!r}")
                if time.monotonic() > deadline:
                    pytest.fail(f"no game connected within {PATIENCE:.0f} s")

    def ask(self, message: dict[str, Any] | str) -> dict[str, Any]:
        assert self.ws is not None
        self.ws.send(message if isinstance(message, str) else json.dumps(message))
        reply: dict[str, Any] = json.loads(self.ws.recv(timeout=PATIENCE))
        return reply

    def tell(self, message: dict[str, Any]) -> None:
        assert self.ws is not None
        self.ws.send(json.dumps(message))


@pytest.fixture
def gymgodot() -> Iterator[GymGodotServer]:
    holder: list[GymGodotServer] = []

    def handler(ws: ServerConnection) -> None:
        holder[0].arrivals.put(ws)
        holder[0].released.wait(3 * PATIENCE)  # the connection lives until the test is over

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


@pytest.mark.timeout(4 * PATIENCE)
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
        gymgodot.accept(game)
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
        refused = gymgodot.ask({"cmd": "step", "action": [5]})
        assert "not in Discrete(2)" in refused["error"]
        assert refused["done"] is True  # the stand-in a GymGodot Python side reads
        gymgodot.tell({"cmd": "close"})
        assert game.wait(timeout=PATIENCE) == EXIT_CLOSED
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
    failed = gymgodot.ask({"cmd": "step", "action": [2]})
    assert failed == {
        "observation": [7] * 4,  # the last observation sent: nothing is known since
        "reward": 0.0,
        "done": True,
        "error": "the env raised RuntimeError: the paint ran out",
    }
    replies = [gymgodot.ask({"cmd": "step", "action": [1.0]}) for _ in range(3)]
    assert [r["done"] for r in replies] == [False, False, True]  # truncation counts as done
    assert replies[-1] == {"observation": [10] * 4, "reward": 0.5, "done": True}
    gymgodot.ask({"cmd": "reset"})
    gymgodot.ask({"cmd": "render"})
    assert (tmp_path / "0.png").is_file()  # the frame counter restarts at each reset
    assert not (tmp_path / "1.png").exists()
    gymgodot.tell({"cmd": "close"})
    thread.join(PATIENCE)
    assert codes == [EXIT_CLOSED]


def test_the_server_goes_away(gymgodot: GymGodotServer, tmp_path: Path) -> None:
    thread, codes = bridge_thread(Painter, gymgodot, tmp_path)
    gymgodot.accept()
    gymgodot.ask({"cmd": "reset"})
    assert gymgodot.ws is not None
    gymgodot.ws.close()
    thread.join(PATIENCE)
    assert codes == [EXIT_CONNECTION_LOST]


def test_no_server() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nobody listens there
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    assert run_bridge(Painter, "127.0.0.1", free_port, connect_timeout=0.3) == EXIT_NO_SERVER


def test_unknown_env_id() -> None:
    assert main(["NoSuchEnv-v9", "--serverPort=1"]) == 2


@pytest.mark.timeout(4 * PATIENCE)
def test_godot_env_drives_the_bridge() -> None:
    """Both of envwire's sides together: GodotEnv launches the bridge as its game."""
    env = GodotEnv(
        spaces.Discrete(2),
        spaces.Box(-np.inf, np.inf, shape=(4,), dtype=np.float32),
        [sys.executable, "-m", "envwire.frontends.godot", "CartPole-v1", "--render-mode=none"],
        connect_timeout=PATIENCE,
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


# --- what GymGodot's ServerEnv sends and reads ----------------------------------------------

SERVER_ENV_RESET = '{"cmd": "reset"}'
SERVER_ENV_RENDER = '{"cmd": "render"}'
SERVER_ENV_CLOSE = '{"cmd": "close"}'


def server_env_step(action: list[Any]) -> str:
    """``ServerEnv.step``'s frame: ``json.dumps({'cmd': 'step', 'action': action.tolist()})``."""
    return json.dumps({"cmd": "step", "action": action})


def read_as_server_env(frame: str, reply: dict[str, Any]) -> Any:
    """Read ``reply`` to ``frame`` with exactly the keys GymGodot's ServerEnv indexes."""
    cmd = json.loads(frame)["cmd"]
    if cmd == "reset":
        return np.array(reply["init_observation"]).astype(np.float32)
    if cmd == "step":
        return np.array(reply["observation"]).astype(np.float32), reply["reward"], reply["done"]
    assert cmd == "render"
    return reply["render_error"] != "0"


def exchange(server: GymGodotServer, frame: str) -> Any:
    assert server.ws is not None
    server.ws.send(frame)
    return read_as_server_env(frame, json.loads(server.ws.recv(timeout=PATIENCE)))


def test_pendulum_actions_outside_the_box_reach_the_env(gymgodot: GymGodotServer) -> None:
    """Pendulum clips its torque to [-2, 2]; the bridge hands it 50.0 as the env would get it."""
    thread, codes = bridge_thread(lambda: gym.make("Pendulum-v1"), gymgodot, Path("unused"))
    gymgodot.accept()
    local = gym.make("Pendulum-v1")
    first = gymgodot.ask({"cmd": "reset", "seed": 4})["init_observation"]
    np.testing.assert_array_equal(first, local.reset(seed=4)[0])
    for torque in (50.0, -50.0, 1.5):
        observation, reward, done = exchange(gymgodot, server_env_step([torque]))
        expected, expected_reward, _, _, _ = local.step(np.array([torque], np.float32))
        np.testing.assert_array_equal(observation, expected)
        assert reward == pytest.approx(expected_reward)
        assert done is False
    # The clip is the env's: 50.0 and 2.0 from the same state lead to the same state.
    clipped = gym.make("Pendulum-v1")
    clipped.reset(seed=4)
    pushed = gym.make("Pendulum-v1")
    pushed.reset(seed=4)
    np.testing.assert_array_equal(
        clipped.step(np.array([2.0], np.float32))[0], pushed.step(np.array([50.0], np.float32))[0]
    )
    for env in (local, clipped, pushed):
        env.close()
    gymgodot.tell({"cmd": "close"})
    thread.join(PATIENCE)
    assert codes == [EXIT_CLOSED]


class Fragile(Painter):
    """Painter whose reset fails when asked with seed 13, and which cannot render."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if seed == 13:
            raise ValueError("unlucky seed")
        return super().reset(seed=seed, options=options)

    def render(self) -> np.ndarray:
        raise RuntimeError("no canvas")


def test_every_reply_reads_as_server_env_reads_it(gymgodot: GymGodotServer, tmp_path: Path) -> None:
    """Each reply the bridge can send to ServerEnv's frames, failures included, has its keys."""
    thread, codes = bridge_thread(lambda: OrderEnforcing(Fragile()), gymgodot, tmp_path)
    gymgodot.accept()
    # A step before any reset: the env refuses; the stand-in is the neutral observation.
    observation, reward, done = exchange(gymgodot, server_env_step([1]))
    assert (observation.tolist(), reward, done) == ([0.0] * 4, 0.0, True)
    # A reset that raises: the neutral observation stands in for the first one.
    assert gymgodot.ask({"cmd": "reset", "seed": 13}) == {
        "init_observation": [0] * 4,
        "error": "the env raised ValueError: unlucky seed",
    }
    assert exchange(gymgodot, SERVER_ENV_RESET).tolist() == [0.0] * 4
    assert exchange(gymgodot, server_env_step([1]))[0].tolist() == [1.0] * 4
    # Actions the bridge cannot hand over: not in Discrete(3), two values, not numbers.
    for action in ([7], [[0, 1]], ["left"], [1.5]):
        observation, reward, done = exchange(gymgodot, server_env_step(action))
        assert (observation.tolist(), reward, done) == ([1.0] * 4, 0.0, True)
    # A render the env cannot do.
    assert exchange(gymgodot, SERVER_ENV_RENDER) is True  # ServerEnv prints the code
    assert gymgodot.ask({"cmd": "render"}) == {"render_error": "1"}
    # A step frame whose action is no list: the codec refuses it, the stand-in still comes.
    assert gymgodot.ask({"cmd": "step", "action": "left"}) == {
        "observation": [1] * 4,
        "reward": 0.0,
        "done": True,
        "error": "a step action must be a JSON list, got 'left'",
    }
    assert exchange(gymgodot, server_env_step([1]))[0].tolist() == [2.0] * 4
    assert gymgodot.ws is not None
    gymgodot.ws.send(SERVER_ENV_CLOSE)
    thread.join(PATIENCE)
    assert codes == [EXIT_CLOSED]
