"""The arena on a token-protected server: agents keep their passwords, and guessing them is
rate-limited per agent and per client address (429 with Retry-After)."""

from __future__ import annotations

from pathlib import Path

import httpx

from envwire.testing import ServerProcess
from tests.arena.web.conftest import SERVED, make_db
from tests.server.security.conftest import TOKEN, Secrets


def test_failed_logins_are_limited(tmp_path: Path, secrets: Secrets) -> None:
    db = tmp_path / "arena.sqlite3"
    admin_token, configs = make_db(db)
    config = tmp_path / "server.toml"
    config.write_text(
        "[server]\narena_login_failures = 3\narena_login_failures_per_address = 5\n"
        f'arena_login_window = 600.0\ntoken_file = "{secrets.token_file}"\n'
    )
    args = ("--gym-socket", "off", "--arena-db", str(db), "--config", str(config))
    with ServerProcess(SERVED, args, front_ends=("http",)) as server:
        url = f"http://127.0.0.1:{server.ports['http']}/act/nim"
        alice = {"agent": "alice", "pwd": configs["alice"]["pwd"], "protocol_version": 1}
        # Agents keep their passwords: no server token needed on the act endpoint.
        assert httpx.put(url, json=alice).status_code == 200
        wrong = {**alice, "pwd": "wrong-password"}
        assert [httpx.put(url, json=wrong).status_code for _ in range(3)] == [401] * 3
        limited = httpx.put(url, json=alice)  # the right password must wait too
        assert limited.status_code == 429
        assert 1 <= int(limited.headers["retry-after"]) <= 600
        assert "too many failed logins" in limited.json()["description"]
        bob = {"agent": "bob", "pwd": configs["bob"]["pwd"], "protocol_version": 1}
        assert httpx.put(url, json=bob).status_code == 200  # another agent is not held
        guess = {**bob, "pwd": "guess-password"}
        assert [httpx.put(url, json=guess).status_code for _ in range(2)] == [401, 401]
        # five failures from this address: every agent from here waits (how the window
        # passes is tests/arena/test_logins.py's, on a clock of its own)
        assert httpx.put(url, json=bob).status_code == 429
        # The admin API keeps its own tokens, the server's token opens nothing there.
        admin = f"http://127.0.0.1:{server.ports['http']}/arena/admin/envs"
        as_server = httpx.get(admin, headers={"authorization": f"Bearer {TOKEN}"})
        assert as_server.status_code == 401
        own = httpx.get(admin, headers={"authorization": f"Bearer {admin_token}"})
        assert own.status_code == 200
