"""What a user meets first: serving their own env from the folder they are in, and one clear
line for each mistake."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import envwire
from envwire.testing import ServerProcess

ENV_MODULE = """
import gymnasium as gym
import numpy as np


class MyEnv(gym.Env):
    observation_space = gym.spaces.Box(0, 1, (2,))
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.ones(2, np.float32), 1.0, True, False, {}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty folder holding ``mypkg/envs.py``, as a user's project would."""
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "envs.py").write_text(ENV_MODULE)
    return tmp_path


def serve(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``envwire serve`` that is expected to stop by itself (a mistake)."""
    command = [sys.executable, "-m", "envwire", "serve", *args]
    return subprocess.run(command, check=False, cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("isolation", ["", "@inline", "@process"])
def test_an_env_of_the_current_folder_is_served(project: Path, isolation: str) -> None:
    server = ServerProcess([f"my/Env-v0=mypkg.envs:MyEnv{isolation}"], cwd=project).start()
    try:
        env = envwire.make(server.url("gym-socket", "my/Env-v0"))
        obs, _ = env.reset(seed=0)
        assert obs.tolist() == [0.0, 0.0] and env.step(1)[1] == 1.0
        env.close()
    finally:
        server.stop()


def test_app_dir_names_another_folder(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    args = ["--app-dir", str(project)]
    server = ServerProcess(["my/Env-v0=mypkg.envs:MyEnv"], args, cwd=elsewhere).start()
    try:
        env = envwire.make(server.url("gym-socket", "my/Env-v0"))
        assert env.reset(seed=0)[0].shape == (2,)
        env.close()
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("nopkg.envs:MyEnv", "cannot import nopkg.envs: No module named 'nopkg'"),
        ("mypkg.envs:Nope", "mypkg.envs has no Nope"),
        ("mypkg.broken:Env", "importing it raised RuntimeError: broken at import"),
        ("mypkg.inner:Env", "cannot import mypkg.inner: No module named 'models'"),
    ],
)
def test_an_entry_point_that_cannot_be_loaded_stops_the_server(
    project: Path, entry: str, says: str
) -> None:
    (project / "mypkg" / "broken.py").write_text("raise RuntimeError('broken at import')\n")
    (project / "mypkg" / "inner.py").write_text("import models\n")
    done = serve(project, f"my/Env-v0={entry}", "--gym-socket", "0")
    assert done.returncode == 2 and "listening" not in done.stdout
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"envwire: my/Env-v0 ({entry}) cannot be loaded: ") and says in line


def test_the_others_are_served_when_allowed_and_health_says_which_is_not(project: Path) -> None:
    envs = ["my/Env-v0=mypkg.envs:MyEnv", "bad/Env-v0=nopkg:Env"]
    args = ["--allow-unavailable"]
    server = ServerProcess(envs, args, front_ends=("gym-socket", "http"), cwd=project).start()
    try:
        health = httpx.get(f"http://{server.host}:{server.ports['http']}/health", timeout=10)
        assert health.json()["status"] == "healthy"
        assert "No module named 'nopkg'" in health.json()["unavailable"]["bad/Env-v0"]
        assert "bad/Env-v0 (nopkg:Env) is unavailable" in "".join(server.output)
    finally:
        server.stop()


def test_list_exits_non_zero_when_an_env_cannot_be_made(project: Path) -> None:
    command = [sys.executable, "-m", "envwire", "list", "my/Env-v0=mypkg.envs:Nope"]
    done = subprocess.run(
        command, check=False, cwd=project, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and "cannot be made" in done.stdout
    command[-1] = "my/Env-v0=mypkg.envs:MyEnv"
    done = subprocess.run(
        command, check=False, cwd=project, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "Discrete(2)" in done.stdout


def test_a_port_in_use_is_named_with_its_flag(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = serve(tmp_path, "CartPole-v1", "--gym-socket", str(port), "--http", "0",
                     "--grpc", "0")  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"envwire: gym-socket port {port} is in use; --gym-socket N picks another, 0 a free one"
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--capacity", "0"], "--capacity: expected an integer >= 1, or none, got '0'"),
        (["--capacity", "-5"], "--capacity: expected an integer >= 1"),
        (["--step-timeout", "0"], "--step-timeout: expected a number of seconds > 0"),
        (["--idle-timeout", "-1"], "--idle-timeout: expected a number of seconds > 0"),
        (["--gym-socket", "off", "--http", "off", "--grpc", "off"], "every front end is off"),
        (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    ],
)
def test_mistakes_at_start_are_one_line(tmp_path: Path, args: list[str], says: str) -> None:
    done = serve(tmp_path, "CartPole-v1", *args)
    assert done.returncode == 2 and "listening" not in done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("envwire: ") and says in line
