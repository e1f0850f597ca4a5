"""Migrating an AISysProj server's database: accounts keep their passwords, ratings and the
leaderboard stay as that server showed them and go on moving by its rule, runs keep their ids
and unfinished plugin runs go on, groups and admin passwords come along; a failed migration
writes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envwire.arena.admin import ArenaAdmin
from envwire.arena.aisys.admin import CourseAdmin
from envwire.arena.aisys.database import read_database
from envwire.arena.aisys.migrate import migrate
from envwire.arena.aisys.plugins import PluginFolder
from envwire.arena.core import Arena
from envwire.arena.errors import AuthenticationError
from envwire.arena.groups import Groups
from envwire.arena.store import Store
from envwire.errors import ConfigError
from envwire.runtime import make_worker
from tests.arena.aisys.original_db import OriginalDB, sha256_hash


@pytest.fixture
def original(tmp_path: Path) -> Path:
    db = OriginalDB(tmp_path / "aisysprojserver.db")
    db.env("cd", "countdown.env:Countdown", {"start": 5}, "Countdown (course)")
    db.account("cd", "alice", "pw-a")
    db.account("cd", "bob [2]", "pw-b", locked=True)
    db.account("cd", "carol", "pw-c")  # never finished a run: no ratings row
    # what that server stored after these agents' runs (3 runs make an agent fully evaluated)
    db.ratings("cd", "alice", [1, 0, 1], total=7, best=0.75, current=2 / 3, fully=True,
               recent_runs=[10])  # fmt: skip
    db.ratings("cd", "bob [2]", [0], total=1, best=0.0, current=0.0, fully=False)
    db.ratings("cd", "dave", [1, 1, 1], total=3, best=1.0, current=1.0, fully=True)
    db.run(
        10, "cd", "alice", {"left": 0, "moves": 2}, [(2, 1), (2, None)], outcome=1, finished=True
    )
    db.run(11, "cd", "bob [2]", {"left": 0, "moves": 3}, [(1, 1), (1, 1), (1, 1)], outcome=0,
           finished=True)  # fmt: skip
    db.run(12, "cd", "alice", {"left": 3, "moves": 1}, [(1, 1)], outstanding=True)
    db.group("main", "The course", "<b>welcome</b>", envs=["cd"], subgroups=["old"])
    db.group("old", "Last year", "")
    db.close()
    return db.path


def act(arena: Arena, agent: str, pwd: str, **body: Any) -> tuple[int, dict[str, Any]]:
    request = {"agent": agent, "pwd": pwd, "protocol_version": 1, **body}
    status, reply = arena.handle_act("cd", json.dumps(request).encode(), "application/json")
    return status, json.loads(reply)


def migrated(original: Path, tmp_path: Path, folder: PluginFolder, **options: Any) -> Arena:
    store = Store(tmp_path / "arena.sqlite3")
    migrate(read_database(original), store, admin_hashes=[sha256_hash("admin-pw")], **options)
    return Arena(store, worker_factory=make_worker)


def test_the_leaderboard_is_the_one_the_original_showed(
    original: Path, tmp_path: Path, folder: PluginFolder
) -> None:
    arena = migrated(original, tmp_path, folder)
    try:
        # the original's /results/<env>: best rating once fully evaluated, else the initial
        assert CourseAdmin(arena, folder).results("cd") == {
            "alice": {"rating": 0.75, "fully-evaluated": True, "total-runs": 7},
            "bob [2]": {"rating": 0.0, "fully-evaluated": False, "total-runs": 1},
            "dave": {"rating": 1.0, "fully-evaluated": True, "total-runs": 3},
        }
        from envwire.arena.web.pages import ranked

        board = ranked(arena.store.agents("cd"), "max")
        assert [a.name for a in board if a.fully_evaluated] == ["dave", "alice"]
        assert [(a.rating, a.best_rating) for a in board[:2]] == [(1.0, 1.0), (2 / 3, 0.75)]
        env = arena.store.env("cd")
        assert env is not None
        assert (env.display_name, env.env_id) == ("Countdown (course)",
                                                 "aisys:countdown.env:Countdown")  # fmt: skip
    finally:
        arena.close()


def test_accounts_runs_and_ratings_go_on(
    original: Path, tmp_path: Path, folder: PluginFolder
) -> None:
    arena = migrated(original, tmp_path, folder)
    try:
        # the old password works, and is then stored as a scrypt hash
        status, reply = act(arena, "alice", "pw-a")
        assert status == 200, reply
        assert arena.store.agent("cd", "alice").pwd_hash.startswith("scrypt$")  # type: ignore[union-attr]
        status, reply = act(arena, "alice", "pw-a")
        assert status == 200
        assert act(arena, "bob [2]", "pw-b")[0] == 401  # locked there, blocked here
        assert act(arena, "dave", "")[0] == 401  # ratings but no account
        assert act(arena, "carol", "pw-c")[0] == 200
        # the unfinished run goes on where it was
        asked = {r["run"]: r for r in reply["action_requests"]}
        assert asked["12"]["act_no"] == 1
        assert asked["12"]["percept"] == {"left": 3, "history": 1}
        status, reply = act(arena, "alice", "pw-a",
                            actions=[{"run": "12", "act_no": 1, "action": 2}])  # fmt: skip
        assert reply["finished_runs"] == {"12": 0}
        # the rating moved as the original's would: the last 3 of [1, 0, 1] + [0]
        alice = arena.store.agent("cd", "alice")
        assert alice is not None
        assert alice.total_runs == 8
        assert alice.rating == pytest.approx(1 / 3)
        assert alice.best_rating == 0.75
        # new runs come after the carried ones; the old run keeps its history
        assert all(int(r["run"]) > 12 for r in reply["action_requests"])
        assert [s.action for s in arena.store.steps(10)] == ["2", "2"]
        run = arena.store.run(10)
        assert run is not None
        assert (run.finished, run.outcome) == (True, "1")
    finally:
        arena.close()


def test_groups_and_admin_passwords_come_along(
    original: Path, tmp_path: Path, folder: PluginFolder
) -> None:
    arena = migrated(original, tmp_path, folder)
    try:
        main = Groups(arena.store).get("main")
        assert (main.title, main.description_html, main.envs, main.subgroups) == (
            "The course", "<b>welcome</b>", ("cd",), ("old",),
        )  # fmt: skip
        arena.admin.check_admin_token("admin-pw")
        with pytest.raises(AuthenticationError):
            arena.admin.check_admin_token("wrong")
    finally:
        arena.close()


def test_an_env_mapped_to_a_catalog_env(original: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "arena.sqlite3")
    admin = ArenaAdmin(store)
    report = migrate(
        read_database(original),
        store,
        env_map={"cd": "envwire/Nim-v0"},
        make_mapped_env=lambda env, env_id: admin.env_row(env.name, env_id,
                                                          display_name=env.display_name),
    )  # fmt: skip
    env = store.env("cd")
    assert env is not None
    assert env.env_id == "envwire/Nim-v0"
    assert store.run(12) is None  # an unfinished run cannot go on in another env
    assert store.run(10) is not None
    assert any("run 12" in s for s in report.skipped)
    assert report.envs["cd"] == {"agents": 3, "runs": 2, "unfinished_runs": 0}
    store.close()


def test_failed_migrations_write_nothing(original: Path, tmp_path: Path) -> None:
    store = Store(tmp_path / "arena.sqlite3")
    with pytest.raises(ConfigError, match="does not import"):
        migrate(read_database(original), store)  # the plugin is not on the path
    assert store.envs() == []
    with pytest.raises(ConfigError, match="names envs the database does not have"):
        migrate(read_database(original), store, env_map={"nope": "x"})
    store.close()


def test_only_into_a_database_without_runs(
    original: Path, tmp_path: Path, folder: PluginFolder
) -> None:
    arena = migrated(original, tmp_path, folder)
    arena.close()
    store = Store(tmp_path / "arena.sqlite3")
    with pytest.raises(ConfigError, match="already holds 3 runs"):
        migrate(read_database(original), store)
    store.close()
