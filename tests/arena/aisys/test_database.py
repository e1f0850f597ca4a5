"""Reading an AISysProj server database: every table, and clear errors for what does not read."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from envwire.arena.aisys.database import read_database
from envwire.errors import ConfigError
from tests.arena.aisys.original_db import OriginalDB, sha256_hash


@pytest.fixture
def original(tmp_path: Path) -> OriginalDB:
    db = OriginalDB(tmp_path / "aisysprojserver.db")
    db.env("nim", "countdown.env:Countdown", {"start": 5}, "Nim (course)")
    db.account("nim", "alice", "pw-a")
    db.account("nim", "team [3]", "pw-b", locked=True)
    db.ratings("nim", "alice", [1, 0, 1], total=3, best=0.0, current=2 / 3, fully=False,
               recent_runs=[1, 2, 3])  # fmt: skip
    db.run(1, "nim", "alice", {"left": 0}, [(2, 1), (2, None)], outcome=1, finished=True)
    db.run(4, "nim", "alice", {"left": 3}, [(2, None)], outstanding=True)
    db.group("main", "Course", "<p>hi</p>", envs=["nim"], subgroups=["old"])
    db.group("old", "Last year", "")
    db.close()
    return db


def test_reads_every_table(original: OriginalDB) -> None:
    data = read_database(original.path)
    (env,) = data.envs
    assert (env.name, env.env_class, env.display_name, env.config) == (
        "nim", "countdown.env:Countdown", "Nim (course)", {"start": 5},
    )  # fmt: skip
    accounts = {a.agent: a for a in data.accounts}
    assert accounts["alice"].password_hash == sha256_hash("pw-a")
    assert not accounts["alice"].locked
    assert accounts["team [3]"].locked
    (ratings,) = data.ratings
    assert ratings.agent == "alice"
    assert ratings.recent_results == (1, 0, 1)
    assert ratings.recent_runs == (1, 2, 3)
    assert (ratings.total_runs, ratings.fully_evaluated) == (3, False)
    assert ratings.current_rating == pytest.approx(2 / 3)
    finished, unfinished = data.runs
    assert (finished.id, finished.finished, finished.outcome) == (1, True, 1)
    assert finished.history == ((2, 1), (2, None))
    assert (unfinished.id, unfinished.outstanding, unfinished.state) == (4, True, {"left": 3})
    assert unfinished.outcome is None
    groups = {g.name: g for g in data.groups}
    assert groups["main"].envs == ("nim",)
    assert groups["main"].subgroups == ("old",)
    assert groups["main"].description_html == "<p>hi</p>"
    assert groups["old"].envs == ()


def test_missing_or_foreign_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no database file"):
        read_database(tmp_path / "missing.db")
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.close()
    with pytest.raises(ConfigError, match="not an AISysProj server database"):
        read_database(other)
    (tmp_path / "text.db").write_text("not sqlite at all, just some text" * 10)
    with pytest.raises(ConfigError, match="cannot read"):
        read_database(tmp_path / "text.db")


def test_bad_rows_are_named(tmp_path: Path) -> None:
    db = OriginalDB(tmp_path / "a.db")
    db.env("nim", "m:C", {})
    db.db.execute("INSERT INTO runs VALUES (7, 'nim', 'nim/a', 0, 0, '{broken', '[]', 'null')")
    db.close()
    with pytest.raises(ConfigError, match="runs 7: not JSON"):
        read_database(db.path)
    db = OriginalDB(tmp_path / "b.db")
    db.account("nim", "x", "p")
    db.db.execute("UPDATE accounts SET identifier = 'other/x'")
    db.close()
    with pytest.raises(ConfigError, match="not 'nim/<agent>'"):
        read_database(db.path)


def test_malformed_values_are_config_errors_that_name_the_row(tmp_path: Path) -> None:
    db = OriginalDB(tmp_path / "ids.db")
    db.env("nim", "m:C", {})
    db.ratings("nim", "a", [1], total=1, best=1.0, current=1.0, fully=False)
    db.db.execute("UPDATE agents SET recently_finished_runs = '[1, {\"id\": 2}]'")
    db.close()
    with pytest.raises(ConfigError, match=r"agents 'nim/a': recent runs must be run ids"):
        read_database(db.path)
    db = OriginalDB(tmp_path / "pairs.db")
    db.env("nim", "m:C", {})
    db.db.execute("INSERT INTO runs VALUES (7, 'nim', 'nim/a', 0, 0, 'null', '[[1]]', 'null')")
    db.close()
    with pytest.raises(ConfigError, match=r"runs 7: history must be a JSON list of \[action"):
        read_database(db.path)


def test_older_databases_without_groups(tmp_path: Path) -> None:
    db = OriginalDB(tmp_path / "old.db")
    db.env("nim", "m:C", None)
    db.db.executescript("DROP TABLE groups; DROP TABLE group_entries;")
    db.close()
    data = read_database(db.path)
    assert data.groups == []
    assert data.envs[0].config is None
