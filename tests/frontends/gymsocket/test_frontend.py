"""gym-socket end to end over real loopback sockets, against a real ``envwire serve``."""

from __future__ import annotations

import json
import signal
import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import envwire
from envwire.client.gymsocket import GymSocketTransport
from envwire.errors import (
    EnvCrashedError,
    EnvTimeoutError,
    InvalidActionError,
    InvalidArgumentError,
    StateError,
    TransportError,
)
from envwire.frontends.gymsocket.requests import upload_gone
from envwire.protocols.gymsocket import Flags, Upload
from envwire.testing import ServerProcess


def field(data: bytes) -> bytes:
    return struct.pack("<I", len(data)) + data


class RawClient:
    """A byte-level client written from the seed, like the Go reference client."""

    def __init__(self, port: int, env_id: str, flags: int = 0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.sendall(bytes([flags]) + field(env_id.encode()))
        self.handshake_error = self.string()

    def exact(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return data

    def u32(self) -> int:
        return int(struct.unpack("<I", self.exact(4))[0])

    def string(self) -> str:
        return self.exact(self.u32()).decode()

    def observation(self) -> tuple[int, bytes]:
        kind = self.exact(1)[0]
        return kind, self.exact(self.u32())

    def closed(self) -> bool:
        try:
            return self.sock.recv(1) == b""
        except (ConnectionError, TimeoutError):
            return True


@pytest.fixture
def raw() -> Iterator[Any]:
    """Open RawClients, all closed at teardown."""
    opened: list[RawClient] = []

    def open_client(port: int, env_id: str, flags: int = 0) -> RawClient:
        client = RawClient(port, env_id, flags)
        opened.append(client)
        return client

    yield open_client
    for client in opened:
        client.sock.close()


def url(server: ServerProcess, env_id: str) -> str:
    return server.url("gym-socket", env_id)


# Gymnasium's checker warns about CartPole's infinite bounds, and that a remote env has no spec.
@pytest.mark.filterwarnings("ignore:.*infinity:UserWarning", "ignore:.*spec:UserWarning")
def test_cartpole_passes_gymnasiums_env_checker(gym_server: ServerProcess) -> None:
    env = envwire.make(url(gym_server, "CartPole-v1"))
    try:
        check_env(env)
    finally:
        env.close()


def test_gymnasium_make_with_the_registered_id(gym_server: ServerProcess) -> None:
    env = gymnasium.make("envwire/Remote-v0", url=url(gym_server, "CartPole-v1"))
    try:
        obs, _ = env.reset(seed=0)
        local_obs, _ = gymnasium.make("CartPole-v1").reset(seed=0)
        np.testing.assert_array_equal(obs, local_obs)
        assert env.observation_space == gymnasium.make("CartPole-v1").observation_space
    finally:
        env.close()


def test_raw_seed_client_drives_cartpole(gym_server: ServerProcess, raw: Any) -> None:
    client = raw(gym_server.ports["gym-socket"], "CartPole-v1")
    assert client.handshake_error == ""
    client.sock.sendall(b"\x02\x00\x02\x01")
    assert json.loads(client.string()) == {"type": "Discrete", "n": 2}
    obs_space = json.loads(client.string())
    assert obs_space["type"] == "Box" and obs_space["shape"] == [4]
    assert obs_space["high"][1] == 1e30
    client.sock.sendall(b"\x00")
    kind, data = client.observation()
    assert kind == 0 and len(json.loads(data)) == 4
    client.sock.sendall(b"\x01\x00" + field(b"1"))
    kind, data = client.observation()
    reward, done = struct.unpack("<d?", client.exact(9))
    info = client.string()
    assert kind == 0 and reward == 1.0 and done is False and info == "{}"
    client.sock.sendall(b"\x03")
    assert client.exact(1) == b"\x00" and client.string() in ("0", "1")


def test_raw_client_gets_byte_list_frames(gym_server: ServerProcess, raw: Any) -> None:
    client = raw(gym_server.ports["gym-socket"], "envwire/Catch-v0")
    client.sock.sendall(b"\x00")
    kind, data = client.observation()
    assert kind == 1
    ndim, *dims = struct.unpack_from("<4I", data)
    assert (ndim, dims) == (3, [10, 5, 1])
    frame = np.frombuffer(data[16:], np.uint8).reshape(dims)
    local, _ = gymnasium.make("envwire/Catch-v0").reset()
    assert frame.sum() == local.sum() == 2 * 255  # the ball and the paddle


def test_flags_zero_bad_action_closes_like_the_original(
    gym_server: ServerProcess, raw: Any
) -> None:
    client = raw(gym_server.ports["gym-socket"], "CartPole-v1")
    client.sock.sendall(b"\x00")
    client.observation()
    client.sock.sendall(b"\x01\x00" + field(b"7"))
    assert client.closed()


def test_errors_flag_reports_and_the_session_survives(gym_server: ServerProcess, raw: Any) -> None:
    client = raw(gym_server.ports["gym-socket"], "CartPole-v1", flags=0x01)
    client.sock.sendall(b"\x01\x00" + field(b"1"))  # step before reset
    assert client.exact(1) == b"\x01"
    assert "reset first" in client.string() and client.string() == "bad_state"
    client.sock.sendall(b"\x00\x01\x00" + field(b"7") + b"\x2a")
    assert client.exact(1) == b"\x00"
    client.observation()
    assert client.exact(1) == b"\x01"
    message, code = client.string(), client.string()
    assert code == "invalid_action" and "7" in message and "Discrete(2)" in message
    assert client.exact(1) == b"\x01"
    assert "unknown packet type 42" in client.string() and client.string() == "protocol_error"
    client.sock.sendall(b"\x01\x00" + field(b"0"))
    assert client.exact(1) == b"\x00"
    assert client.observation()[0] == 0


def test_unknown_env_and_unknown_flags_are_handshake_errors(
    gym_server: ServerProcess, raw: Any
) -> None:
    typo = raw(gym_server.ports["gym-socket"], "CartPol-v1")
    assert "did you mean 'CartPole-v1'" in typo.handshake_error and typo.closed()
    flags = raw(gym_server.ports["gym-socket"], "CartPole-v1", flags=0x80)
    assert "unknown handshake flags 0x80" in flags.handshake_error and flags.closed()


def test_empty_env_name_allows_only_upload_and_close(gym_server: ServerProcess, raw: Any) -> None:
    client = raw(gym_server.ports["gym-socket"], "")
    assert client.handshake_error == ""
    client.sock.sendall(b"\x06" + field(b"/tmp/mon") + field(b"key") + field(b"algo"))
    error = client.string()
    assert "scoreboard" in error and "shut down" in error
    root = gym_server.monitor_root  # type: ignore[attr-defined]
    assert f"stay in {root}/tmp/mon on the server" in error  # where Monitor put them
    client.sock.sendall(b"\x00")  # reset without an env: the original closes
    assert client.closed()


def test_upload_is_answered_by_the_front_end_beside_a_live_session(
    gym_server: ServerProcess, raw: Any
) -> None:
    # gym-socket's own packet: the front end answers it; the session's episode goes on.
    client = raw(gym_server.ports["gym-socket"], "CartPole-v1")
    client.sock.sendall(b"\x00")
    assert client.observation()[0] == 0
    client.sock.sendall(b"\x06" + field(b"../../etc") + field(b"key") + field(b"algo"))
    error = client.string()
    root = gym_server.monitor_root  # type: ignore[attr-defined]
    assert "scoreboard" in error and f"stay in {root}/etc on the server" in error
    client.sock.sendall(b"\x01\x00" + field(b"1"))
    assert client.observation()[0] == 0


def test_upload_names_where_the_monitor_keeps_the_files(tmp_path: Path) -> None:
    def answer(root: str | None, directory: str) -> str:
        return upload_gone(root, Upload(directory, "k", "a"))

    assert f"stay in {tmp_path}/runs/catch on the server" in answer(str(tmp_path), "/runs/catch")
    assert "no directory ('a\\x00b' is not a usable" in answer(str(tmp_path), "a\x00b")
    assert "no directory (Monitor is disabled" in answer(None, "/runs/catch")


def test_monitor_records_statistics_and_videos(gym_server: ServerProcess) -> None:
    env = envwire.make(url(gym_server, "envwire/Catch-v0"))
    root: Path = gym_server.monitor_root  # type: ignore[attr-defined]
    try:
        env.unwrapped.monitor("/runs/catch", force=True)
        for episode in range(2):
            env.reset(seed=episode)
            done = False
            while not done:
                _, _, terminated, truncated, _ = env.step(1)
                done = terminated or truncated
            env.unwrapped.render_remote()
        env.reset()
    finally:
        env.close()
    directory = root / "runs" / "catch"
    stats = [json.loads(p.read_text()) for p in directory.glob("envwire.stats.*.json")]
    assert len(stats) == 1 and stats[0]["episode_lengths"] == [9, 9]
    assert all(r in (-1.0, 1.0) for r in stats[0]["episode_rewards"])
    videos = sorted(directory.glob("envwire.video.*.gif"))
    assert [v.name.rsplit(".", 2)[-2] for v in videos] == ["episode000000", "episode000001"]
    from PIL import Image

    with Image.open(videos[0]) as gif:
        assert gif.n_frames == 10 and gif.size == (5 * 16, 10 * 16)


def test_monitor_refuses_a_used_directory_without_force_or_resume(
    gym_server: ServerProcess,
) -> None:
    env = envwire.make(url(gym_server, "envwire/Catch-v0"))
    try:
        env.unwrapped.monitor("used", force=True)
        env.reset(seed=0)
        env.step(1)
        env.unwrapped.monitor("used", resume=True)  # stats flushed by the switch
        env.reset(seed=0)
        env.step(1)
        with pytest.raises(InvalidArgumentError, match="already holds"):
            env.unwrapped.monitor("used")
        env.unwrapped.monitor("used", resume=True)
    finally:
        env.close()


def test_go_client_monitor_layout_with_the_legacy_option(tmp_path: Path, raw: Any) -> None:
    with ServerProcess(
        ["envwire/Catch-v0"], ["--legacy-monitor-reply", "--monitor-root", str(tmp_path)]
    ) as server:
        client = raw(server.ports["gym-socket"], "envwire/Catch-v0")
        client.sock.sendall(b"\x04\x00\x01\x01" + field(b"/go/monitor"))
        assert client.string() == ""
        assert (tmp_path / "go" / "monitor").is_dir()


def test_inline_hang_costs_only_its_connection(gym_server: ServerProcess) -> None:
    other = envwire.make(url(gym_server, "CartPole-v1"))
    env = envwire.make(url(gym_server, "test/HangInline-v0"))
    try:
        other.reset(seed=0)
        env.reset(seed=0)
        env.step(env.action_space.sample())
        with pytest.raises(EnvTimeoutError, match="did not return within"):
            env.step(env.action_space.sample())
        with pytest.raises(TransportError):
            env.reset()
        other.step(0)
        fresh = envwire.make(url(gym_server, "test/HangInline-v0"))
        fresh.reset(seed=1)
        fresh.close()
    finally:
        env.close()
        other.close()


@pytest.mark.parametrize("how", ["segfault", "exit"])
def test_crash_names_how_the_worker_died(tmp_path: Path, how: str) -> None:
    env_arg = "crash=envwire.testing.envs:CrashEnv@process"
    config = tmp_path / "envwire.toml"
    config.write_text(
        f'[[env]]\nid = "crash"\nentry_point = "envwire.testing.envs:CrashEnv"\n'
        f'isolation = "process"\nkwargs = {{ crash_at = 1, how = "{how}" }}\n'
    )
    del env_arg
    with ServerProcess([], ["--config", str(config)]) as server:
        env = envwire.make(server.url("gym-socket", "crash"))
        env.reset(seed=0)
        with pytest.raises(EnvCrashedError) as caught:
            env.step(env.action_space.sample())
        expected = "SIGSEGV" if how == "segfault" else "exited with code 3"
        assert expected in str(caught.value)
        env.reset(seed=0)  # a fresh worker
        env.close()


def test_fifty_concurrent_clients(gym_server: ServerProcess) -> None:
    errors: list[BaseException] = []
    returns: list[float] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        try:
            env = envwire.make(url(gym_server, "CartPole-v1"))
            local = gymnasium.make("CartPole-v1")
            obs, _ = env.reset(seed=i)
            expected, _ = local.reset(seed=i)
            np.testing.assert_array_equal(obs, expected)
            total = 0.0
            for t in range(200):
                action = (i + t) % 2
                got, want = env.step(action), local.step(action)
                np.testing.assert_array_equal(got[0], want[0])
                total += got[1]
                if got[2] or got[3]:
                    break
            env.close()
            with lock:
                returns.append(total)
        except BaseException as exc:
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    assert len(returns) == 50


def test_pipelined_requests_come_back_in_order(gym_server: ServerProcess) -> None:
    transport = GymSocketTransport("127.0.0.1", gym_server.ports["gym-socket"], "CartPole-v1")
    try:
        from envwire import messages as m

        transport.send(m.Reset(seed=0))
        for _ in range(20):
            transport.send(m.Step(np.int64(1)))
        transport.send(m.Step(np.int64(9)))
        transport.send(m.GetSpace(m.SpaceKind.ACTION))
        assert isinstance(transport.receive(), m.ResetReply)
        local = gymnasium.make("CartPole-v1")
        local.reset(seed=0)
        done = False
        for _ in range(20):
            if done:  # the episode ended: stepping on is refused, in order
                with pytest.raises(StateError, match="reset first"):
                    transport.receive()
                continue
            expected = local.step(1)
            got = transport.receive()
            assert isinstance(got, m.StepReply)
            np.testing.assert_array_equal(got.observation, expected[0])
            done = got.done
        with pytest.raises((StateError, InvalidActionError)):
            transport.receive()
        assert transport.receive().space == local.action_space
    finally:
        transport.close()


def test_seed_flags_client_still_gets_seed_shapes(gym_server: ServerProcess) -> None:
    env = envwire.make(url(gym_server, "CartPole-v1"), flags=Flags(0))
    try:
        obs, info = env.reset()
        assert obs in env.observation_space and info == {}
        assert env.observation_space.high[1] == np.float32(1e30)  # the seed's clipped bounds
        assert env.step(0)[3] is False
    finally:
        env.close()


def test_sigterm_shuts_down_cleanly() -> None:
    server = ServerProcess(["CartPole-v1"]).start()
    env = envwire.make(url(server, "CartPole-v1"))
    env.reset(seed=0)
    assert server.process is not None
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(15) == 0
    env.close()
    server.stop()


def test_sigint_shuts_down_cleanly() -> None:
    server = ServerProcess(["CartPole-v1"]).start()
    assert server.process is not None
    server.process.send_signal(signal.SIGINT)
    assert server.process.wait(15) == 0
    server.stop()


def test_envwire_list_prints_spaces() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "envwire", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "CartPole-v1  [inline]" in out and "action:      Discrete(2)" in out
    assert "envwire/Catch-v0" in out and "Pendulum-v1" in out


def test_serve_refuses_unknown_ids_with_suggestions() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "envwire", "serve", "CartPol-v1"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert run.returncode == 2 and "did you mean 'CartPole-v1'" in run.stderr


def test_silent_connections_are_dropped_after_the_idle_timeout(raw: Any) -> None:
    with ServerProcess(["CartPole-v1"], ["--idle-timeout", "0.5", "--capacity", "1"]) as server:
        silent = raw(server.ports["gym-socket"], "CartPole-v1")
        assert silent.handshake_error == ""
        assert silent.closed()  # the server hung up on the silent client
        env = envwire.make(url(server, "CartPole-v1"))  # and freed its session
        env.reset(seed=0)
        env.close()


def test_remote_env_pipelines_steps(gym_server: ServerProcess) -> None:
    env = envwire.make(url(gym_server, "CartPole-v1"))
    local = gymnasium.make("CartPole-v1")
    try:
        env.reset(seed=4)
        local.reset(seed=4)
        for _ in range(5):
            env.unwrapped.step_async(1)
        for _ in range(5):
            np.testing.assert_array_equal(env.unwrapped.step_wait()[0], local.step(1)[0])
    finally:
        env.close()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(flags=st.sampled_from([0, 1, 5, 7]), garbage=st.binary(min_size=1, max_size=300))
def test_garbage_never_kills_the_server(
    gym_server: ServerProcess, flags: int, garbage: bytes
) -> None:
    sock = socket.create_connection(("127.0.0.1", gym_server.ports["gym-socket"]), timeout=10)
    try:
        sock.sendall(bytes([flags]) + field(b"CartPole-v1") + garbage)
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):  # the server answers what it can, then closes: never hangs
            pass
    finally:
        sock.close()
    env = envwire.make(url(gym_server, "CartPole-v1"))
    env.reset(seed=0)
    env.close()


def test_typed_envs_are_refused_with_a_pointer_to_openenv() -> None:
    with (
        ServerProcess(["envwire/Echo-v0"]) as server,
        pytest.raises(TransportError, match=r"typed env: use its OpenEnv front end"),
    ):
        envwire.make(url(server, "envwire/Echo-v0"))
