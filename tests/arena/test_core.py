"""Every rule of the act protocol, in process: an :class:`Arena` over a real SQLite file.

The same rules run over real HTTP in ``test_http.py``; here they are cheap enough to check one by
one, with deterministic seeds.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envwire.arena.admin import ArenaAdmin
from envwire.arena.core import Arena
from envwire.arena.store import Store
from envwire.envs.nim import strong_move
from envwire.runtime import make_worker

EARLIER = "(the action may have been meant for an earlier request)"


class Agent:
    """Sends act requests for one agent straight to :meth:`Arena.handle_act`."""

    def __init__(self, arena: Arena, config: dict[str, str]) -> None:
        self.arena, self.config = arena, config

    def raw(self, body: dict[str, Any], env: str | None = None) -> tuple[int, dict[str, Any]]:
        body = {"agent": self.config["agent"], "pwd": self.config["pwd"], **body}
        status, data = self.arena.handle_act(
            env or self.config["env"], json.dumps(body).encode(), "application/json"
        )
        return status, json.loads(data)

    def act(self, actions: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
        status, reply = self.raw({"protocol_version": 1, "actions": actions or [], **extra})
        assert status == 200, reply
        return reply


def answer(
    reply: dict[str, Any], choose: Any = lambda p: strong_move(p) or 1
) -> list[dict[str, Any]]:
    return [
        {"run": r["run"], "act_no": r["act_no"], "action": choose(r["percept"])}
        for r in reply["action_requests"]
    ]


def errors(reply: dict[str, Any]) -> dict[str | None, str]:
    return {m["run"]: m["content"] for m in reply["messages"] if m["type"] == "error"}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "arena.sqlite3"
    admin = ArenaAdmin(Store(path))
    admin.create_env("nim", "envwire/Nim-v0", {"rating_runs": 4})
    admin.create_env("rnim", "envwire/Nim-v0", {"kwargs": {"opponent": "random"}})
    admin.create_env("cart", "CartPole-v1", {"requests_per_reply": 2})
    admin.create_env("raise", "test/Raise-v0=envwire.testing.envs:RaiseEnv")
    admin.create_env("echo", "envwire/Echo-v0", {"requests_per_reply": 1})
    admin.store.close()
    return path


def seeds() -> Iterator[int]:
    return itertools.count(1000)


@pytest.fixture
def arena(db: Path) -> Iterator[Arena]:
    counter = seeds()
    arena = Arena(Store(db), worker_factory=make_worker, seed=lambda: next(counter))
    yield arena
    arena.close()


def agent(arena: Arena, env: str, name: str) -> Agent:
    return Agent(arena, arena.admin.add_agent(env, name))


def test_first_request_starts_n_runs(arena: Arena) -> None:
    reply = agent(arena, "nim", "a").act()
    assert [(r["act_no"], r["percept"]) for r in reply["action_requests"]] == [(0, 10)] * 5
    assert reply["active_runs"] == [r["run"] for r in reply["action_requests"]]
    assert reply["finished_runs"] == {}
    assert reply["messages"] == []


def test_unanswered_runs_are_resent_first_and_block_new_runs(arena: Arena) -> None:
    a = agent(arena, "nim", "a")
    first = a.act()
    actions = answer(first)
    reply = a.act(actions[:2])  # three runs left unanswered
    resent = reply["action_requests"]
    assert [(r["run"], r["act_no"], r["percept"]) for r in resent[:3]] == [
        (r["run"], 0, 10) for r in first["action_requests"][2:]
    ]
    assert [r["run"] for r in resent[3:]] == [a_["run"] for a_ in actions[:2]]
    assert all(r["act_no"] == 1 for r in resent[3:])
    assert sorted(reply["active_runs"]) == sorted(r["run"] for r in first["action_requests"])
    again = a.act()  # nothing answered: the same requests (now all unanswered), no new runs
    assert sorted(again["action_requests"], key=lambda r: int(r["run"])) == sorted(
        resent, key=lambda r: int(r["run"])
    )
    assert again["active_runs"] == reply["active_runs"]


def test_rejected_actions_leave_the_run_waiting(arena: Arena) -> None:
    a = agent(arena, "nim", "a")
    reply = a.act(parallel_runs=False)
    (request,) = reply["action_requests"]
    for bad in (4, 0, "two", None, [1], 2.5):
        reply = a.act([{"run": request["run"], "act_no": 0, "action": bad}], parallel_runs=False)
        assert "rejected" in errors(reply)[request["run"]]
        assert reply["action_requests"] == [request]
    history = arena.store.messages(int(request["run"]))
    assert len(history) == 6
    assert all(m.type == "error" and m.act_no == 0 for m in history)
    reply = a.act([{"run": request["run"], "act_no": 0, "action": 1}], parallel_runs=False)
    assert errors(reply) == {}
    assert reply["action_requests"][0]["act_no"] == 1


def test_an_illegal_move_the_env_refuses_is_a_per_run_error(arena: Arena) -> None:
    arena.admin.create_env("nim2", "envwire/Nim-v0", {"kwargs": {"objects": 2}})
    a = agent(arena, "nim2", "a")
    request = a.act(parallel_runs=False)["action_requests"][0]
    assert request["percept"] == 2
    reply = a.act([{**request, "action": 3}], parallel_runs=False)
    assert errors(reply)[request["run"]] == (
        "action 3 rejected: you tried to take 3 objects, but only 2 are left"
    )
    assert reply["action_requests"] == [request]
    reply = a.act([{**request, "action": 2}], parallel_runs=False)
    assert reply["finished_runs"] == {request["run"]: 1}


def test_wrong_action_numbers_are_reported_per_run(arena: Arena) -> None:
    a = agent(arena, "nim", "a")
    first = a.act()
    actions = answer(first)
    actions[0]["act_no"] = 3
    reply = a.act(actions)
    run = actions[0]["run"]
    expected = f"wrong action number 3: the run waits for action 0 {EARLIER}"
    assert errors(reply) == {run: expected}
    assert reply["action_requests"][0] == first["action_requests"][0]
    stale = a.act(answer(first)[1:2])  # an action for an earlier request
    assert "wrong action number 0" in errors(stale)[actions[1]["run"]]


def test_runs_of_others_unknown_and_finished_runs(arena: Arena) -> None:
    a, b = agent(arena, "nim", "a"), agent(arena, "nim", "b")
    theirs = b.act()["action_requests"][0]
    mine = a.act()
    reply = a.act([
        {"run": theirs["run"], "act_no": 0, "action": 2},
        {"run": "999999", "act_no": 0, "action": 1},
        {"run": "not-a-run", "act_no": 0, "action": 1},
    ])  # fmt: skip
    assert errors(reply) == {
        theirs["run"]: "this run belongs to another agent",
        "999999": "unknown run",
        "not-a-run": "unknown run",
    }
    assert reply["action_requests"] == mine["action_requests"]
    assert b.act()["action_requests"][0] == theirs  # untouched
    assert arena.store.messages(int(theirs["run"])) == []
    # play one run to its end, then act on it again
    run, finished = mine["action_requests"][0]["run"], None
    reply = mine
    while finished is None:
        reply = a.act(answer(reply))
        finished = reply["finished_runs"].get(run)
    assert finished == 1
    assert run not in reply["active_runs"]
    taken = arena.store.run(int(run)).act_no  # type: ignore[union-attr]
    # the last action again (its reply lost): a wrong action number, as the original says
    resent = a.act([{"run": run, "act_no": taken - 1, "action": 1}])
    assert errors(resent) == {
        run: f"wrong action number {taken - 1}: the run finished after {taken} actions "
        f"(outcome 1); the action may have been meant for an earlier request"
    }
    late = a.act([{"run": run, "act_no": taken, "action": 1}])
    assert errors(late) == {run: "the run is already finished (outcome 1)"}
    assert run not in late["finished_runs"]
    assert arena.store.run(int(run)).act_no == taken  # type: ignore[union-attr]


def test_finished_runs_are_listed_once(arena: Arena) -> None:
    a = agent(arena, "nim", "a")
    reply, seen = a.act(), []
    for _ in range(12):
        reply = a.act(answer(reply))
        seen += list(reply["finished_runs"])
        assert set(reply["finished_runs"]).isdisjoint(reply["active_runs"])
    assert len(seen) == len(set(seen)) >= 10
    assert set(seen) == {str(r.id) for r in arena.store.runs("nim", "a", finished=True)}


def test_parallel_runs_off_asks_one_run_at_a_time(arena: Arena) -> None:
    a = agent(arena, "nim", "a")
    reply = a.act(parallel_runs=False)
    assert len(reply["action_requests"]) == 1
    first = reply["action_requests"][0]["run"]
    while not reply["finished_runs"]:
        reply = a.act(answer(reply), parallel_runs=False)
        assert len(reply["action_requests"]) == len(reply["active_runs"]) == 1
    assert list(reply["finished_runs"]) == [first]
    assert reply["action_requests"][0]["run"] != first


def test_abandoning(arena: Arena) -> None:
    a = agent(arena, "nim", "a")
    reply = a.act()
    runs = [r["run"] for r in reply["action_requests"]]
    reply = a.act(to_abandon=runs[:2])
    assert reply["finished_runs"] == {runs[0]: 0, runs[1]: 0}
    warnings = [m for m in reply["messages"] if m["type"] == "warning"]
    assert [m["run"] for m in warnings] == runs[:2]
    assert not set(runs[:2]) & set(reply["active_runs"])
    assert "already finished" in errors(a.act(to_abandon=runs[:1]))[runs[0]]
    row = arena.store.run(int(runs[0]))
    assert row is not None and row.how == "abandoned" and row.outcome == "0"
    cart = agent(arena, "cart", "c")
    status, body = cart.raw({"protocol_version": 1, "to_abandon": ["1"]})
    assert status == 400
    assert body["description"] == "to_abandon: arena env 'cart' does not allow abandoning runs"


def test_ratings_average_the_last_n_runs_and_keep_the_best(arena: Arena) -> None:
    a = agent(arena, "nim", "a")  # rating_runs = 4

    def finish(count: int, choose: Any) -> None:
        reply = a.act(parallel_runs=False)
        done = 0
        while done < count:
            reply = a.act(answer(reply, choose), parallel_runs=False)
            done += len(reply["finished_runs"])

    row = arena.store.agent("nim", "a")
    assert row is not None and row.rating is None and not row.fully_evaluated
    finish(3, lambda p: strong_move(p) or 1)
    row = arena.store.agent("nim", "a")
    assert row is not None and (row.total_runs, row.rating, row.fully_evaluated) == (3, 1.0, False)
    assert row.best_rating is None
    finish(1, lambda p: strong_move(p) or 1)
    row = arena.store.agent("nim", "a")
    assert row is not None and (row.rating, row.best_rating, row.fully_evaluated) == (
        1.0,
        1.0,
        True,
    )
    finish(3, lambda p: 1)  # loses every game against the strong opponent
    row = arena.store.agent("nim", "a")
    assert row is not None and row.total_runs == 7
    assert row.rating == 0.25  # the last four: one win, three losses
    assert row.best_rating == 1.0


def play_random_games(arena: Arena, name: str, requests: int) -> list[tuple[int, int, Any, Any]]:
    """What an agent sees over ``requests`` requests, with runs numbered in order of appearance."""
    a = Agent(arena, arena.admin.add_agent("rnim", name))
    reply, trace = a.act(), []
    number: dict[str, int] = {}
    for _ in range(requests):
        reply = a.act(answer(reply, lambda p: 1 if p % 2 else min(2, p)))
        for r in reply["action_requests"]:
            trace.append(
                (number.setdefault(r["run"], len(number)), r["act_no"], r["percept"], None)
            )
        for run, outcome in sorted(reply["finished_runs"].items(), key=lambda kv: int(kv[0])):
            trace.append((number[run], -1, None, outcome))
    return trace


def test_replayed_runs_equal_live_runs(db: Path) -> None:
    counter = seeds()
    live = Arena(Store(db), worker_factory=make_worker, seed=lambda: next(counter))
    expected = play_random_games(live, "x", 15)
    live.close()
    counter = seeds()  # the same seeds, but every step rebuilds its run from the database
    tight = Arena(Store(db), worker_factory=make_worker, live_runs=1, seed=lambda: next(counter))
    assert play_random_games(tight, "y", 15) == expected
    tight.close()


def test_a_restarted_arena_resumes_outstanding_runs(db: Path) -> None:
    counter = seeds()
    first = Arena(Store(db), worker_factory=make_worker, seed=lambda: next(counter))
    a = agent(first, "rnim", "a")
    reply = a.act(answer(a.act()))
    first.close()
    second = Arena(Store(db), worker_factory=make_worker)
    b = Agent(second, a.config)
    again = b.act()
    assert again["action_requests"] == reply["action_requests"]
    assert again["active_runs"] == reply["active_runs"]
    after = b.act(answer(again))
    assert errors(after) == {}
    second.close()


def test_an_env_that_raises_is_a_per_run_error(arena: Arena) -> None:
    a = agent(arena, "raise", "a")
    reply = a.act(parallel_runs=False)
    request = reply["action_requests"][0]
    assert request["percept"]["observation"][0] == 0
    action = [1, [0, 1]]
    reply = a.act([{**request, "action": action}], parallel_runs=False)
    request = reply["action_requests"][0]
    reply = a.act([{"run": request["run"], "act_no": 1, "action": action}], parallel_runs=False)
    assert "the env failed on this action" in errors(reply)[request["run"]]
    assert "RaiseEnv fails on purpose" in errors(reply)[request["run"]]
    assert reply["action_requests"] == [request]


def test_gymnasium_env_percepts_actions_and_return(arena: Arena) -> None:
    a = agent(arena, "cart", "a")
    reply = a.act()
    request = reply["action_requests"][0]
    assert set(request["percept"]) == {"observation", "reward", "step"}
    assert len(request["percept"]["observation"]) == 4
    bad = a.act([{"run": request["run"], "act_no": 0, "action": 2}])
    assert "not in Discrete(2)" in errors(bad)[request["run"]]
    steps = 0
    while not reply["finished_runs"]:
        reply = a.act(answer(reply, lambda p, push=steps % 2: push))
        steps += 1
        assert all(r["percept"]["step"] == r["act_no"] for r in reply["action_requests"])
    for run, outcome in reply["finished_runs"].items():
        row = arena.store.run(int(run))
        assert row is not None and outcome == row.act_no == row.episode_return


def test_typed_env(arena: Arena) -> None:
    a = agent(arena, "echo", "a")
    request = a.act()["action_requests"][0]
    assert request["percept"]["observation"] == {
        "echoed_message": "Echo environment ready!",
        "message_length": 0,
    }
    reply = a.act([{**request, "action": {"message": "hi"}}])
    assert reply["action_requests"][0]["percept"]["observation"]["echoed_message"] == "hi"
    bad = a.act([{**reply["action_requests"][0], "action": {"msg": 1}}])
    assert "not a valid EchoAction" in errors(bad)[request["run"]]


def test_v0_round_trip(arena: Arena) -> None:
    a = agent(arena, "nim", "a")
    status, reply = a.raw({"actions": []})
    assert status == 200
    assert set(reply) == {"action-requests", "errors", "messages"}
    runs = [r["run"] for r in reply["action-requests"]]
    assert all(r.endswith("#0") for r in runs)
    actions = [{"run": r, "action": 1} for r in runs] + [{"run": runs[0], "action": 1}]
    status, reply = a.raw({"actions": actions})
    assert status == 200
    run_id = runs[0].split("#")[0]
    expected = f"run {run_id}: wrong action number 0: the run waits for action 1 {EARLIER}"
    assert reply["errors"] == [expected]
    assert {r["run"] for r in reply["action-requests"]} == {f"{r[:-2]}#1" for r in runs}
    status, reply = a.raw({"actions": [], "single_request": True})
    assert len(reply["action-requests"]) == 1


def test_request_errors(arena: Arena) -> None:
    a = agent(arena, "nim", "a")
    arena.admin.add_agent("nim", "blocked")
    arena.admin.set_blocked("nim", "blocked", True)
    cases: list[tuple[dict[str, Any], str | None, int, str]] = [
        ({"protocol_version": 1}, "nope", 400, "unknown arena env 'nope'"),
        ({"protocol_version": 1, "agent": "who"}, None, 401, "unknown agent 'who'"),
        ({"protocol_version": 1, "pwd": "x" * 43}, None, 401, "wrong password"),
        ({"protocol_version": 1, "agent": "blocked"}, None, 401, "blocked"),
        ({"protocol_version": 7}, None, 400, "protocol_version: unsupported version 7"),
    ]
    for body, env, status, text in cases:
        got, reply = a.raw(body, env)
        assert got == status
        assert set(reply) == {"errorcode", "errorname", "description"}
        assert reply["errorcode"] == status and text in reply["description"]


def test_a_failed_save_is_503_and_changes_nothing(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = agent(arena, "rnim", "a")
    first = a.act()
    actions = answer(first)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise sqlite3.OperationalError("disk I/O error")

    with monkeypatch.context() as patch:
        patch.setattr(arena.store, "apply", broken)
        status, body = a.raw({"protocol_version": 1, "actions": actions})
    assert status == 503
    assert "could not save" in body["description"]
    assert a.act()["action_requests"] == first["action_requests"]
    reply = a.act(actions)
    assert errors(reply) == {}
    assert all(
        r["act_no"] == 1 for r in reply["action_requests"] if r["run"] in first["active_runs"]
    )
