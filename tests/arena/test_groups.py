"""Groups of envs (the AISysProj server's pages of envs and subgroups)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envwire.arena.admin import ArenaAdmin
from envwire.arena.errors import ConflictError, NotFoundError
from envwire.arena.groups import Groups
from envwire.arena.store import Store
from envwire.errors import InvalidArgumentError


def test_groups(tmp_path: Path) -> None:
    store = Store(tmp_path / "arena.sqlite3")
    ArenaAdmin(store).create_env("nim", "envwire/Nim-v0")
    groups = Groups(store)
    main = groups.get("main")  # always there: the front page
    assert (main.title, main.envs, main.subgroups) == ("Arena", (), ())
    groups.make("ss25", "Summer 2025", "<p>the course</p>")
    with pytest.raises(ConflictError):
        groups.make("ss25", "again", "")
    groups.make("ss25", "Summer term 2025", "", replace=True)
    groups.add("ss25", "env", "nim")
    groups.add("ss25", "env", "nim")  # twice is once
    groups.add("main", "group", "ss25")
    assert groups.get("ss25").envs == ("nim",)
    assert groups.get("main").subgroups == ("ss25",)
    assert [g.title for g in groups.of_env("nim")] == ["Summer term 2025"]
    with pytest.raises(NotFoundError, match="no arena env 'nope'"):
        groups.add("ss25", "env", "nope")
    with pytest.raises(NotFoundError, match="no group 'nope'"):
        groups.add("nope", "env", "nim")
    with pytest.raises(InvalidArgumentError):
        groups.make("a/b", "x", "")
    groups.delete("ss25")
    assert groups.get("main").subgroups == ()
    assert [g.name for g in groups.all()] == ["main"]
    groups.add("main", "env", "nim")
    groups.delete("main")  # emptied, not deleted
    assert groups.get("main").envs == ()
    with pytest.raises(NotFoundError):
        groups.delete("ss25")
    store.close()
