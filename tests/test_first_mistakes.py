"""More of what a new user meets first, each as they meet it: the command they type, and the
one line it answers (a typo in an ``[[env]]``'s kwargs, a dot for the colon, a port in use)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

import envwire
from envwire.errors import UnknownEnvError
from envwire.testing import ServerProcess

GRID = """
import gymnasium as gym
import numpy as np


class Grid(gym.Env):
    observation_space = gym.spaces.Box(0, 1, (2,))
    action_space = gym.spaces.Discrete(2)

    def __init__(self, rows=4, cols=4, render_mode=None):
        self.rows, self.cols = rows, cols

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {"rows": self.rows}

    def step(self, action):
        return np.ones(2, np.float32), 1.0, True, False, {}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "envs.py").write_text(GRID)
    return tmp_path


def envwire_command(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m envwire ARGS`` that is expected to stop by itself."""
    command = [sys.executable, "-m", "envwire", *args]
    return subprocess.run(command, check=False, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_a_typo_in_kwargs_stops_the_server_naming_file_env_and_key(project: Path) -> None:
    (project / "envwire.toml").write_text(
        '[[env]]\nid = "my/Grid-v0"\nentry_point = "mypkg.envs:Grid"\nkwargs = { rowz = 8 }\n\n'
        '[[env]]\nid = "CartPole-v1"\nkwargs = { max_episode_steps = 50, sutton_barto = 1 }\n'
    )
    done = envwire_command(project, "serve", "--config", "envwire.toml", "--gym-socket", "0")
    assert done.returncode == 2 and "listening" not in done.stdout
    assert done.stderr.splitlines() == [
        "envwire: envwire.toml [[env]] my/Grid-v0: kwargs has 'rowz', which Grid does not take: "
        "did you mean 'rows'? (it takes rows, cols, render_mode)",
        "envwire: envwire.toml [[env]] CartPole-v1: kwargs has 'sutton_barto', which CartPoleEnv "
        "does not take: did you mean 'sutton_barto_reward'? (it takes sutton_barto_reward, "
        "render_mode)",
    ]


def test_kwargs_the_env_takes_are_served(project: Path) -> None:
    (project / "envwire.toml").write_text(
        '[[env]]\nid = "my/Grid-v0"\nentry_point = "mypkg.envs:Grid"\nkwargs = { rows = 8 }\n'
    )
    with ServerProcess([], ["--config", "envwire.toml"], cwd=project) as server:
        env = envwire.make(server.url("gym-socket", "my/Grid-v0"))
        assert env.reset(seed=0)[1]["rows"] == 8
        env.close()


@pytest.mark.parametrize(
    ("arg", "fixed"),
    [
        ("my/Env-v0=mypkg.envs.Grid", "my/Env-v0=mypkg.envs:Grid"),
        ("my/Env-v0=mypkg.envs.Grid@process", "my/Env-v0=mypkg.envs:Grid@process"),
        ("mypkg.envs.Grid", "mypkg.envs:Grid"),
    ],
)
def test_a_dot_for_the_colon_gets_the_module_class_form(
    project: Path, arg: str, fixed: str
) -> None:
    done = envwire_command(project, "serve", arg, "--gym-socket", "0")
    assert done.returncode == 2 and "listening" not in done.stdout
    name = arg.partition("=")[2].partition("@")[0] or arg
    assert done.stderr == (
        f"envwire: unknown env id {name!r}: Gymnasium has no such id; a class or factory is "
        f"named module:Class ({fixed})\n"
    )


def test_a_dot_for_the_colon_in_a_config_file_gets_the_form_too(project: Path) -> None:
    (project / "envwire.toml").write_text(
        '[[env]]\nid = "my/Grid-v0"\nentry_point = "mypkg.envs.Grid"\n'
    )
    done = envwire_command(project, "serve", "--config", "envwire.toml", "--gym-socket", "0")
    assert done.returncode == 2 and "listening" not in done.stdout
    assert done.stderr.startswith(
        "envwire: my/Grid-v0 (mypkg.envs.Grid) cannot be loaded: entry point 'mypkg.envs.Grid' "
        "must look like 'package.module:Name' (mypkg.envs:Grid?)"
    )


@pytest.mark.parametrize("taken", ["grpc", "http", "gym-socket"])
def test_a_port_in_use_is_one_line_before_anything_listens(tmp_path: Path, taken: str) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        ports = {"gym-socket": "0", "http": "0", "grpc": "0", taken: str(port)}
        flags = [part for name, value in ports.items() for part in (f"--{name}", value)]
        done = envwire_command(tmp_path, "serve", "CartPole-v1", *flags)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (
        f"envwire: {taken} port {port} is in use; --{taken} N picks another, 0 a free one\n"
    )


@pytest.fixture(scope="module")
def every_front_end() -> Iterator[ServerProcess]:
    with ServerProcess(["CartPole-v1"], front_ends=("gym-socket", "http", "grpc")) as server:
        yield server


@pytest.mark.parametrize(
    ("scheme", "front_end", "prefix"),
    [("gym-socket", None, ""), ("ws", "http", "envs/"), ("http", None, "envs/"),
     ("grpc", None, "")],
)  # fmt: skip
def test_an_unknown_env_is_the_same_error_over_every_scheme(
    every_front_end: ServerProcess, scheme: str, front_end: str | None, prefix: str
) -> None:
    url = every_front_end.url(scheme, prefix + "CartPol-v1", front_end)
    with pytest.raises(UnknownEnvError, match=r"unknown env 'CartPol-v1'; did you mean"):
        envwire.make(url, timeout=30)


def _imported(command: list[str], cwd: Path) -> set[str]:
    """The modules ``command`` (a Python run with ``-X importtime``) imports; it must print the
    version and nothing else."""
    done = subprocess.run(command, check=False, cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == f"envwire {envwire.__version__}\n"
    return {line.split("|")[-1].strip() for line in done.stderr.splitlines()}


def test_the_command_answers_version_without_importing_the_package(tmp_path: Path) -> None:
    # what the installed ``envwire`` script runs (pyproject.toml's [project.scripts])
    script = "import sys; from _envwire_command import main; sys.exit(main(['--version']))"
    imported = _imported([sys.executable, "-X", "importtime", "-c", script], tmp_path)
    assert "_envwire_command" in imported
    assert not {"envwire", "gymnasium", "numpy"} & imported
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["envwire"] == "_envwire_command:main"


def test_python_m_envwire_version_does_not_import_the_server(tmp_path: Path) -> None:
    command = [sys.executable, "-X", "importtime", "-m", "envwire", "--version"]
    imported = _imported(command, tmp_path)
    assert "envwire._version" in imported
    assert not {"envwire.cli", "envwire.app", "grpc", "envwire.server"} & imported


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_says_the_server_is_shutting_down_and_when_it_is_done(workers: int) -> None:
    server = ServerProcess(["CartPole-v1"], workers=workers).start()
    try:
        env = envwire.make(server.url("gym-socket", "CartPole-v1"))
        env.reset(seed=0)
        assert server.process is not None
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(60) == 0
        env.close()
    finally:
        server.stop()
    assert server.wait_for(lambda: "envwire: stopped\n" in server.output)
    said = [line for line in server.output if "listening on" not in line]
    assert said == ["envwire: shutting down (1 session open)\n", "envwire: stopped\n"]
