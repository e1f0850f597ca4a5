"""``envwire serve --workers N``: the steps/s of client processes stepping CartPole one step at a
time against two workers beside one, in the same run, with the CPU each party spent per step,
and what a worker costs to start and to keep.

Run: ``python benchmarks/bench_workers.py [--quick] [--seconds S] [--runs R] [--clients C]
[--workers N] [--json FILE]``.

Two real servers run side by side, ``--workers 1`` and ``--workers N`` (default 2), each
serving CartPole over gym-socket; ``--clients`` client processes (default 4), each with one
connection, step them one step at a time for ``--seconds`` (default 5) per round, in ``--runs``
(default 3) rounds that alternate between the two servers. A round's figure is the steps/s of
all clients together; the ratio is the median of the rounds' ratios. Beside it: the CPU time
per step of the clients (all of them) and of the server (the parent and every worker), read
from ``/proc`` (Linux).

Then the cost of a worker: the seconds from ``envwire serve`` to its "listening" lines with 1,
2 and 4 workers, and each process's memory (RSS, and PSS, which counts the pages processes
share once).

``--quick``: a smoke run (two clients, half a second, one round).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import multiprocessing.connection
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium

import envwire
from envwire.testing import ServerProcess

ENV = "CartPole-v1"
_TICK = os.sysconf("SC_CLK_TCK")


def _client(
    url: str, seconds: float, start: Any, out: multiprocessing.connection.Connection
) -> None:
    """One client process: connect, wait for the start, step until the time is up."""
    env = envwire.make(url, timeout=60)
    assert isinstance(env, gymnasium.Env)  # not a TypedClient: that is OpenEnv only
    env.reset(seed=0)
    out.send("ready")
    start.wait(60)
    steps, action = 0, 0
    cpu0, t0 = time.process_time(), time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        for _ in range(50):
            _, _, terminated, truncated, _ = env.step(action)
            action ^= 1
            if terminated or truncated:
                env.reset()
        steps += 50
    out.send((steps, time.perf_counter() - t0, time.process_time() - cpu0))
    env.close()


def _tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    found, todo = [pid], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(w) for w in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def _cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes spent so far."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / _TICK


def _memory(pid: int) -> dict[str, float]:
    """A process's RSS and PSS in MiB."""
    found: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Rss", "Pss"):
            found[key.lower()] = int(value.split()[0]) / 1024
    return found


def one_round(server: ServerProcess, clients: int, seconds: float) -> dict[str, float]:
    """``clients`` processes stepping for ``seconds``: steps/s and CPU per step."""
    context = multiprocessing.get_context("spawn")
    start = context.Event()
    pipes, processes = [], []
    for _ in range(clients):
        ours, theirs = context.Pipe()
        process = context.Process(
            target=_client, args=(server.url("gym-socket", ENV), seconds, start, theirs)
        )
        process.start()
        pipes.append(ours)
        processes.append(process)
    for pipe in pipes:
        if not pipe.poll(120) or pipe.recv() != "ready":
            raise RuntimeError("a client did not connect")
    assert server.process is not None
    pids = _tree(server.process.pid)
    server_cpu = _cpu(pids)
    start.set()
    results = []
    for pipe in pipes:
        if not pipe.poll(seconds + 120):
            raise RuntimeError("a client did not finish")
        results.append(pipe.recv())
    server_cpu = _cpu(pids) - server_cpu
    for process in processes:
        process.join(60)
    steps = sum(r[0] for r in results)
    elapsed = max(r[1] for r in results)
    return {
        "steps_per_s": steps / elapsed,
        "client_cpu_us": 1e6 * sum(r[2] for r in results) / steps,
        "server_cpu_us": 1e6 * server_cpu / steps,
    }


def startup(workers: int) -> dict[str, Any]:
    """Seconds to the "listening" lines, and each process's memory, with ``workers``."""
    began = time.perf_counter()
    with ServerProcess([ENV], workers=workers) as server:
        seconds = time.perf_counter() - began
        time.sleep(0.5)
        assert server.process is not None
        parent = _memory(server.process.pid)
        children = [_memory(pid) for pid in server.children()]
    return {"workers": workers, "seconds": seconds, "parent": parent, "workers_memory": children}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.runs, args.clients = 0.5, 1, 2
    rounds: dict[int, list[dict[str, float]]] = {1: [], args.workers: []}
    with ServerProcess([ENV]) as one, ServerProcess([ENV], workers=args.workers) as many:
        for _ in range(args.runs):
            for count, server in ((1, one), (args.workers, many)):
                rounds[count].append(one_round(server, args.clients, args.seconds))
    ratios = [
        b["steps_per_s"] / a["steps_per_s"]
        for a, b in zip(rounds[1], rounds[args.workers], strict=True)
    ]
    print(f"{args.clients} client processes, CartPole one step at a time, over gym-socket")
    print(f"{'workers':>8} {'steps/s':>10} {'client CPU/step':>16} {'server CPU/step':>16}")
    for count, results in rounds.items():
        rate = statistics.median(r["steps_per_s"] for r in results)
        client = statistics.median(r["client_cpu_us"] for r in results)
        server_cpu = statistics.median(r["server_cpu_us"] for r in results)
        print(f"{count:>8} {rate:>10,.0f} {client:>13.1f} µs {server_cpu:>13.1f} µs")
    spread = f" (rounds {min(ratios):.2f} to {max(ratios):.2f})" if len(ratios) > 1 else ""
    print(f"ratio {args.workers} workers / 1: {statistics.median(ratios):.2f}x{spread}")
    costs = [startup(n) for n in ((1,) if args.quick else (1, 2, 4))]
    print(f"{'workers':>8} {'start':>8} {'parent RSS/PSS':>16} {'each worker RSS/PSS':>22}")
    for cost in costs:
        parent = cost["parent"]
        each = cost["workers_memory"] or [parent]
        rss = statistics.mean(m["rss"] for m in each)
        pss = statistics.mean(m["pss"] for m in each)
        print(
            f"{cost['workers']:>8} {cost['seconds']:>6.2f} s "
            f"{parent['rss']:>6.0f}/{parent['pss']:<5.0f} MiB {rss:>9.0f}/{pss:<5.0f} MiB"
        )
    if args.json is not None:
        report = {"rounds": rounds, "ratios": ratios, "startup": costs, "cpus": os.cpu_count()}
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
