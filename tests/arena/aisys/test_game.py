"""A plugin env of the AISysProj interface played through the arena: percepts from its action
requests, its messages, refusals and failures as per-run errors, outcomes and ratings from its
settings, abandoning through its abandon outcome, and runs that survive a restart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envwire.arena.accounts import hash_secret
from envwire.arena.core import Arena
from envwire.arena.store import Store
from envwire.runtime import make_worker


def act(arena: Arena, body: dict[str, Any]) -> dict[str, Any]:
    base = {"agent": "alice", "pwd": "pw", "protocol_version": 1}
    status, reply = arena.handle_act("cd", json.dumps({**base, **body}).encode(),
                                     "application/json")  # fmt: skip
    assert status == 200, reply
    result: dict[str, Any] = json.loads(reply)
    return result


def messages(reply: dict[str, Any], kind: str) -> dict[str, str]:
    return {m["run"]: m["content"] for m in reply["messages"] if m["type"] == kind}


def test_a_plugin_env_plays_through_the_arena(arena: Arena, tmp_path: Path) -> None:
    env = arena.store.env("cd")
    assert env is not None
    assert env.env_id == "aisys:countdown.env:Countdown"
    assert env.description == "Count down to zero."
    assert env.settings["rating_runs"] == 3
    assert env.settings["config"] == {"start": 5}
    arena.store.put_agent("cd", "alice", hash_secret("pw"))
    first = act(arena, {})
    assert len(first["action_requests"]) == 2  # NUMBER_OF_ACTION_REQUESTS
    req = first["action_requests"][0]
    assert req["percept"] == {"left": 5, "history": 0}
    run = req["run"]
    # refused by the env: an error about the run, which keeps waiting
    reply = act(arena, {"actions": [{"run": run, "act_no": 0, "action": 7}]})
    assert messages(reply, "error") == {run: "action 7 rejected: take 1 or 2, not 7"}
    # the env raises: an error naming the exception, the run keeps waiting
    reply = act(arena, {"actions": [{"run": run, "act_no": 0, "action": "explode"}]})
    assert messages(reply, "error") == {
        run: 'action "explode" rejected: the env failed on this action: RuntimeError: boom'
    }
    reply = act(arena, {"actions": [{"run": run, "act_no": 0, "action": 2}]})
    assert messages(reply, "info") == {run: "I took 1, 2 left"}
    asked = {r["run"]: r for r in reply["action_requests"]}
    assert asked[run]["act_no"] == 1
    assert asked[run]["percept"] == {"left": 2, "history": 1}
    # the state and the action's extra info are stored with the run
    state, history = arena.store.plugin_run(int(run))
    assert json.loads(state) == {"left": 2, "moves": 1}
    assert history == [("2", "1")]
    reply = act(arena, {"actions": [{"run": run, "act_no": 1, "action": 2}]})
    assert reply["finished_runs"] == {run: 1}
    assert messages(reply, "info") == {run: "you win"}
    agent = arena.store.agent("cd", "alice")
    assert agent is not None
    assert (agent.total_runs, agent.rating, agent.fully_evaluated) == (1, 1.0, False)


def test_abandon_uses_the_plugins_outcome(arena: Arena) -> None:
    arena.store.put_agent("cd", "alice", hash_secret("pw"))
    runs = [r["run"] for r in act(arena, {})["action_requests"]]
    reply = act(arena, {"to_abandon": runs[:1]})
    assert reply["finished_runs"] == {runs[0]: -1}
    assert arena.store.agent("cd", "alice").rating == -1.0  # type: ignore[union-attr]


def test_plugin_runs_go_on_after_a_restart(arena: Arena, tmp_path: Path) -> None:
    arena.store.put_agent("cd", "alice", hash_secret("pw"))
    run = act(arena, {})["action_requests"][0]["run"]
    act(arena, {"actions": [{"run": run, "act_no": 0, "action": 1}]})
    arena.close()
    again = Arena(Store(tmp_path / "arena.sqlite3"), worker_factory=make_worker)
    try:
        reply = act(again, {})
        asked = {r["run"]: r for r in reply["action_requests"]}
        assert asked[run]["percept"] == {"left": 3, "history": 1}
        reply = act(again, {"actions": [{"run": run, "act_no": 1, "action": 2}]})
        assert messages(reply, "info") == {run: "I took 1, 0 left"}
        assert reply["finished_runs"] == {run: 0}
    finally:
        again.close()
