"""``envwire arena import-agents``, ``migrate`` and ``admin-token --from-stdin``."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envwire.arena.accounts import verify_secret
from envwire.arena.admin import ArenaAdmin
from envwire.arena.aisys import plugins
from envwire.arena.store import Store
from envwire.cli import main
from tests.arena.aisys.original_db import OriginalDB, sha256_hash
from tests.arena.aisys.plugin_env import write_plugin


def arena(capsys: pytest.CaptureFixture[str], db: Path, *args: str) -> Any:
    status = main(["arena", args[0], "--db", str(db), *args[1:]])
    captured = capsys.readouterr()
    assert status == 0, captured
    return json.loads(captured.out)


def fail(capsys: pytest.CaptureFixture[str], db: Path, *args: str) -> str:
    status = main(["arena", args[0], "--db", str(db), *args[1:]])
    assert status != 0
    return capsys.readouterr().err


def config(tmp_path: Path, agent: str, pwd: str, env: str = "nim") -> Path:
    path = tmp_path / f"{agent}.json"
    path.write_text(json.dumps({"agent": agent, "pwd": pwd, "env": env,
                                "url": "https://aisysproj.example.org/"}))  # fmt: skip
    return path


def test_import_agents_keeps_their_passwords(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "arena.sqlite3"
    ArenaAdmin(Store(db)).create_env("nim", "envwire/Nim-v0")
    files = [config(tmp_path, "alice", "alice-password-1"),
             config(tmp_path, "team [3]", "team-password-3")]  # fmt: skip
    done = arena(capsys, db, "import-agents", "nim", *map(str, files))
    assert done == {"env": "nim", "agents": ["alice", "team [3]"],
                    "urls": ["https://aisysproj.example.org/"]}  # fmt: skip
    store = Store(db)
    stored = store.agent("nim", "team [3]")
    assert stored is not None
    assert stored.pwd_hash.startswith("scrypt$")
    assert "team-password-3" not in stored.pwd_hash
    assert verify_secret("team-password-3", stored.pwd_hash)
    store.close()
    # again: the agents exist now
    assert "exists in 'nim'" in fail(capsys, db, "import-agents", "nim", str(files[0]))
    renewed = config(tmp_path, "alice", "a-new-password")
    arena(capsys, db, "import-agents", "nim", str(renewed), "--replace")
    store = Store(db)
    assert verify_secret("a-new-password", store.agent("nim", "alice").pwd_hash)  # type: ignore[union-attr]
    store.close()


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "cannot read a JSON config file"),
        ('["agent"]', "expected a JSON object"),
        ('{"agent": "a", "pwd": 5, "env": "nim", "url": ""}', "'pwd' must be a string"),
        ('{"agent": "a/b", "pwd": "p", "env": "nim", "url": ""}', "cannot be served"),
        ('{"agent": "a", "pwd": "", "env": "nim", "url": ""}', "printable characters"),
        ('{"agent": "a", "pwd": "p", "env": "other", "url": ""}', "for env 'other'"),
    ],
)
def test_import_agents_checks_every_file_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, problem: str
) -> None:
    db = tmp_path / "arena.sqlite3"
    ArenaAdmin(Store(db)).create_env("nim", "envwire/Nim-v0")
    good = config(tmp_path, "good", "good-password")
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert problem in fail(capsys, db, "import-agents", "nim", str(good), str(bad))
    store = Store(db)
    assert store.agents("nim") == []  # nothing was written
    store.close()


def test_import_into_a_renamed_env_and_duplicates(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "arena.sqlite3"
    ArenaAdmin(Store(db)).create_env("nim", "envwire/Nim-v0")
    old = config(tmp_path, "alice", "alice-password", env="nim-2024")
    assert "--any-env" in fail(capsys, db, "import-agents", "nim", str(old))
    arena(capsys, db, "import-agents", "nim", str(old), "--any-env")
    twice = tmp_path / "copy.json"
    twice.write_text(config(tmp_path, "bob", "bob-password").read_text())
    assert "is also in" in fail(capsys, db, "import-agents", "nim",
                                str(tmp_path / "bob.json"), str(twice))  # fmt: skip
    assert "no arena env 'nope'" in fail(capsys, db, "import-agents", "nope", str(old))


def test_migrate_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    server_dir = tmp_path / "persistent"
    server_dir.mkdir()
    write_plugin(server_dir / "plugins")
    (server_dir / "admin_hashes.txt").write_text(sha256_hash("the-admin-password") + "\n")
    original = OriginalDB(server_dir / "aisysprojserver.db")
    original.env("cd", "countdown.env:Countdown", {"start": 5})
    original.account("cd", "alice", "pw-a")
    original.close()
    db = tmp_path / "arena.sqlite3"
    try:
        report = arena(capsys, db, "migrate", str(original.path))
        assert "--env-map takes NAME=ENV_ID" in fail(
            capsys, tmp_path / "other.sqlite3", "migrate", str(original.path), "--env-map", "cd"
        )
    finally:
        while str((server_dir / "plugins").resolve()) in sys.path:
            sys.path.remove(str((server_dir / "plugins").resolve()))
        plugins.forget_package("countdown")
    assert report["envs"] == {
        "cd": {"agents": 1, "runs": 0, "unfinished_runs": 0, "runs_with_percepts": 0}
    }
    assert report["admin_hashes"] == 1
    # the hashes came from admin_hashes.txt: the report says ADMIN_AUTH would have replaced it
    (warning,) = report["warnings"]
    assert "ADMIN_AUTH" in warning and "--admin-hash" in warning
    store = Store(db)
    assert store.env("cd").env_id == "aisys:countdown.env:Countdown"  # type: ignore[union-attr]
    ArenaAdmin(store).check_admin_token("the-admin-password")
    store.close()


def test_admin_password_from_stdin(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "arena.sqlite3"
    monkeypatch.setattr(sys, "stdin", io.StringIO("my-admin-password\n"))
    assert arena(capsys, db, "admin-token", "--from-stdin") == {"admin_password": "stored"}
    store = Store(db)
    ArenaAdmin(store).check_admin_token("my-admin-password")
    store.close()
    monkeypatch.setattr(sys, "stdin", io.StringIO("short\n"))
    assert "at least 8 characters" in fail(capsys, db, "admin-token", "--from-stdin")


def test_create_a_plugin_env(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    folder = tmp_path / "plugins"
    write_plugin(folder)
    db = tmp_path / "arena.sqlite3"
    try:
        created = arena(capsys, db, "create-env", "cd", "aisys:countdown.env:Countdown",
                        "--plugins", str(folder), "--set", 'config={"start": 3}')  # fmt: skip
    finally:
        while str(folder.resolve()) in sys.path:
            sys.path.remove(str(folder.resolve()))
        plugins.forget_package("countdown")
    assert created["env_id"] == "aisys:countdown.env:Countdown"
    assert created["settings"]["config"] == {"start": 3}
    assert created["settings"]["rating_runs"] == 3  # the plugin's EnvSettings
    assert created["settings"]["can_abandon"] is True


def test_migrating_a_missing_file_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "arena.sqlite3"
    error = fail(capsys, db, "migrate", str(tmp_path / "old" / "aisysprojserver.db"))
    assert "no database file at" in error
    error = fail(capsys, db, "migrate", str(tmp_path / "nope.db"), "--plugins",
                 str(tmp_path / "plugins"))  # fmt: skip
    assert "no database file at" in error
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no database, no plugins folder


def test_a_failed_migration_leaves_no_database_and_names_the_flag(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    original = OriginalDB(tmp_path / "aisysprojserver.db")
    original.env("cd", "countdown.env:Countdown", {"start": 5})
    original.close()
    db = tmp_path / "arena.sqlite3"
    error = fail(capsys, db, "migrate", str(original.path))  # no plugins folder beside it
    assert "does not import" in error and "--plugins DIR" in error
    assert "--arena-plugins" not in error
    assert not db.exists()
    error = fail(capsys, db, "migrate", str(original.path), "--plugins", str(tmp_path / "none"))
    assert "--plugins: no plugins folder at" in error
    assert not db.exists() and not (tmp_path / "none").exists()


def test_an_admin_password_set_in_code_is_carried_with_admin_hash(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    original = OriginalDB(tmp_path / "aisysprojserver.db")
    original.close()  # no env, and no admin_hashes.txt beside it: ADMIN_AUTH was used
    db = tmp_path / "arena.sqlite3"
    report = arena(capsys, db, "migrate", str(original.path))
    (warning,) = report["warnings"]
    assert warning.startswith("admin passwords: 0 found (there is no ")
    assert "--admin-hash 'sha256:...'" in warning
    assert report["admin_hashes"] == 0
    assert "--admin-hash takes sha256:<64 hex digits>" in fail(
        capsys, tmp_path / "other.sqlite3", "migrate", str(original.path),
        "--admin-hash", "the-password",
    )  # fmt: skip
    report = arena(capsys, tmp_path / "third.sqlite3", "migrate", str(original.path),
                   "--admin-hash", sha256_hash("code-password"))  # fmt: skip
    assert report["admin_hashes"] == 1 and report["warnings"] == []
    store = Store(tmp_path / "third.sqlite3")
    ArenaAdmin(store).check_admin_token("code-password")
    store.close()


def test_migrate_shows_progress_on_the_command_line(tmp_path: Path) -> None:
    """A real ``envwire arena migrate`` process writes progress lines to stderr (the JSON
    report alone goes to stdout)."""
    server_dir = tmp_path / "persistent"
    write_plugin(server_dir / "plugins")
    original = OriginalDB(server_dir / "aisysprojserver.db")
    original.env("cd", "countdown.env:Countdown", {"start": 5})
    original.account("cd", "alice", "pw-a")
    for run_id in range(1, 31):
        original.finish(run_id, "cd", "alice", {"left": 0, "moves": 2}, [(2, 1), (2, None)],
                        outcome=1, window=3)  # fmt: skip
    original.close()
    done = subprocess.run(
        [sys.executable, "-m", "envwire", "arena", "migrate", str(original.path),
         "--db", str(tmp_path / "arena.sqlite3")],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["envs"]["cd"]["runs"] == 30
    lines = [line for line in done.stderr.splitlines() if "envwire.arena.progress" in line]
    assert lines and lines[-1].endswith("(done)"), done.stderr
    assert "migrate: 30/30 runs (100%)" in lines[-1]
