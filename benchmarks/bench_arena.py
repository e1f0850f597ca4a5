"""arena: actions per second with 64 parallel runs per request, beside single-run requests.

Run: ``python benchmarks/bench_arena.py [--actions N] [--runs R] [--sync full|normal] [--quick]``.
One real ``envwire serve --http 0 --arena-db FILE`` process serves Nim; this process is a v1
client over one keep-alive connection. Both loops play the same number of actions against the
same server in the same run: one with the arena env's 64 requests per reply, one with
``parallel_runs: false`` (one request per reply). Every action is committed to SQLite before its
reply, so the single-run loop pays one transaction (and, with ``--sync full``, one fsync) per
action, the batched loop one per 64.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from envwire.arena.admin import ArenaAdmin
from envwire.arena.store import Store
from envwire.envs.nim import strong_move
from envwire.testing import ServerProcess
from harness import Result, machine, print_table

PARALLEL = 64


def play(url: str, config: dict[str, str], actions: int, parallel: bool) -> float:
    """Actions per second over ``actions`` accepted actions."""
    with httpx.Client(timeout=60) as client:
        return _play(client, url, config, actions, parallel)


def _play(
    client: httpx.Client, url: str, config: dict[str, str], actions: int, parallel: bool
) -> float:
    body: dict[str, Any] = {
        "protocol_version": 1,
        "agent": config["agent"],
        "pwd": config["pwd"],
        "parallel_runs": parallel,
        "actions": [],
    }
    act_url = f"{url}/act/{config['env']}"
    reply = client.put(act_url, json=body).json()  # warm-up: runs exist after it
    done, start = 0, time.perf_counter()
    while done < actions:
        body["actions"] = [
            {"run": r["run"], "act_no": r["act_no"], "action": strong_move(r["percept"]) or 1}
            for r in reply["action_requests"]
        ]
        response = client.put(act_url, json=body)
        assert response.status_code == 200, response.text
        reply = response.json()
        assert not any(m["type"] == "error" for m in reply["messages"]), reply["messages"]
        done += len(body["actions"])
    return done / (time.perf_counter() - start)


def measure(actions: int, runs: int, sync: str) -> list[Result]:
    """The two figures, measured against one fresh server."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "arena.sqlite3"
        admin = ArenaAdmin(Store(db))
        admin.create_env("nim", "envwire/Nim-v0", {"requests_per_reply": PARALLEL})
        batched = admin.add_agent("nim", "batched")
        single = admin.add_agent("nim", "single")
        admin.store.close()
        extra = ["--gym-socket", "off", "--arena-db", str(db), "--arena-sync", sync]
        with ServerProcess(["envwire/Nim-v0"], extra, front_ends=("http",)) as server:
            url = f"http://127.0.0.1:{server.ports['http']}/"
            one = statistics.median(play(url, single, actions, False) for _ in range(runs))
            many = statistics.median(play(url, batched, actions, True) for _ in range(runs))
    notes = {"actions": actions, "runs": runs, "sync": sync}
    baseline = "arena: 1 run per request (parallel_runs false)"
    return [
        Result(baseline, one, "actions/s", notes=notes),
        Result(f"arena: {PARALLEL} runs per request", many, "actions/s", baseline, many / one,
               notes=notes),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--actions", type=int, default=64 * 40, help="actions per measurement")
    parser.add_argument("--runs", type=int, default=3, help="measurements (the median counts)")
    parser.add_argument("--sync", choices=["full", "normal"], default="full")
    parser.add_argument("--quick", action="store_true", help="a smoke run (640 actions, once)")
    args = parser.parse_args()
    actions, runs = (PARALLEL * 10, 1) if args.quick else (args.actions, args.runs)
    results = measure(actions, runs, args.sync)
    print(f"Nim, {actions} actions per measurement, median of {runs}, --arena-sync {args.sync}")
    print_table({"machine": machine(), "results": [vars(r) for r in results]})


if __name__ == "__main__":
    main()
