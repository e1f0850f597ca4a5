"""Pooled isolation against an env that snoops on the server from its pool worker: what the
worker gave up (:mod:`envwire.runtime.confine`), through a real server with tokens."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import envwire
from envwire.runtime.confine import landlock_abi
from envwire.testing import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "pool-test-token-0123456789"
LANDLOCK = landlock_abi()
needs_landlock = pytest.mark.skipif(not LANDLOCK, reason="this kernel has no Landlock")


@pytest.fixture(scope="module")
def token_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("secrets") / "tokens.txt"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def server(token_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    config = tmp_path_factory.mktemp("pool-config") / "envwire.toml"
    config.write_text(
        f'[server]\ntoken_file = "{token_file}"\n\n'
        '[[env]]\nid = "test/Snoop-v0"\nentry_point = "tests.runtime.snoop:SnoopEnv"\n'
        f'isolation = "pool"\nkwargs = {{ token_file = "{token_file}" }}\n'
    )
    with ServerProcess([], ("--config", str(config)), cwd=ROOT) as proc:
        yield proc


def snoop(server: ServerProcess, action: int) -> str:
    env = envwire.make(server.url("gym-socket", "test/Snoop-v0"), token=TOKEN)
    try:
        env.reset()
        info = env.step(action)[4]
    finally:
        env.close()
    return str(info["outcome"])


@needs_landlock
def test_a_pooled_env_cannot_read_or_link_the_token_file(server: ServerProcess) -> None:
    assert snoop(server, 0) == "PermissionError errno 13"
    assert not snoop(server, 3).startswith("ok")  # no hard link to read it by (EXDEV)


@needs_landlock
def test_a_pooled_env_cannot_reach_the_server_process(server: ServerProcess) -> None:
    assert snoop(server, 2) == "PermissionError errno 13"  # no ptrace access: not its memory
    if LANDLOCK >= 6:
        assert snoop(server, 1) == "PermissionError errno 1"  # no signals
    assert server.process is not None and server.process.poll() is None


def test_a_pooled_env_holds_none_of_the_servers_descriptors_nor_its_group(
    server: ServerProcess,
) -> None:
    outcome = snoop(server, 4)
    assert outcome.startswith("same group: False"), outcome
    fds: dict[int, str] = ast.literal_eval(outcome.partition("fds: ")[2])
    beyond = {fd: target for fd, target in fds.items() if fd > 2 and target != "/dev/null"}
    # Its own pipes to the server (one each way), multiprocessing's resource tracker and parent
    # sentinel (pipes); everything else it inherited now points at /dev/null.
    assert sorted(t.partition(":")[0] for t in beyond.values()) == ["pipe"] * 4, fds


def test_serve_help_lists_the_pool() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "envwire", "serve", "--help"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "@inline, @process, @pool or @ray" in " ".join(shown.split())
