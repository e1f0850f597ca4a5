"""The arena over real HTTP: a real ``envwire serve --http 0 --arena-db DB`` process, driven by
plain ``httpx`` scripts written from the seed, by our client, and by hostile requests."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest

from envwire.client import arena
from envwire.envs.nim import strong_move
from tests.arena.web.conftest import ArenaServer, put


def best(percept: int) -> int:
    return strong_move(percept) or 1


# --------------------------------------------------------------------------------------------
# plain scripts, written from the seed (config url ends in '/', so the path is //act/<env>)


def seed_client_v0(config: dict[str, str], requests_to_send: int) -> list[dict[str, Any]]:
    """The seed's v0 interaction, as a participant would write it."""
    replies: list[dict[str, Any]] = []
    actions: list[dict[str, Any]] = []
    for _ in range(requests_to_send):
        response = httpx.put(
            f"{config['url']}/act/{config['env']}",
            json={"agent": config["agent"], "pwd": config["pwd"], "actions": actions},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        reply = response.json()
        replies.append(reply)
        actions = [
            {"run": request["run"], "action": best(request["percept"])}
            for request in reply["action-requests"]
        ]
    return replies


def test_seed_v0_script(arena_server: ArenaServer) -> None:
    config = arena_server.config("alice")
    assert config["url"].endswith("/")
    replies = seed_client_v0(config, 12)
    first = replies[0]
    assert set(first) == {"action-requests", "errors", "messages"}
    assert len(first["action-requests"]) == 5
    assert all(r["percept"] == 10 and r["run"].endswith("#0") for r in first["action-requests"])
    assert all(not r["errors"] for r in replies)
    finished = [m for r in replies for m in r["messages"] if "finished, outcome 1" in m]
    assert len(finished) >= 10
    results = arena_server.api("arena/api/results/nim")
    alice = next(a for a in results if a["agent"] == "alice")
    assert alice["rating"] == 1.0 and alice["fully_evaluated"]


def test_seed_v1_script_with_get_and_single_slash(arena_server: ArenaServer) -> None:
    config = arena_server.config("bob")
    url = config["url"].rstrip("/") + "/act/" + config["env"]  # '/act', and GET this time
    body: dict[str, Any] = {"protocol_version": 1, "agent": "bob", "pwd": config["pwd"]}
    finished: dict[str, Any] = {}
    seen: list[dict[str, Any]] = []
    for _ in range(10):
        response = httpx.request("GET", url, json=body, timeout=30)
        assert response.status_code == 200, response.text
        reply = response.json()
        assert set(reply) == {"action_requests", "active_runs", "finished_runs", "messages"}
        assert not set(reply["finished_runs"]) & set(finished)  # each finished run once
        finished.update(reply["finished_runs"])
        seen += reply["action_requests"]
        body["actions"] = [
            {"run": r["run"], "act_no": r["act_no"], "action": best(r["percept"])}
            for r in reply["action_requests"]
        ]
        body["client"] = "plain-httpx"
    assert len(finished) >= 8 and set(finished.values()) == {1}
    run = next(iter(finished))
    history = arena_server.api(f"arena/api/run/nim/{run}")
    assert history["finished"] and history["outcome"] == 1 and history["agent"] == "bob"
    assert [s["percept"] for s in history["steps"]] == [
        r["percept"] for r in seen if r["run"] == run
    ]


# --------------------------------------------------------------------------------------------
# our client


def test_run_with_a_function(arena_server: ArenaServer) -> None:
    outcomes: dict[str, Any] = {}
    said: list[Any] = []
    summary = arena.run(
        arena_server.config("carol"),
        lambda percept, info: 1 if percept % 2 else min(2, percept),
        run_limit=20,
        on_finish=outcomes.__setitem__,
        on_message=said.append,
    )
    assert len(summary.finished) >= 20
    assert summary.finished == outcomes
    assert set(outcomes.values()) <= {0, 1}
    assert any("The opponent took" in m["content"] for m in said)
    results = arena_server.api("arena/api/results/nim-random")
    assert results[0]["total_runs"] >= 20


class Player(arena.Agent):
    """Remembers what it saw; plays perfectly."""

    finished: dict[str, tuple[Any, list[int]]]
    messages: list[tuple[str, str, str]]

    def __init__(self, run_id: str, config: arena.AgentConfig) -> None:
        super().__init__(run_id, config)
        self.percepts: list[int] = []
        self.numbers: list[int] = []

    def get_action(self, percept: Any, info: arena.RequestInfo) -> Any:
        assert info.run_id == self.run_id
        assert info.run_url.endswith(f"/arena/run/nim/{self.run_id}")
        self.percepts.append(percept)
        self.numbers.append(info.action_number)
        return best(percept)

    def on_finish(self, outcome: Any) -> None:
        assert self.numbers == list(range(len(self.numbers)))
        Player.finished[self.run_id] = (outcome, self.percepts)

    def on_message(self, content: str, type: str) -> None:
        Player.messages.append((self.run_id, type, content))


def test_agent_class_with_parallel_workers(arena_server: ArenaServer) -> None:
    Player.finished, Player.messages = {}, []
    summary = Player.run(arena_server.config("client"), run_limit=15, workers=4)
    assert len(Player.finished) == len(summary.finished) >= 15
    assert all(outcome == 1 and percepts[0] == 10 for outcome, percepts in Player.finished.values())
    assert {t for _, t, _ in Player.messages} == {"info"}
    some_run = next(iter(Player.finished))
    page = httpx.get(f"{arena_server.url}arena/run/nim/{some_run}", timeout=30)
    assert page.status_code == 200 and "History" in page.text


def test_one_run_at_a_time_and_abandoning_old_runs(arena_server: ArenaServer) -> None:
    config = arena_server.config("client")
    left = put(arena_server.act_url("nim"), {"protocol_version": 1, "agent": "client",
                                             "pwd": config["pwd"]}).json()  # fmt: skip
    old = set(left["active_runs"])  # some runs are unfinished now
    first_step = [
        {"run": r["run"], "act_no": r["act_no"], "action": 1} for r in left["action_requests"]
    ]
    put(arena_server.act_url("nim"), {"protocol_version": 1, "agent": "client",
                                      "pwd": config["pwd"], "actions": first_step})  # fmt: skip
    summary = arena.run(config, best, run_limit=3, abandon_old_runs=True, parallel_runs=False)
    assert old <= set(summary.abandoned)
    assert not old & set(summary.finished)
    assert len(summary.finished) == 3 and set(summary.finished.values()) == {1}
    for run in old:
        assert arena_server.api(f"arena/api/run/nim/{run}")["how"] == "abandoned"


# --------------------------------------------------------------------------------------------
# security and errors


def status_of(response: httpx.Response) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"errorcode", "errorname", "description"}
    assert body["errorcode"] == response.status_code
    return response.status_code, body["description"]


def test_credentials(arena_server: ArenaServer) -> None:
    url, pwd = arena_server.act_url("nim"), arena_server.configs["alice"]["pwd"]
    cases = [
        ({"agent": "alice", "pwd": "wrong"}, "wrong password for agent 'alice'"),
        ({"agent": "alice", "pwd": arena_server.configs["bob"]["pwd"]}, "wrong password"),
        ({"agent": "nobody", "pwd": pwd}, "unknown agent 'nobody'"),
        ({"agent": "blocked", "pwd": arena_server.configs["blocked"]["pwd"]}, "is blocked"),
        ({"agent": "carol", "pwd": arena_server.configs["carol"]["pwd"]}, "unknown agent 'carol'"),
    ]
    for body, text in cases:
        code, description = status_of(put(url, body))
        assert code == 401 and text in description
    with pytest.raises(arena.ArenaRequestError) as info:
        arena.run({**arena_server.config("alice"), "pwd": "nope"}, best, run_limit=1)
    assert info.value.status == 401 and "wrong password" in str(info.value)


def test_another_agents_runs(arena_server: ArenaServer) -> None:
    alice, mallory = arena_server.config("alice"), arena_server.config("mallory")
    url = arena_server.act_url("nim")
    theirs = put(url, {"protocol_version": 1, "agent": "alice", "pwd": alice["pwd"]}).json()
    target = theirs["action_requests"][0]
    attack = [{"run": target["run"], "act_no": target["act_no"], "action": 1}]
    reply = put(url, {"protocol_version": 1, "agent": "mallory", "pwd": mallory["pwd"],
                      "actions": attack, "to_abandon": [target["run"]]}).json()  # fmt: skip
    assert [m["content"] for m in reply["messages"] if m["run"] == target["run"]] == [
        "this run belongs to another agent"
    ] * 2
    assert target["run"] not in reply["finished_runs"]
    v0 = put(
        url,
        {
            "agent": "mallory",
            "pwd": mallory["pwd"],
            "actions": [{"run": f"{target['run']}#{target['act_no']}", "action": 1}],
        },
    )
    assert v0.json()["errors"] == [f"run {target['run']}: this run belongs to another agent"]
    again = put(url, {"protocol_version": 1, "agent": "alice", "pwd": alice["pwd"]}).json()
    assert target in again["action_requests"]  # untouched


def test_bodies(arena_server: ArenaServer) -> None:
    url = arena_server.act_url("nim")
    pwd = arena_server.configs["alice"]["pwd"]
    huge = b'{"agent": "alice", "pwd": "' + b"x" * (2 << 20) + b'"}'
    response = httpx.put(
        url, content=huge, headers={"content-type": "application/json"}, timeout=60
    )
    code, text = status_of(response)
    assert code == 413 and "limit" in text
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        response = httpx.put(url, content=b"{}", headers={"content-type": content_type}, timeout=30)
        assert status_of(response)[0] == 415
    response = httpx.put(url, content=b"agent=alice", timeout=30)
    assert status_of(response)[0] == 415
    cases = [
        (b"{not json", "body: not valid JSON"),
        (b"[]", "body: expected a JSON object"),
        (json.dumps({"agent": "alice"}).encode(), "pwd: missing"),
        (json.dumps({"agent": "alice", "pwd": pwd, "actions": [{"run": "1", "action": 1}]})
         .encode(), "actions[0].run: expected '<run id>#<action number>'"),
        (json.dumps({"agent": "alice", "pwd": pwd, "protocol_version": 1,
                     "actions": [{"run": "1", "act_no": "1.5", "action": 1}]}).encode(),
         "actions[0].act_no: expected an integer, got the string '1.5'"),
        (json.dumps({"agent": "alice", "pwd": pwd, "protocol_version": 2}).encode(),
         "protocol_version: unsupported version 2"),
    ]  # fmt: skip
    for body, text in cases:
        response = httpx.put(
            url, content=body, headers={"content-type": "application/json"}, timeout=30
        )
        code, description = status_of(response)
        assert code == 400 and description.startswith(text), description
    code, description = status_of(put(arena_server.act_url("nmi"), {"agent": "a", "pwd": "b"}))
    assert code == 400 and "did you mean 'nim'" in description
    response = httpx.post(url, json={}, timeout=30)
    assert status_of(response)[0] == 405  # JSON, where the original answers with HTML
    assert response.headers["allow"] == "GET, PUT"


def test_bad_actions_are_never_500(arena_server: ArenaServer) -> None:
    config = arena_server.config("dave")
    url = arena_server.act_url("cart")
    reply = put(url, {"protocol_version": 1, "agent": "dave", "pwd": config["pwd"]}).json()
    request = reply["action_requests"][0]
    actions: list[Any] = [None, "left", 7, [0, 1], {"a": 1}, 1e308, -1, True, [[[[[]]]]]]
    for action in actions:
        response = put(url, {"protocol_version": 1, "agent": "dave", "pwd": config["pwd"],
                             "actions": [{**request, "action": action}]})  # fmt: skip
        assert response.status_code == 200, response.text
        messages = response.json()["messages"]
        assert any(m["type"] == "error" and m["run"] == request["run"] for m in messages), action


# --------------------------------------------------------------------------------------------
# the admin API


def test_admin_api(arena_server: ArenaServer) -> None:
    base = arena_server.url + "arena/admin/envs"
    auth = {"authorization": f"Bearer {arena_server.admin_token}"}
    assert httpx.get(base, timeout=30).status_code == 401
    assert httpx.get(base, headers={"authorization": "Bearer nope"}, timeout=30).status_code == 401
    envs = httpx.get(base, headers=auth, timeout=30).json()
    assert {e["env"] for e in envs} >= {"nim", "nim-random", "cart"}
    created = httpx.put(
        f"{base}/pend",
        headers=auth,
        timeout=60,
        json={"env_id": "Pendulum-v1", "settings": {"requests_per_reply": 2}},
    )
    assert created.status_code == 200, created.text
    assert created.json()["settings"]["requests_per_reply"] == 2
    again = httpx.put(f"{base}/pend", headers=auth, json={"env_id": "Pendulum-v1"}, timeout=60)
    assert again.status_code == 409
    unknown = httpx.put(f"{base}/x", headers=auth, json={"env_id": "NoSuchEnv-v9"}, timeout=60)
    assert unknown.status_code == 400 and "NoSuchEnv-v9" in unknown.json()["description"]
    config = httpx.post(f"{base}/pend/agents/erin", headers=auth, timeout=60).json()
    assert set(config) == {"agent", "pwd", "env", "url"}
    assert config["url"] == arena_server.url
    summary = arena.run(config, lambda percept: [0.5], run_limit=2)
    assert len(summary.finished) == 2
    blocked = httpx.post(f"{base}/pend/agents/erin/block", headers=auth, timeout=30)
    assert blocked.json() == {"agent": "erin", "blocked": True}
    body = {"protocol_version": 1, "agent": "erin", "pwd": config["pwd"]}
    assert put(arena_server.act_url("pend"), body).status_code == 401
    httpx.post(f"{base}/pend/agents/erin/unblock", headers=auth, timeout=30)
    assert put(arena_server.act_url("pend"), body).status_code == 200
    renewed = httpx.post(f"{base}/pend/agents/erin/password", headers=auth, timeout=60).json()
    assert put(arena_server.act_url("pend"), body).status_code == 401
    assert put(arena_server.act_url("pend"), {**body, "pwd": renewed["pwd"]}).status_code == 200
    agents = httpx.get(f"{base}/pend/agents", headers=auth, timeout=30).json()
    assert [(a["agent"], a["total_runs"], a["blocked"]) for a in agents] == [("erin", 2, False)]


def test_client_gives_clear_errors(
    arena_server: ArenaServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    with pytest.raises(arena.ArenaRequestError, match="400 Bad Request: unknown arena env"):
        arena.run({**arena_server.config("alice"), "env": "gone"}, best, run_limit=1)
