"""A default ``envwire serve`` against the Go client's exact bytes, over real sockets.

The bytes are those the original gym-socket Go client sends (see
tests/protocols/test_gymsocket_go_client.py and docs/protocols/gym-socket.md, which records a
run of the Go client itself). The Go client sends flags 0, Monitor in its later layout, and Render
without waiting for a reply.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from envwire.testing import ServerProcess
from tests.frontends.gymsocket.test_frontend import RawClient, field

Connect = Callable[[int, str], "GoBytes"]
NO_RENDERER = "test/NoRenderer-v0=envwire.testing.envs:NoRendererEnv"


class GoBytes(RawClient):
    """Sends what the Go client sends (flags 0) and reads what it reads."""

    def __init__(self, port: int, env_id: str) -> None:
        super().__init__(port, env_id)
        assert self.handshake_error == ""

    def monitor(self, directory: bytes, *, force: bool, resume: bool, video: bool) -> str:
        self.sock.sendall(bytes([4, resume, force, video]) + field(directory))
        return self.string()

    def step(self, action: bytes) -> tuple[int, bytes, float, bool, str]:
        self.sock.sendall(b"\x01\x00" + field(action))
        kind, obs = self.observation()
        reward, done = struct.unpack("<d?", self.exact(9))
        return kind, obs, reward, done, self.string()


@pytest.fixture
def connect() -> Iterator[Callable[[int, str], GoBytes]]:
    """Open GoBytes connections, all closed at teardown."""
    opened: list[GoBytes] = []

    def open_one(port: int, env_id: str) -> GoBytes:
        opened.append(GoBytes(port, env_id))
        return opened[-1]

    yield open_one
    for conn in opened:
        conn.sock.close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    with ServerProcess(["CartPole-v1", NO_RENDERER], ["--monitor-root", str(tmp_path)]) as running:
        running.monitor_root = tmp_path  # type: ignore[attr-defined]
        yield running


def test_the_go_client_session_against_a_default_server(
    server: ServerProcess, connect: Connect
) -> None:
    go = connect(server.ports["gym-socket"], "CartPole-v1")
    go.sock.sendall(b"\x02\x00")
    assert json.loads(go.string()) == {"type": "Discrete", "n": 2}
    go.sock.sendall(b"\x02\x01")
    assert json.loads(go.string())["shape"] == [4]
    assert go.monitor(b"/home/agent/go-monitor", force=True, resume=False, video=True) == ""
    go.sock.sendall(b"\x00")
    kind, obs = go.observation()
    assert kind == 0 and len(json.loads(obs)) == 4
    done, steps = False, 0
    while not done:
        go.sock.sendall(b"\x05\x03")  # Render, then Sample Action
        kind, action = go.observation()
        assert kind == 0 and action in (b"0", b"1")
        _, _, reward, done, info = go.step(action)
        assert reward == 1.0 and json.loads(info) == {}
        steps += 1
    root: Path = server.monitor_root  # type: ignore[attr-defined]
    stats = next((root / "home" / "agent" / "go-monitor").glob("envwire.stats.*.json"))
    assert json.loads(stats.read_text())["episode_lengths"] == [steps]


def test_render_without_a_renderer_keeps_the_session(
    server: ServerProcess, connect: Connect
) -> None:
    go = connect(server.ports["gym-socket"], "test/NoRenderer-v0")
    go.sock.sendall(b"\x00\x05")  # Reset, then Render (which fails: nothing is sent back)
    assert go.observation()[0] == 0
    go.sock.sendall(b"\x05\x03")
    kind, action = go.observation()  # Sample Action's reply: the session lives on
    assert kind == 0 and action in (b"0", b"1")
    assert go.step(b"1")[2] == pytest.approx(0.1)
    # The next Monitor video says why its frames are missing.
    assert go.monitor(b"runs", force=True, resume=False, video=True) == ""
    go.sock.sendall(b"\x00\x05\x03")
    go.observation()
    go.observation()
    root: Path = server.monitor_root  # type: ignore[attr-defined]
    stats = json.loads(next((root / "runs").glob("envwire.stats.*.json")).read_text())
    assert "NoRendererEnv has no renderer" in stats["video_error"]


def test_a_seed_layout_client_on_the_same_default_server(
    server: ServerProcess, connect: Connect
) -> None:
    go = connect(server.ports["gym-socket"], "CartPole-v1")
    # resume 0, force 1, a 1-byte dir: the seed has no video byte and no reply.
    go.sock.sendall(b"\x04\x00\x01" + field(b"a") + b"\x00")
    assert go.observation()[0] == 0  # the Reset's reply comes first: Monitor sent nothing
    root: Path = server.monitor_root  # type: ignore[attr-defined]
    assert (root / "a").is_dir()


@pytest.mark.parametrize("option", [["--monitor-layout", "video"], ["--legacy-monitor-reply"]])
def test_forcing_the_video_layout(tmp_path: Path, option: list[str], connect: Connect) -> None:
    with ServerProcess(["CartPole-v1"], [*option, "--monitor-root", str(tmp_path)]) as server:
        go = connect(server.ports["gym-socket"], "CartPole-v1")
        # An empty directory: the one video-layout packet auto reads as the seed's. Forced,
        # it is read as the video layout and answered (with an error string, for "").
        error = go.monitor(b"", force=False, resume=False, video=False)
        assert error == "monitor directory '' is not a usable path"
        go.sock.sendall(b"\x00")  # the session goes on
        assert go.observation()[0] == 0


def test_forcing_the_seed_layout_hangs_the_go_client(tmp_path: Path, connect: Connect) -> None:
    # Why auto is the default: read as the seed's, the Go client's Monitor never completes.
    args = ["--monitor-layout", "seed", "--monitor-root", str(tmp_path)]
    with ServerProcess(["CartPole-v1"], args) as server:
        go = connect(server.ports["gym-socket"], "CartPole-v1")
        go.sock.settimeout(1.0)
        with pytest.raises(TimeoutError):
            go.monitor(b"/home/agent/go-monitor", force=True, resume=False, video=True)
