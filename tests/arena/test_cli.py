"""``envwire arena ...``: the admin commands on a database file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from envwire.arena.accounts import verify_secret
from envwire.cli import main


def arena(capsys: pytest.CaptureFixture[str], db: Path, *args: str) -> Any:
    status = main(["arena", args[0], "--db", str(db), *args[1:]])
    out = capsys.readouterr().out
    assert status == 0, out
    return json.loads(out) if out.lstrip().startswith(("{", "[")) else out.strip()


def test_admin_commands(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "arena.sqlite3"
    created = arena(capsys, db, "create-env", "nim", "envwire/Nim-v0", "--set", "rating_runs=10",
                    "--set", 'kwargs={"opponent": "random"}', "--display-name", "Nim")  # fmt: skip
    assert created["settings"]["rating_runs"] == 10
    assert created["settings"]["kwargs"] == {"opponent": "random"}
    assert created["settings"]["can_abandon"] is True  # Nim's own arena defaults
    assert created["settings"]["percept"] == "observation"
    cart = arena(capsys, db, "create-env", "cart", "CartPole-v1", "--settings",
                 '{"requests_per_reply": 8}')  # fmt: skip
    assert cart["settings"]["percept"] == "full" and not cart["settings"]["can_abandon"]

    arena(capsys, db, "set-url", "http://arena.example.org:8000")
    output = tmp_path / "alice.json"
    config = arena(capsys, db, "add-agent", "nim", "alice", "-o", str(output))
    assert set(config) == {"agent", "pwd", "env", "url"}
    assert config["url"] == "http://arena.example.org:8000/"
    assert json.loads(output.read_text()) == config
    assert output.stat().st_mode & 0o077 == 0
    with sqlite3.connect(db) as connection:
        (stored,) = connection.execute(
            "SELECT pwd_hash FROM agents WHERE name = 'alice'"
        ).fetchone()
    assert config["pwd"] not in stored and stored.startswith("scrypt$")
    assert verify_secret(config["pwd"], stored)

    renewed = arena(capsys, db, "reset-password", "nim", "alice", "--url", "http://x:1/")
    assert renewed["pwd"] != config["pwd"] and renewed["url"] == "http://x:1/"
    assert arena(capsys, db, "block", "nim", "alice") == {"agent": "alice", "blocked": True}
    agents = arena(capsys, db, "list", "nim")
    assert [(a["agent"], a["blocked"], a["total_runs"]) for a in agents] == [("alice", True, 0)]
    arena(capsys, db, "unblock", "nim", "alice")
    envs = arena(capsys, db, "list")
    assert [(e["env"], e["agents"]) for e in envs] == [("cart", 0), ("nim", 1)]
    token = arena(capsys, db, "admin-token")
    assert isinstance(token, str) and len(token) >= 40


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["create-env", "bad name", "CartPole-v1"], "arena env name 'bad name' is not valid"),
        (["create-env", "x", "NoSuch-v0"], "unknown env id 'NoSuch-v0'"),
        (["create-env", "x", "CartPole-v1", "--set", "rating_runs=0"], "rating_runs"),
        (["create-env", "x", "CartPole-v1", "--set", "colour=red"], "unknown arena setting"),
        (["add-agent", "nope", "alice"], "no arena env 'nope'"),
        (["block", "nim", "nobody"], "no agent 'nobody'"),
    ],
)
def test_errors_are_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], message: str
) -> None:
    db = tmp_path / "arena.sqlite3"
    main(["arena", "create-env", "--db", str(db), "nim", "envwire/Nim-v0"])
    capsys.readouterr()
    assert main(["arena", args[0], "--db", str(db), *args[1:]]) == 2
    assert message in capsys.readouterr().err


def test_an_existing_agent_needs_replace(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "arena.sqlite3"
    arena(capsys, db, "create-env", "nim", "envwire/Nim-v0")
    first = arena(capsys, db, "add-agent", "nim", "alice")
    assert main(["arena", "add-agent", "--db", str(db), "nim", "alice"]) == 2
    assert "exists" in capsys.readouterr().err
    second = arena(capsys, db, "add-agent", "nim", "alice", "--replace")
    assert second["pwd"] != first["pwd"]
