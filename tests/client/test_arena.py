"""Our client against a scripted HTTP server: 503 retries with backoff, lost connections and
timeouts, one keep-alive connection, clear errors, and the loop's bookkeeping."""

from __future__ import annotations

import json
import logging
import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from envwire.client import arena
from envwire.errors import InvalidArgumentError, ProtocolError, TransportError

#: A script entry that holds its request unanswered until the test ends (then closes).
HOLD = None


class Scripted(ThreadingHTTPServer):
    """Answers each PUT with the next (status, body, headers) of its script; a status of
    :data:`HOLD` never answers."""

    daemon_threads = True

    def __init__(self, script: list[tuple[int | None, Any, dict[str, str]]]) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.script = script
        self.seen: list[tuple[str, dict[str, Any]]] = []
        self.raw: list[tuple[str, bytes]] = []  # (content-type, body) as sent
        self.peers: list[int] = []  # the client's port, per request
        self.released = threading.Event()


class Handler(BaseHTTPRequestHandler):
    server: Scripted
    protocol_version = "HTTP/1.1"  # keep-alive, as a real server

    def do_PUT(self) -> None:
        length = int(self.headers["content-length"])
        target = self.requestline.split()[1]  # self.path has a leading '//' collapsed
        data = self.rfile.read(length)
        self.server.seen.append((target, json.loads(data)))
        self.server.raw.append((self.headers["content-type"], data))
        self.server.peers.append(self.client_address[1])
        status, body, headers = self.server.script.pop(0)
        if status is HOLD:
            self.server.released.wait(30)
            self.close_connection = True
            return
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
    server.released.set()
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
    summary = arena.run(config(scripted), lambda percept: 2, run_limit=1)
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
    with pytest.raises(arena.ArenaRequestError) as info:
        arena.run(config(scripted), lambda percept: 1)
    assert str(info.value) == "401 Unauthorized: wrong password"
    assert (info.value.status, info.value.errorname) == (401, "Unauthorized")
    scripted.script += [(413, {"detail": "Request body too large"}, {})]
    with pytest.raises(arena.ArenaRequestError, match="413 Request Entity Too Large"):
        arena.run(config(scripted), lambda percept: 1)


def test_no_server_gives_up_after_retry_for() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = {"agent": "a", "pwd": "p", "env": "nim", "url": f"http://127.0.0.1:{port}/"}
    with pytest.raises(TransportError, match=r"giving up after 0\.6 s: no answer"):
        arena.run(dead, lambda percept: 1, retry_for=0.6)


def test_one_keep_alive_connection_and_the_body_on_the_wire(scripted: Scripted) -> None:
    scripted.script += [
        (200, reply([("1", 0, 10)]), {}),
        (200, reply([("1", 1, 7)]), {}),
        (200, reply([], {"1": 1}, []), {}),
    ]
    summary = arena.run(config(scripted), lambda percept: 1, run_limit=1)
    assert summary.requests == 3
    assert len(scripted.peers) == 3 and len(set(scripted.peers)) == 1  # one connection
    for (content_type, data), (_, body) in zip(scripted.raw, scripted.seen, strict=True):
        assert content_type == "application/json"
        assert data == json.dumps(body).encode()  # the standard library's form, ASCII only


def test_timeouts_are_retried_then_given_up(
    scripted: Scripted, caplog: pytest.LogCaptureFixture
) -> None:
    agent = arena.load_config(config(scripted))
    scripted.script += [(HOLD, None, {}), (200, reply([("1", 0, 10)]), {})]
    with arena.Connection(agent, timeout=0.3, retry_for=10) as connection:
        assert connection.act([])["action_requests"] == [{"run": "1", "act_no": 0, "percept": 10}]
    assert f"no answer from {connection.url} within 0.3 s; retrying" in caplog.text
    assert len(scripted.seen) == 2
    scripted.script += [(HOLD, None, {})]
    gave_up = r"giving up after 0\.3 s: no answer .* within 0\.2 s"
    with (
        arena.Connection(agent, timeout=0.2, retry_for=0.3) as connection,
        pytest.raises(TransportError, match=gave_up),
    ):
        connection.act([])
    assert connection.client.is_closed


def test_a_redirect_is_followed_with_the_same_put(scripted: Scripted) -> None:
    scripted.script += [(307, b"", {"location": "/moved/act/nim"}), (200, reply([]), {})]
    actions = [{"run": "1", "act_no": 0, "action": 1}]
    with arena.Connection(arena.load_config(config(scripted))) as connection:
        assert connection.act(actions) == reply([])
    assert [target for target, _ in scripted.seen] == ["//act/nim", "/moved/act/nim"]
    assert scripted.seen[0][1] == scripted.seen[1][1] and scripted.seen[1][1]["actions"] == actions


def test_bad_replies_bad_actions_and_bad_urls(scripted: Scripted) -> None:
    for garbage, shown in ((b"<html>oops", "'<html>oops'"), (b"[]", "'[]'")):
        scripted.script += [(200, garbage, {})]
        expected = f"expected a JSON object in the 200 reply, got {shown}"
        with pytest.raises(ProtocolError, match=re.escape(expected)):
            arena.run(config(scripted), lambda percept: 1)
    sent = len(scripted.seen)
    for action in (float("nan"), object()):
        scripted.script += [(200, reply([("1", 0, 10)]), {})]
        with pytest.raises(InvalidArgumentError, match="actions must be JSON data"):
            arena.run(config(scripted), lambda percept, action=action: action)
        sent += 1
        assert len(scripted.seen) == sent  # the first request went out, the bad one did not
    for url in ("ftp://127.0.0.1/", "127.0.0.1:8000/", "http://[::1/", "http:///"):
        with pytest.raises(InvalidArgumentError, match="agent config: url"):
            arena.run({**config(scripted), "url": url}, lambda percept: 1, retry_for=60)
    assert len(scripted.seen) == sent


def test_a_client_of_ones_own_is_used_and_left_open(scripted: Scripted) -> None:
    sent: list[httpx.Request] = []
    scripted.script += [(200, reply([("1", 0, 10)]), {}), (200, reply([], {"1": 1}, []), {})]
    with httpx.Client(event_hooks={"request": [sent.append]}) as client:
        summary = arena.run(config(scripted), lambda percept: 1, run_limit=1, client=client)
        assert not client.is_closed
    assert summary.finished == {"1": 1} and len(sent) == 2
    # the connection's timeout on every request, whatever the client's own default
    assert all(request.extensions["timeout"]["read"] == 120.0 for request in sent)


def test_per_run_agents_hooks_and_the_run_limit(scripted: Scripted) -> None:
    scripted.script += [
        (200, reply([("1", 0, 10), ("2", 0, 10)]), {}),
        (200, {**reply([("2", 1, 7)], {"1": 1}),
               "messages": [{"type": "info", "content": "won", "run": "1"},
                            {"type": "error", "content": "oops", "run": "2"}]}, {}),
        (200, reply([("3", 0, 10)], {"2": 0}), {}),
    ]  # fmt: skip
    events: list[tuple[str, Any]] = []

    class Counter(arena.Agent):
        def __init__(self, run_id: str, config: arena.AgentConfig) -> None:
            super().__init__(run_id, config)
            self.steps = 0
            events.append(("new", run_id))

        def get_action(self, percept: Any, info: arena.RequestInfo) -> Any:
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
    assert arena.load_config(path)["env"] == "e"
    for bad in ({"agent": "a"}, {"agent": "a", "pwd": 1, "env": "e", "url": "u"}):
        with pytest.raises(InvalidArgumentError):
            arena.load_config(bad)
    with pytest.raises(InvalidArgumentError, match="cannot read"):
        arena.load_config(tmp_path / "missing.json")


def test_progress_lines(scripted: Scripted, caplog: pytest.LogCaptureFixture) -> None:
    """A progress line per reply with progress_every=0 (every 10 s by default), and one when
    the loop stops; at INFO, so a program that does not log INFO sees none."""
    scripted.script += [
        (200, reply([("1", 0, 10), ("2", 0, 10)]), {}),
        (200, reply([("2", 1, 7), ("3", 0, 10)], {"1": 1}), {}),
        (200, reply([("3", 1, 7)], {"2": 0.5}), {}),
        (200, reply([("4", 0, 10)], {"3": "a draw"}), {}),
    ]
    with caplog.at_level(logging.INFO, logger="envwire.client.arena"):
        summary = arena.run(config(scripted), lambda percept: 1, run_limit=3, progress_every=0,
                            on_finish=lambda run, outcome: None)  # fmt: skip
    assert len(summary.finished) == 3
    lines = [r.getMessage() for r in caplog.records if "runs finished" in r.getMessage()]
    assert [line.split(", ")[0] for line in lines] == [
        "arena nim/a: 0/3 (0%) runs finished",
        "arena nim/a: 1/3 (33%) runs finished",
        "arena nim/a: 2/3 (67%) runs finished",
        "arena nim/a: 3/3 (100%) runs finished",
        "arena nim/a: 3/3 (100%) runs finished",
    ]
    # the mean of the numeric outcomes so far; the last line says the loop stopped
    assert "mean outcome 0.750" in lines[-1] and lines[-1].endswith("(stopped)")
    assert all(
        r.levelno == logging.INFO for r in caplog.records if "runs finished" in r.getMessage()
    )
