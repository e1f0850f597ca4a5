"""Our client against a scripted HTTP server: 503 retries with backoff, lost connections, clear
errors, and the loop's bookkeeping."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import envwire.arena
from envwire.errors import InvalidArgumentError, TransportError


class Scripted(ThreadingHTTPServer):
    """Answers each PUT with the next (status, body, headers) of its script."""

    def __init__(self, script: list[tuple[int, Any, dict[str, str]]]) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.script = script
        self.seen: list[tuple[str, dict[str, Any]]] = []


class Handler(BaseHTTPRequestHandler):
    server: Scripted

    def do_PUT(self) -> None:
        length = int(self.headers["content-length"])
        target = self.requestline.split()[1]  # self.path has a leading '//' collapsed
        self.server.seen.append((target, json.loads(self.rfile.read(length))))
        status, body, headers = self.server.script.pop(0)
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        for key, value in {"content-type": "application/json", **headers}.items():
            self.send_header(key, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    server = Scripted([])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def config(server: Scripted) -> dict[str, str]:
    return {
        "agent": "a",
        "pwd": "p",
        "env": "nim",
        "url": f"http://127.0.0.1:{server.server_port}/",
    }


def reply(requests_: list[tuple[str, int, Any]], finished: dict[str, Any] | None = None,
          active: list[str] | None = None) -> dict[str, Any]:  # fmt: skip
    return {
        "action_requests": [{"run": r, "act_no": n, "percept": p} for r, n, p in requests_],
        "active_runs": active if active is not None else [r for r, _, _ in requests_],
        "finished_runs": finished or {},
        "messages": [],
    }


def test_503_is_retried_with_the_same_actions(scripted: Scripted) -> None:
    busy = {"errorcode": 503, "errorname": "Service Unavailable", "description": "busy"}
    scripted.script += [
        (200, reply([("1", 0, 10)]), {}),
        (503, busy, {}),
        (503, b"not json", {}),
        (200, reply([], {"1": 1}, []), {}),
    ]
    summary = envwire.arena.run(config(scripted), lambda percept: 2, run_limit=1)
    assert summary.finished == {"1": 1}
    paths = {path for path, _ in scripted.seen}
    assert paths == {"//act/nim"}
    bodies = [body for _, body in scripted.seen]
    assert bodies[0]["actions"] == [] and bodies[0]["protocol_version"] == 1
    assert (
        bodies[1]["actions"]
        == bodies[2]["actions"]
        == bodies[3]["actions"]
        == [{"run": "1", "act_no": 0, "action": 2}]
    )
    assert summary.requests == 2  # the retries are one request


def test_other_errors_are_raised_with_the_servers_words(scripted: Scripted) -> None:
    scripted.script += [
        (401, {"errorcode": 401, "errorname": "Unauthorized", "description": "wrong password"}, {}),
    ]
    with pytest.raises(envwire.arena.ArenaRequestError) as info:
        envwire.arena.run(config(scripted), lambda percept: 1)
    assert str(info.value) == "401 Unauthorized: wrong password"
    assert (info.value.status, info.value.errorname) == (401, "Unauthorized")
    scripted.script += [(413, {"detail": "Request body too large"}, {})]
    with pytest.raises(envwire.arena.ArenaRequestError, match="413 Request Entity Too Large"):
        envwire.arena.run(config(scripted), lambda percept: 1)


def test_no_server_gives_up_after_retry_for() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = {"agent": "a", "pwd": "p", "env": "nim", "url": f"http://127.0.0.1:{port}/"}
    with pytest.raises(TransportError, match=r"giving up after 0\.6 s: no answer"):
        envwire.arena.run(dead, lambda percept: 1, retry_for=0.6)


def test_per_run_agents_hooks_and_the_run_limit(scripted: Scripted) -> None:
    scripted.script += [
        (200, reply([("1", 0, 10), ("2", 0, 10)]), {}),
        (200, {**reply([("2", 1, 7)], {"1": 1}),
               "messages": [{"type": "info", "content": "won", "run": "1"},
                            {"type": "error", "content": "oops", "run": "2"}]}, {}),
        (200, reply([("3", 0, 10)], {"2": 0}), {}),
    ]  # fmt: skip
    events: list[tuple[str, Any]] = []

    class Counter(envwire.arena.Agent):
        def __init__(self, run_id: str, config: envwire.arena.AgentConfig) -> None:
            super().__init__(run_id, config)
            self.steps = 0
            events.append(("new", run_id))

        def get_action(self, percept: Any, info: envwire.arena.RequestInfo) -> Any:
            self.steps += 1
            return self.steps

        def on_finish(self, outcome: Any) -> None:
            events.append(("finish", (self.run_id, outcome, self.steps)))

        def on_message(self, content: str, type: str) -> None:
            events.append(("message", (self.run_id, type, content)))

    summary = Counter.run(config(scripted), run_limit=2)
    assert summary.finished == {"1": 1, "2": 0}
    assert events == [
        ("new", "1"),
        ("new", "2"),
        ("message", ("1", "info", "won")),
        ("message", ("2", "error", "oops")),
        ("finish", ("1", 1, 1)),
        ("finish", ("2", 0, 2)),
    ]
    assert scripted.seen[1][1]["actions"] == [
        {"run": "1", "act_no": 0, "action": 1},
        {"run": "2", "act_no": 0, "action": 1},
    ]


def test_configs(tmp_path: Path) -> None:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps({"agent": "a", "pwd": "p", "env": "e", "url": "http://x/"}))
    assert envwire.arena.load_config(path)["env"] == "e"
    for bad in ({"agent": "a"}, {"agent": "a", "pwd": 1, "env": "e", "url": "u"}):
        with pytest.raises(InvalidArgumentError):
            envwire.arena.load_config(bad)
    with pytest.raises(InvalidArgumentError, match="cannot read"):
        envwire.arena.load_config(tmp_path / "missing.json")
