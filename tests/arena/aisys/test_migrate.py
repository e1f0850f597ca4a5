"""Migrating an AISysProj server's database: accounts keep their passwords, ratings and the
leaderboard stay as that server showed them and go on moving by its rule, runs keep their ids
and unfinished plugin runs go on, groups and admin passwords come along; a failed migration
writes nothing."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from envwire.arena import history
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
    assert report.envs["cd"] == {
        "agents": 3, "runs": 2, "unfinished_runs": 0, "runs_with_percepts": 0
    }  # fmt: skip
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


def test_runs_keep_what_the_original_knew_of_them(
    original: Path, tmp_path: Path, folder: PluginFolder
) -> None:
    """Percepts rebuilt where the run replays as stored, extras (the env's answers) kept, no
    made-up times, and the report says how many runs have their percepts."""
    store = Store(tmp_path / "arena.sqlite3")
    report = migrate(read_database(original), store, now=1_700_000_000.0)
    # run 10 replays (5 -> take 2, env takes 1 -> take 2, win); run 11's stored history ends
    # where the plugin says the agent had already won, so it does not replay; run 12 replays
    assert report.envs["cd"]["runs_with_percepts"] == 2
    assert [json.loads(s.percept) for s in store.steps(10)] == [
        {"left": 5, "history": 0}, {"left": 2, "history": 1},
    ]  # fmt: skip
    assert history.extras(store, 10) == {0: "1"}
    assert history.carried_run(store, 10) == history.CarriedRun(10, True)
    assert history.carried_run(store, 11) == history.CarriedRun(11, False)
    assert history.carried_run(store, 12) == history.CarriedRun(12, True)
    assert [json.loads(s.percept) for s in store.steps(12)] == [{"left": 5, "history": 0}]
    run = store.run(10)
    assert run is not None and run.ended is None and run.how == "done"
    assert history.migrated_at(store) == 1_700_000_000.0
    store.close()


def test_a_run_whose_last_action_did_not_end_it_was_abandoned(
    tmp_path: Path, folder: PluginFolder
) -> None:
    db = OriginalDB(tmp_path / "aisysprojserver.db")
    db.env("cd", "countdown.env:Countdown", {"start": 5})
    db.account("cd", "alice", "pw-a")
    # 5 -> takes 1, env takes 1 -> 3: then abandoned (outcome -1, the plugin's abandon outcome)
    db.finish(1, "cd", "alice", {"left": 3, "moves": 1}, [(1, 1)], outcome=-1, window=3)
    db.close()
    store = Store(tmp_path / "arena.sqlite3")
    migrate(read_database(db.path), store)
    run = store.run(1)
    assert run is not None and (run.finished, run.how) == (True, "abandoned")
    store.close()


def _countdown_run(rng: random.Random) -> tuple[list[tuple[int, int | None]], dict[str, int], int]:
    """A Countdown run (start 5) as the original stored it: history, last state, outcome."""
    left, moves, steps = 5, 0, []
    while True:
        take = rng.choice((1, 2))
        left, moves = left - take, moves + 1
        if left <= 0:
            steps.append((take, None))
            return steps, {"left": 0, "moves": moves}, 1
        left -= 1
        steps.append((take, 1))
        if left == 0:
            return steps, {"left": 0, "moves": moves}, 0


def test_rating_charts_end_at_the_ratings_the_original_showed(
    tmp_path: Path, folder: PluginFolder
) -> None:
    """Runs finish out of id order (parallel runs), and the original deleted an agent's old
    runs: the migrated runs are ordered as that server recorded their finishing, and each
    agent's rating history ends at its rating."""
    rng = random.Random(7)
    db = OriginalDB(tmp_path / "aisysprojserver.db")
    db.env("cd", "countdown.env:Countdown", {"start": 5})
    agents = ("ann", "ben", "cat")
    for agent in agents:
        db.account("cd", agent, "pw-" + agent)
    waiting: list[tuple[int, str]] = []
    finished: dict[str, list[int]] = {a: [] for a in agents}
    next_id = 1
    for _ in range(15):
        for agent in agents:
            for _ in range(2):
                waiting.append((next_id, agent))
                next_id += 1
        rng.shuffle(waiting)  # finished in another order than started
        for run_id, agent in waiting[:-3]:
            steps, state, outcome = _countdown_run(rng)
            db.finish(run_id, "cd", agent, state, steps, outcome=outcome, window=3)
            finished[agent].append(run_id)
        waiting = waiting[-3:]
    db.delete_nonrecent_runs("cd", "ann")  # its cleanup, as after every 2,351st run
    db.close()
    store = Store(tmp_path / "arena.sqlite3")
    migrate(read_database(db.path), store)
    for agent in agents:
        order = [row.run for row in history.outcomes(store, "cd", agent)]
        # the last 20 in the order they finished (the original kept that much of it), the
        # earlier ones by id
        assert order[-20:] == finished[agent][-20:]
        assert order[:-20] == sorted(order[:-20])
        points = history.rating_points(store, "cd", agent, rating_runs=3, initial=0.0, shown=50)
        row = store.agent("cd", agent)
        assert row is not None and points
        assert points[-1][1] == pytest.approx(row.rating)
        assert all(r.ended is None and r.carried for r, _ in points)
    assert len(history.outcomes(store, "cd", "ann")) == 20  # the runs the original kept
    store.close()
