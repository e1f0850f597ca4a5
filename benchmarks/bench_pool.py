"""Pooled isolation at scale: many concurrent sessions of a CPU-bound env, over gym-socket.

Run: ``python benchmarks/bench_pool.py [--seconds S] [--runs R] [--quick] [--sessions N]
[--clients C] [--drivers D] [--step-us US] [--heavy-us US] [--inline-sessions M]
[--process-sessions P]``.

The env is ``envwire.testing.envs:BurnEnv``: each step runs a fixed amount of pure-Python work
while holding the GIL, calibrated at start to ``--step-us`` (default 200) µs of CPU time on
this machine. One real ``envwire serve`` serves it ``@pool`` (``pool_workers`` 0: one worker
process per core), ``@inline`` and ``@process``. Sessions step it one step in flight each,
driven by ``--clients`` client processes (default 4): each a non-blocking loop over its share
of the connections with envwire's sans-IO gym-socket codec, so that no thread per session
competes for the cores on the client side.

Every figure is beside a baseline of the same run, in alternating rounds; the baseline is **one
core**: the same env stepped in a loop in one process, no server (the work itself).

- ``--sessions`` (default 1,000) sessions ``@pool``: steps/s and the ratio to one core (the
  target is 1.8), with the footprint (the server's RSS, its pool worker processes and theirs)
  and the CPU time each party spent per step (the server process, the pool workers, the
  clients): on a machine the clients share, ``cores / (CPU per step, all parties)`` bounds the
  steps/s;
- ``--inline-sessions`` (default 100) sessions ``@pool`` and ``@inline`` (every env in the
  server process, under its GIL; not at 1,000, where the server's threads fight over the GIL
  so hard that the machine is unusable for anything else meanwhile);
- ``--sessions`` sessions ``@pool`` for a step of ``--heavy-us`` (default 2,000; 0 skips it),
  where what each step costs around the env weighs less;
- with ``--process-sessions P``: ``@process`` with P sessions, a process each, for the memory.

Then ``--sessions`` sessions' envs in a pool of the benchmark's own process, stepped by
``--drivers`` (default 64) threads through ``PooledWorker``: the pool with no front end,
sockets or client processes around it, beside one core.

First, inside one worker process hosting 64 envs with calls queued for all of them: answering
them one at a time against 4 threads (what a threaded worker would do), for a CPU-bound step
(steps per CPU second) and for a step that sleeps 1 ms (steps/s).
"""

from __future__ import annotations

import concurrent.futures
import functools
import multiprocessing
import multiprocessing.connection
import os
import selectors
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from envwire import messages as m
from envwire.client.gymsocket import DEFAULT_FLAGS
from envwire.protocols.gymsocket import NEED_DATA, ClientConnection, HandshakeReply
from envwire.registry import EnvSpec
from envwire.runtime.pool import WorkerPool
from envwire.testing import ServerProcess
from envwire.testing.envs import BurnEnv
from harness import Result, alternate, compare, machine, parse_settings, print_table, rate

__all__ = ["bench_pool_alone", "bench_sessions", "bench_worker_threads", "calibrate", "main"]

ACTION = 1


def calibrate(step_us: float) -> int:
    """BurnEnv's ``work`` for a step of about ``step_us`` µs of this thread's CPU time (CPU
    time, not wall time: other load on the machine does not change it)."""
    env = BurnEnv(work=10_000)
    env.reset(seed=0)
    action = np.int64(ACTION)
    best = float("inf")
    for _ in range(5):
        began = time.thread_time()
        for _ in range(10):
            env.step(action)
        best = min(best, (time.thread_time() - began) / 10)
    return max(1, round(10_000 * step_us / (best * 1e6)))


def _one_core(work: int, seconds: float) -> float:
    env = BurnEnv(work=work, horizon=2**62)
    env.reset(seed=0)
    action = np.int64(ACTION)
    return rate(lambda: env.step(action), seconds, warmup=20)


# --- the clients ---------------------------------------------------------------------------


def _next_event(sock: socket.socket, codec: ClientConnection) -> Any:
    """The next reply on a blocking socket."""
    while True:
        event = codec.next_event()
        if event is not NEED_DATA:
            if isinstance(event, Exception):
                raise event
            return event
        data = sock.recv(1 << 16)
        if not data:
            raise ConnectionError("the server closed the connection")
        codec.receive_data(data)


def _open(address: tuple[str, int], env_id: str, seed: int) -> tuple[socket.socket, Any]:
    sock = socket.create_connection(address)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    codec = ClientConnection(DEFAULT_FLAGS)
    sock.sendall(codec.send_handshake(env_id))
    reply = _next_event(sock, codec)
    assert isinstance(reply, HandshakeReply)
    if reply.error:
        raise RuntimeError(f"{env_id}: {reply.error}")
    sock.sendall(
        codec.send_request(m.GetSpace(m.SpaceKind.ACTION))
        + codec.send_request(m.GetSpace(m.SpaceKind.OBSERVATION))
    )
    spaces = _next_event(sock, codec).space, _next_event(sock, codec).space
    codec.set_spaces(*spaces)
    sock.sendall(codec.send_request(m.Reset(seed=seed)))
    _next_event(sock, codec)
    return sock, codec


def _client_main(
    conn: multiprocessing.connection.Connection, address: tuple[str, int], envs: list[str], n: int
) -> None:
    """One client process: ``n`` sessions of each env; per round, step one env's sessions,
    one step in flight each, for the seconds asked; answer the steps completed."""
    sessions = {env: [_open(address, env, i) for i in range(n)] for env in envs}
    conn.send("ready")
    step = m.Step(ACTION)
    while (order := conn.recv()) is not None:
        env, seconds = order
        selector = selectors.DefaultSelector()
        for sock, codec in sessions[env]:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ, (sock, codec))
            sock.send(codec.send_request(step))
        count, began = 0, time.perf_counter()
        deadline = began + seconds
        while (now := time.perf_counter()) < deadline:
            for key, _ in selector.select(deadline - now):
                sock, codec = key.data
                codec.receive_data(sock.recv(1 << 16))
                while (event := codec.next_event()) is not NEED_DATA:
                    if isinstance(event, Exception):
                        raise event
                    count += 1
                    sock.send(codec.send_request(step))
        elapsed = time.perf_counter() - began
        selector.close()
        for sock, codec in sessions[env]:  # the step still in flight on each
            sock.setblocking(True)
            _next_event(sock, codec)
        # the steps in flight at the deadline count for the CPU spent, not for the rate
        conn.send((count, elapsed, len(sessions[env])))


class _Clients:
    """``count`` client processes holding ``sessions`` sessions of each env between them."""

    def __init__(self, address: tuple[str, int], envs: list[str], sessions: int, count: int):
        ctx = multiprocessing.get_context("spawn")
        self.pipes: list[multiprocessing.connection.Connection] = []
        self.processes = []
        self.pids: list[int] = []
        for share in _shares(sessions, count):
            parent, child = ctx.Pipe()
            process = ctx.Process(
                target=_client_main, args=(child, address, envs, share), daemon=True
            )
            process.start()
            assert process.pid is not None  # started
            self.pipes.append(parent)
            self.processes.append(process)
            self.pids.append(process.pid)
        for pipe in self.pipes:
            if not pipe.poll(600) or pipe.recv() != "ready":
                raise RuntimeError("a client process did not open its sessions")

    def run(self, env: str, seconds: float) -> tuple[float, int]:
        """Steps/s of every session of ``env`` together, and every step taken (those still in
        flight at the deadline included)."""
        for pipe in self.pipes:
            pipe.send((env, seconds))
        results = [pipe.recv() for pipe in self.pipes]
        rate = sum(count / elapsed for count, elapsed, _ in results)
        return rate, sum(count + drained for count, _, drained in results)

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.send(None)
        for process in self.processes:
            process.join(10)
            if process.is_alive():
                process.kill()


def _shares(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (i < extra) for i in range(parts)]


# --- what the processes spent ----------------------------------------------------------------


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()


def _cpu(pids: list[int]) -> float:
    """User + system CPU seconds of ``pids`` so far (gone ones count 0)."""
    total = 0
    for pid in pids:
        try:
            fields = _stat(pid)
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _descendants(root: int) -> list[int]:
    """``root``'s child processes, their children, and so on."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                children.setdefault(int(_stat(int(entry))[1]), []).append(int(entry))
            except OSError:
                continue
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class _Accounting:
    """CPU time per step of the server, its worker processes and the clients, per case."""

    def __init__(self, server: int, clients: list[int]) -> None:
        self.server, self.clients = server, clients
        #: Per case, per round: CPU µs per step of the server, the workers, the clients.
        self.per_step: dict[str, list[tuple[float, ...]]] = {}

    def measured(self, name: str, measure: Callable[[], tuple[float, int]]) -> float:
        """``measure``'s steps/s; records the CPU each party spent per step it took."""
        workers = _descendants(self.server)
        before = _cpu([self.server]), _cpu(workers), _cpu(self.clients)
        steps_per_s, steps = measure()
        after = _cpu([self.server]), _cpu(workers), _cpu(self.clients)
        spent = tuple(1e6 * (b - a) / steps for a, b in zip(before, after, strict=True))
        self.per_step.setdefault(name, []).append(spent)
        return steps_per_s

    def notes(self, name: str) -> dict[str, Any]:
        rows = self.per_step[name]
        median = [float(np.median([r[i] for r in rows])) for i in range(3)]
        # Every party shares the cores: no run on them can beat cores / (CPU per step, all).
        bound = (os.cpu_count() or 1) * 1e6 / max(sum(median), 1e-9)
        return {
            "cpu us/step: server": round(median[0], 1),
            "pool workers": round(median[1], 1),
            "clients": round(median[2], 1),
            "steps/s bound on these cores": round(bound),
        }


# --- serial or threads inside one worker process -------------------------------------------


def _threaded_host(
    conn: multiprocessing.connection.Connection, work: int, sleep: float, envs: int, threads: int
) -> None:
    """Host ``envs`` BurnEnvs; per batch of env indices, step each once, one at a time
    (``threads`` 0) or on a pool of ``threads`` threads; answer the CPU seconds it took."""
    hosted = [BurnEnv(work=work, sleep=sleep, horizon=2**62) for _ in range(envs)]
    for env in hosted:
        env.reset(seed=0)
    action = np.int64(ACTION)
    executor = concurrent.futures.ThreadPoolExecutor(threads) if threads else None
    while (batch := conn.recv()) is not None:
        began = time.process_time()
        if executor is None:
            for i in batch:
                hosted[i].step(action)
        else:
            list(executor.map(lambda i: hosted[i].step(action), batch))
        conn.send(time.process_time() - began)


def _batches(
    pipe: multiprocessing.connection.Connection, seconds: float, per_cpu: list[float]
) -> float:
    """Steps/s of a :func:`_threaded_host` given batches of all 64 envs for ``seconds``;
    appends its steps per CPU second to ``per_cpu``."""
    for _ in range(2):  # warm-up
        pipe.send(list(range(64)))
        pipe.recv()
    batches, used, began = 0, 0.0, time.perf_counter()
    while (elapsed := time.perf_counter() - began) < seconds:
        pipe.send(list(range(64)))
        used += pipe.recv()
        batches += 1
    per_cpu.append(64 * batches / used)
    return 64 * batches / elapsed


def bench_worker_threads(settings: Any, work: int) -> list[Result]:
    """One worker process with calls queued for all of its 64 envs, answered one at a time or
    by 4 threads: for a CPU-bound step, steps per CPU second (how much of a core the answering
    wastes: on a shared machine, steps/s would measure the scheduler's favour to a process of
    5 threads); for a step that sleeps 1 ms, steps/s."""
    ctx = multiprocessing.get_context("spawn")
    results = []
    for label, sleep in (("CPU-bound step, steps per CPU second", 0.0), ("1 ms sleep", 0.001)):
        hosts = {}
        for threads in (0, 4):
            parent, child = ctx.Pipe()
            process = ctx.Process(
                target=_threaded_host, args=(child, work, sleep, 64, threads), daemon=True
            )
            process.start()
            name = f"one worker, {label}: " + (f"{threads} threads" if threads else "serial")
            hosts[name] = (parent, process)
        per_cpu: dict[str, list[float]] = {name: [] for name in hosts}
        cases = {
            name: functools.partial(_batches, pipe, settings.seconds, per_cpu[name])
            for name, (pipe, _) in hosts.items()
        }
        got = alternate(cases, settings.runs)
        serial, threaded = list(hosts)
        if sleep:
            results += [compare(got, serial), compare(got, threaded, serial)]
        else:
            results += [compare(per_cpu, serial), compare(per_cpu, threaded, serial)]
        for pipe, process in hosts.values():
            pipe.send(None)
            process.join(10)
    return results


# --- the pool alone, no server --------------------------------------------------------------


def bench_pool_alone(args: Any, settings: Any, work: int) -> list[Result]:
    """``--sessions`` sessions' envs in a :class:`WorkerPool` of this process (one worker
    process per core), stepped through :class:`PooledWorker` by ``--drivers`` threads, each
    over its share of the sessions one call at a time: the pool's own steps/s with no front
    end, no sockets and no client processes, beside one core stepping the same env."""
    spec = EnvSpec(
        "bench/Burn-pool", "envwire.testing.envs:BurnEnv", {"work": work, "horizon": 2**62}, "pool"
    )
    pool = WorkerPool(0)
    workers = [pool.worker(spec) for _ in range(args.sessions)]
    action = np.int64(ACTION)
    for worker in workers:
        worker.call("reset", 0, None, timeout=30)
    accounting = _Accounting(os.getpid(), [])
    base = "Burn: one core, the env stepped in one process"
    name = f"Burn: the pool alone (no server), {args.sessions} sessions, {args.drivers} threads"

    def drive() -> tuple[float, int]:
        stop = time.perf_counter() + settings.seconds
        counts = [0] * args.drivers

        def loop(index: int) -> None:
            mine = workers[index :: args.drivers]
            while time.perf_counter() < stop:
                for worker in mine:
                    worker.call("step", action, timeout=30)
                    counts[index] += 1

        began = time.perf_counter()
        threads = [threading.Thread(target=loop, args=(i,)) for i in range(args.drivers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return sum(counts) / (time.perf_counter() - began), sum(counts)

    try:
        got = alternate(
            {
                base: lambda: _one_core(work, settings.seconds),
                name: lambda: accounting.measured(name, drive),
            },
            settings.runs,
        )
        processes = len(pool.loads())
    finally:
        for worker in workers:
            worker.close()
        pool.close()
    result = compare(got, name, base, target=1.8)
    notes = accounting.notes(name)
    result.notes |= {
        "cpu us/step: the driving threads": notes["cpu us/step: server"],
        "pool workers": notes["pool workers"],
        "pool worker processes": processes,
    }
    return [compare(got, base), result]


# --- the whole -------------------------------------------------------------------------------


def _config(path: Path, works: dict[str, int]) -> None:
    """A config file serving BurnEnv ``bench/<name>-<isolation>`` for each (name, work)."""
    tables = []
    for name, work in works.items():
        for where in ("pool", "inline", "process"):
            tables.append(
                f'[[env]]\nid = "bench/{name}-{where}"\n'
                'entry_point = "envwire.testing.envs:BurnEnv"\n'
                f"kwargs = {{ work = {work}, horizon = {2**62} }}\n"
                f'isolation = "{where}"\n'
            )
    path.write_text("\n".join(tables))


def _footprint(server: int) -> dict[str, Any]:
    """The server's memory and processes: its pool workers are the children of its fork
    server (its one child with children)."""
    children = _descendants(server)
    workers = [p for p in children if p not in _direct_children(server)]
    return {
        "server RSS MiB": round(_rss_mib(server)),
        "pool worker processes": len(workers),
        "all processes under the server": len(children),
        "pool workers' RSS MiB": round(sum(_rss_mib(p) for p in workers)),
    }


def _direct_children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if int(_stat(int(entry))[1]) == pid:
                    found.add(int(entry))
            except OSError:
                continue
    return found


def bench_sessions(
    server: ServerProcess,
    args: Any,
    settings: Any,
    *,
    name: str,
    work: int,
    sessions: int,
    wheres: tuple[str, ...] = ("pool",),
) -> list[Result]:
    """``sessions`` sessions of ``bench/<name>-<where>`` for each of ``wheres``, beside one
    core stepping the same env: steps/s, ratios, CPU per step, footprint."""
    assert server.process is not None
    seconds = settings.seconds
    address = (server.host, server.ports["gym-socket"])
    clients = _Clients(address, [f"bench/{name}-{w}" for w in wheres], sessions, args.clients)
    base = f"{name}: one core, the env stepped in one process"
    labels = {w: f"{name}: @{w}, {sessions} sessions" for w in wheres}
    accounting = _Accounting(server.process.pid, clients.pids)

    def over(where: str) -> Callable[[], float]:
        run = lambda: clients.run(f"bench/{name}-{where}", seconds)  # noqa: E731
        return lambda: accounting.measured(labels[where], run)

    cases = {base: lambda: _one_core(work, seconds)} | {labels[w]: over(w) for w in wheres}
    try:
        got = alternate(cases, settings.runs)
        footprint = _footprint(server.process.pid)
    finally:
        clients.close()
    results = [compare(got, base)]
    for where, label in labels.items():
        result = compare(got, label, base, target=1.8 if where == "pool" else None)
        result.notes |= accounting.notes(label) | (footprint if where == "pool" else {})
        results.append(result)
    if "inline" in labels:
        pool, inline = labels["pool"], labels["inline"]
        results.append(compare(got, pool, inline, label=f"{pool} / @inline"))
    return results


def bench_per_process(server: ServerProcess, args: Any, settings: Any, work: int) -> list[Result]:
    """``@process`` with ``--process-sessions`` sessions (a process each), for its memory."""
    assert server.process is not None
    address = (server.host, server.ports["gym-socket"])
    count = args.process_sessions
    clients = _Clients(address, ["bench/Burn-process"], count, args.clients)
    base = "Burn: one core, the env stepped in one process"
    name = f"Burn: @process, {count} sessions"
    try:
        got = alternate(
            {
                base: lambda: _one_core(work, settings.seconds),
                name: lambda: clients.run("bench/Burn-process", settings.seconds)[0],
            },
            settings.runs,
        )
        tree = _descendants(server.process.pid)
        notes = {
            "server RSS MiB": round(_rss_mib(server.process.pid)),
            "processes under the server": len(tree),
            "their RSS MiB": round(sum(_rss_mib(p) for p in tree)),
        }
    finally:
        clients.close()
    result = compare(got, name, base)
    result.notes |= notes
    return [result]


def main() -> None:
    args, settings = parse_settings(
        __doc__.split("\n\n")[0],
        quick="a smoke run (0.3 s, 1 run, 100 sessions, 20 inline, no heavy step)",
        extra=(
            ("--sessions", int, 1000),
            ("--clients", int, 4),
            ("--drivers", int, 64),
            ("--step-us", float, 200.0),
            ("--heavy-us", float, 2000.0),
            ("--inline-sessions", int, 100),
            ("--process-sessions", int, 0),
        ),
    )
    if args.quick:
        args.sessions, args.heavy_us, args.inline_sessions = 100, 0, 20
    works = {"Burn": calibrate(args.step_us)}
    if args.heavy_us:
        works["BurnHeavy"] = calibrate(args.heavy_us)
    print(f"BurnEnv work per step: {works} ({args.step_us:g} / {args.heavy_us:g} µs)")
    results = bench_worker_threads(settings, works["Burn"])
    results += bench_pool_alone(args, settings, works["Burn"])
    limits = ("--max-connections", "8192", "--max-connections-per-address", "8192")
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "envwire.toml"
        _config(config, works)
        with ServerProcess((), ("--config", str(config), *limits), start_timeout=120) as server:
            burn, heavy = works["Burn"], works.get("BurnHeavy", 0)
            results += bench_sessions(
                server, args, settings, name="Burn", work=burn, sessions=args.sessions
            )
            if args.inline_sessions:
                results += bench_sessions(
                    server,
                    args,
                    settings,
                    name="Burn",
                    work=burn,
                    sessions=args.inline_sessions,
                    wheres=("pool", "inline"),
                )
            if heavy:
                results += bench_sessions(
                    server, args, settings, name="BurnHeavy", work=heavy, sessions=args.sessions
                )
            if args.process_sessions:
                results += bench_per_process(server, args, settings, works["Burn"])
    print_table({"results": [vars(r) for r in results], "machine": machine()})
    for result in results:
        shown = {k: v for k, v in result.notes.items() if "rounds" not in k}
        if shown:
            print(f"{result.name}: {shown}")


if __name__ == "__main__":
    main()
