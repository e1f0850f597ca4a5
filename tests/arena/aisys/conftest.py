"""Fixtures of the AISysProj compatibility tests: a plugins folder with the test plugin, and an
arena whose env ``cd`` is that plugin."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from envwire.arena.aisys import plugins
from envwire.arena.aisys.admin import CourseAdmin
from envwire.arena.aisys.plugins import PluginFolder
from envwire.arena.core import Arena
from envwire.arena.store import Store
from envwire.runtime import make_worker
from tests.arena.aisys.plugin_env import write_plugin


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[PluginFolder]:
    folder = PluginFolder(tmp_path / "plugins")
    write_plugin(folder.path)
    yield folder
    sys.path.remove(str(folder.path))
    plugins.forget_package("countdown")


@pytest.fixture
def arena(tmp_path: Path, folder: PluginFolder) -> Iterator[Arena]:
    arena = Arena(Store(tmp_path / "arena.sqlite3"), worker_factory=make_worker)
    CourseAdmin(arena, folder).make_env(
        "cd", "countdown.env:Countdown", "Countdown", {"start": 5}, overwrite=False
    )
    yield arena
    arena.close()
