"""SIGKILL the server in the middle of 64 parallel runs, restart it, finish the runs: nothing the
agent was told is lost, and the resumed runs go on exactly as they would have."""

from __future__ import annotations

import random
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from envwire.arena.admin import ArenaAdmin
from envwire.arena.store import Store
from envwire.envs.nim import NimEnv
from envwire.testing import ServerProcess
from tests.arena.web.conftest import start_server

PARALLEL = 64
# A resent action of a run that finished: a wrong action number that names the outcome.
_FINISHED = re.compile(
    r"^wrong action number \d+: the run finished after \d+ actions \(outcome (.+?)\)"
)


class Recorder:
    """A v1 agent that remembers everything the server acknowledged."""

    def __init__(self, config: dict[str, str]) -> None:
        self.config = config
        self.rng = random.Random(0)
        self.pending: list[dict[str, Any]] = []  # sent (or to be sent), not yet acknowledged
        self.percepts: dict[tuple[str, int], Any] = {}
        self.accepted: dict[str, dict[int, Any]] = {}
        self.outcomes: dict[str, Any] = {}
        self.recovered = 0
        self.requests = 0
        self.client = httpx.Client()

    def close(self) -> None:
        self.client.close()

    def step(self, url: str, timeout: float = 30) -> None:
        """One request; raises ``httpx.TransportError`` (keeping ``pending``) if the reply is
        lost. ``timeout`` bounds the wait for the reply alone: connecting and sending get 10 s,
        so that a short one loses the reply, never the request."""
        body: dict[str, Any] = {"protocol_version": 1, "agent": self.config["agent"],
                                "pwd": self.config["pwd"], "actions": self.pending}  # fmt: skip
        response = self.client.put(
            f"{url}/act/{self.config['env']}",
            json=body,
            timeout=httpx.Timeout(10, read=timeout),
        )
        assert response.status_code == 200, response.text
        reply = response.json()
        self.requests += 1
        errors = {m["run"]: m["content"] for m in reply["messages"] if m["type"] == "error"}
        for action in self.pending:
            run, act_no = action["run"], action["act_no"]
            problem = errors.get(run)
            if problem is not None:
                # Only after a lost reply: the action was saved before the kill.
                finished = _FINISHED.match(problem)
                assert finished or problem.startswith("wrong action number"), problem
                if finished:
                    self.outcomes.setdefault(run, int(finished[1]))
                self.recovered += 1
            self.accepted.setdefault(run, {})[act_no] = action["action"]
        for run, outcome in reply["finished_runs"].items():
            assert run not in self.outcomes
            self.outcomes[run] = outcome
        self.pending = []
        for request in reply["action_requests"]:
            key = (request["run"], request["act_no"])
            # re-sent requests (across the restart too) carry the same percept
            assert self.percepts.setdefault(key, request["percept"]) == request["percept"]
            take = self.rng.randint(1, min(3, request["percept"]))
            self.pending.append(
                {"run": request["run"], "act_no": request["act_no"], "action": take}
            )

    def active_runs(self) -> set[str]:
        return {run for run in self.accepted if run not in self.outcomes} | {
            a["run"] for a in self.pending
        }


def kill(server: ServerProcess) -> None:
    """SIGKILL, no goodbyes."""
    assert server.process is not None
    server.process.kill()
    server.process.wait()
    server.stop()


def kill_while_playing(recorder: Recorder, db: Path) -> set[str]:
    """Play in a thread and SIGKILL the server under it; the runs active at that moment."""
    server = start_server(db)
    url = f"http://127.0.0.1:{server.ports['http']}/"
    lost: list[BaseException] = []

    def play() -> None:
        try:
            while True:
                recorder.step(url)
        except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:  # the server is gone
            lost.append(exc)

    player = threading.Thread(target=play, daemon=True)
    player.start()
    deadline = time.monotonic() + 30
    while recorder.requests < 8 and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(random.Random().uniform(0, 0.02))  # somewhere inside a request, most likely
    kill(server)
    player.join(30)
    assert lost, "the player should have lost its connection"
    return recorder.active_runs()


def lose_a_reply_then_kill(recorder: Recorder, db: Path) -> int:
    """Restart, play on, then lose a reply for sure: the server saves the request, the agent
    never hears back, and the server is killed before the agent resends. The actions lost."""
    server = start_server(db)
    url = f"http://127.0.0.1:{server.ports['http']}/"
    for _ in range(3):
        recorder.step(url)
    in_flight = len(recorder.pending)
    try:
        recorder.step(url, timeout=0.001)
    except httpx.TransportError:
        pass
    else:  # pragma: no cover - a 1 ms read timeout beats 64 actions
        raise AssertionError("the reply should have been lost")
    time.sleep(0.3)  # time enough to commit
    kill(server)
    return in_flight


def read_db(db: Path) -> tuple[dict[str, tuple[Any, ...]], dict[str, list[tuple[Any, ...]]]]:
    """Runs (seed, act_no, finished, outcome) and steps (act_no, action, percept) by run id."""
    with sqlite3.connect(db) as connection:
        runs = {
            str(r[0]): r[1:]
            for r in connection.execute("SELECT id, seed, act_no, finished, outcome FROM runs")
        }
        steps: dict[str, list[tuple[Any, ...]]] = {}
        for run, *rest in connection.execute(
            "SELECT run, act_no, action, percept FROM steps ORDER BY run, act_no"
        ):
            steps.setdefault(str(run), []).append(tuple(rest))
    return runs, steps


def test_sigkill_mid_run_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "arena.sqlite3"
    admin = ArenaAdmin(Store(db))
    settings = {"kwargs": {"opponent": "random"}, "requests_per_reply": PARALLEL}
    admin.create_env("nim", "envwire/Nim-v0", settings)
    recorder = Recorder(admin.add_agent("nim", "durable"))
    admin.store.close()

    try:
        active_at_kill = kill_while_playing(recorder, db)
        assert len(active_at_kill) >= PARALLEL - 4
        in_flight = lose_a_reply_then_kill(recorder, db)
        third = start_server(db)
        try:
            url = f"http://127.0.0.1:{third.ports['http']}/"
            before = recorder.recovered  # the first kill may have lost a reply too
            recorder.step(url)  # resends the lost request's actions: the server has them already
            assert recorder.recovered - before == in_flight
            for _ in range(10):
                recorder.step(url)
        finally:
            third.stop()
    finally:
        recorder.close()

    assert active_at_kill <= set(recorder.outcomes), "runs active at the kill were finished"
    runs, steps = read_db(db)
    for run, accepted in recorder.accepted.items():
        stored = steps.get(run, [])
        assert [s[0] for s in stored] == sorted(accepted) == list(range(len(accepted)))
        assert [int(s[1]) for s in stored] == [accepted[n] for n in sorted(accepted)]
        assert [int(s[2]) for s in stored] == [recorder.percepts[run, n] for n in sorted(accepted)]
    for run, outcome in recorder.outcomes.items():
        _, act_no, finished, stored_outcome = runs[run]
        assert finished == 1 and int(stored_outcome) == outcome
        assert act_no == len(recorder.accepted[run])

    # Every finished run, replayed from its seed outside the server, is the game the agent saw:
    # runs resumed after a restart (rebuilt by replay there) went on exactly as before.
    for run, outcome in recorder.outcomes.items():
        env = NimEnv(opponent="random")
        observation, _ = env.reset(seed=runs[run][0])
        for act_no in sorted(recorder.accepted[run]):
            assert int(observation) == recorder.percepts[run, act_no]
            observation, _, terminated, _, info = env.step(np.int64(recorder.accepted[run][act_no]))
        assert terminated and info["outcome"] == outcome
