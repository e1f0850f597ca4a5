"""Housekeeping: pruning old runs keeps every run a rating needs; unused agents go."""

from __future__ import annotations

import json
from pathlib import Path

from envwire.arena.admin import ArenaAdmin
from envwire.arena.core import Arena
from envwire.arena.maintenance import delete_unused_agents, disk_usage, prune_runs
from envwire.arena.store import Store
from envwire.envs.nim import strong_move
from envwire.runtime import make_worker


def play(arena: Arena, config: dict[str, str], requests: int) -> None:
    actions: list[dict[str, object]] = []
    for _ in range(requests):
        body = {"agent": config["agent"], "pwd": config["pwd"], "protocol_version": 1,
                "actions": actions}  # fmt: skip
        status, data = arena.handle_act("nim", json.dumps(body).encode(), "application/json")
        assert status == 200
        reply = json.loads(data)
        actions = [{"run": r["run"], "act_no": r["act_no"],
                    "action": strong_move(r["percept"]) or 1}
                   for r in reply["action_requests"]]  # fmt: skip


def test_prune_keeps_the_rating_window(tmp_path: Path) -> None:
    store = Store(tmp_path / "arena.sqlite3")
    admin = ArenaAdmin(store)
    admin.create_env("nim", "envwire/Nim-v0", {"rating_runs": 4})
    alice = admin.add_agent("nim", "alice")
    admin.add_agent("nim", "idle")
    arena = Arena(store, worker_factory=make_worker)
    play(arena, alice, 40)
    before = store.agent("nim", "alice")
    assert before is not None
    finished = store.runs("nim", "alice", finished=True, limit=1000)
    assert len(finished) > 6
    newest = {r[0] for r in store.query(
        "SELECT id FROM runs WHERE finished = 1 ORDER BY finish_seq DESC LIMIT 4")}  # fmt: skip
    assert prune_runs(store, keep=2) == len(finished) - 4  # rating_runs (4) > keep (2)
    kept = store.runs("nim", "alice", finished=True, limit=1000)
    assert {r.id for r in kept} == newest
    assert all(store.steps(r.id) == [] for r in finished if r.id not in newest)
    assert store.active_runs("nim", "alice")  # unfinished runs stay
    play(arena, alice, 6)  # ratings go on from the kept window
    after = store.agent("nim", "alice")
    assert after is not None and after.total_runs > before.total_runs
    assert delete_unused_agents(store, "nim") == ["idle"]
    assert store.agent("nim", "idle") is None
    assert "arena.sqlite3" in disk_usage(store, tmp_path)
    arena.close()
