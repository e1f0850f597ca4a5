"""Fixtures for the Godot tests: the real headless Godot 3, the example project, fake games."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from envwire.kinds.godot import GodotEnv

__all__: list[str] = []

REPO = Path(__file__).resolve().parents[3]
EXAMPLE_PROJECT = REPO / "godot" / "example"
FAKE_GAME = Path(__file__).resolve().with_name("fake_game.py")


@pytest.fixture(scope="session")
def godot_binary() -> str:
    """The headless Godot 3 binary: $ENVWIRE_GODOT, or godot3-server on PATH; else skip."""
    binary = os.environ.get("ENVWIRE_GODOT") or shutil.which("godot3-server")
    if not binary:
        pytest.skip(
            "needs a headless Godot 3: install Debian's godot3-server "
            "(apt-get install godot3-server) or set ENVWIRE_GODOT"
        )
    return binary


@pytest.fixture(scope="session")
def example_project() -> Path:
    """The example Godot project (1-D reach the target), with the addon linked in."""
    return EXAMPLE_PROJECT


@pytest.fixture(scope="session")
def fake_game_cmd() -> Callable[[str], list[str]]:
    """Turns a mode into the command that launches ``fake_game.py`` in that mode."""

    def command(mode: str) -> list[str]:
        return [sys.executable, str(FAKE_GAME), f"--mode={mode}"]

    return command


@pytest.fixture
def free_port() -> int:
    """A port that was free a moment ago (bound, then released): nobody listens there."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def make_env() -> Iterator[Callable[..., GodotEnv]]:
    """Build GodotEnvs that are closed after the test, whatever happens."""
    made: list[GodotEnv] = []

    def make(*args: object, **kwargs: object) -> GodotEnv:
        env = GodotEnv(*args, **kwargs)  # type: ignore[arg-type]
        made.append(env)
        return env

    yield make
    for env in made:
        env.close()
