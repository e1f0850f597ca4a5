"""Fixtures of the arena tests: an arena database and a real ``envwire serve`` over it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from envwire.arena.admin import ArenaAdmin
from envwire.arena.store import Store
from envwire.testing import ServerProcess

#: The envs the arena servers of these tests serve (arena envs name ids in this catalog).
SERVED = ("envwire/Nim-v0", "CartPole-v1")


@dataclass
class ArenaServer:
    """A running ``envwire serve --http 0 --arena-db DB`` and what the tests need of it."""

    process: ServerProcess
    db: Path
    admin_token: str
    configs: dict[str, dict[str, str]]  # agent name -> config file contents

    @property
    def url(self) -> str:
        """The server URL as config files carry it (ending in '/')."""
        return f"http://127.0.0.1:{self.process.ports['http']}/"

    def act_url(self, env: str) -> str:
        """The act URL the reference clients build: ``url + '/act/' + env``."""
        return f"{self.url}/act/{env}"

    def config(self, agent: str) -> dict[str, str]:
        """The agent's config file, pointing at this server."""
        return {**self.configs[agent], "url": self.url}

    def api(self, path: str) -> Any:
        """GET a public JSON endpoint."""
        response = httpx.get(self.url + path.lstrip("/"), timeout=30)
        response.raise_for_status()
        return response.json()


def make_db(path: Path) -> tuple[str, dict[str, dict[str, str]]]:
    """An arena database with the test envs and agents; (admin token, agent configs)."""
    admin = ArenaAdmin(Store(path))
    admin.create_env("nim", "envwire/Nim-v0", {"rating_runs": 4})
    admin.create_env(
        "nim-random",
        "envwire/Nim-v0",
        {"kwargs": {"opponent": "random"}, "requests_per_reply": 8},
        display_name="Nim against a random opponent",
    )
    admin.create_env("cart", "CartPole-v1", {"requests_per_reply": 3})
    configs = {}
    for env, agent in [
        ("nim", "alice"),
        ("nim", "bob"),
        ("nim", "mallory"),
        ("nim", "blocked"),
        ("nim", "client"),
        ("nim-random", "carol"),
        ("cart", "dave"),
    ]:
        configs[agent] = admin.add_agent(env, agent)
    admin.set_blocked("nim", "blocked", True)
    token = admin.new_admin_token()
    admin.store.close()
    return token, configs


def start_server(db: Path, *extra: str) -> ServerProcess:
    """A real server over ``db`` (HTTP only)."""
    args = ("--gym-socket", "off", "--arena-db", str(db), *extra)
    return ServerProcess(SERVED, args, front_ends=("http",)).start()


@pytest.fixture(scope="module")
def arena_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArenaServer]:
    """One server per test module, over a fresh database."""
    db = tmp_path_factory.mktemp("arena") / "arena.sqlite3"
    token, configs = make_db(db)
    process = start_server(db)
    try:
        yield ArenaServer(process, db, token, configs)
    finally:
        process.stop()


def put(url: str, body: Any, **kwargs: Any) -> httpx.Response:
    """PUT a JSON body."""
    return httpx.put(url, content=json.dumps(body), headers={"content-type": "application/json"},
                     timeout=30, **kwargs)  # fmt: skip
