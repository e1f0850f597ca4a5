"""How a game command becomes an argument list and a working directory (no shell, ever)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envwire.errors import ConfigError
from envwire.kinds.godot.launch import split_command


def test_a_list_is_taken_as_it_is() -> None:
    assert split_command(["godot", "a b.tscn"], "/here") == (["godot", "a b.tscn"], "/here")


def test_a_string_is_split_like_a_shell_would() -> None:
    assert split_command('godot --path "my game" x.tscn') == (
        ["godot", "--path", "my game", "x.tscn"],
        None,
    )


def test_gymgodot_cd_form() -> None:
    command = "cd /home/me/proj && flatpak run org.godotengine.Godot ./examples/Root.tscn"
    assert split_command(command) == (
        ["flatpak", "run", "org.godotengine.Godot", "./examples/Root.tscn"],
        Path("/home/me/proj"),
    )
    assert split_command('cd "my proj"&&godot s.tscn', "/base") == (
        ["godot", "s.tscn"],
        Path("/base/my proj"),
    )
    assert split_command("cd ~/proj && godot")[1] == Path.home() / "proj"


def test_unbalanced_quotes() -> None:
    with pytest.raises(ConfigError, match="cannot split the game command"):
        split_command('godot "scene')
