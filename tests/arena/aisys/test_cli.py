"""``envwire arena import-agents``, ``migrate`` and ``admin-token --from-stdin``."""

from __future__ import annotations

import io
import json
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
    assert report["envs"] == {"cd": {"agents": 1, "runs": 0, "unfinished_runs": 0}}
    assert report["admin_hashes"] == 1
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
