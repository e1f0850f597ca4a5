"""Pooled isolation at scale: many concurrent sessions of a CPU-bound env, over gym-socket.

Run: ``python benchmarks/bench_pool.py [--seconds S] [--runs R] [--quick] [--sessions N]
[--clients C] [--step-us US] [--process-sessions P]``.

The env is ``envwire.testing.envs:BurnEnv``: each step burns a fixed amount of pure-Python
work (``--step-us``, default 200 µs, calibrated on this machine at start), holding the GIL.
One real ``envwire serve`` serves it twice, ``@pool`` (``--pool-workers 0``: one worker
process per core) and ``@inline``; ``--sessions`` (default 1,000) concurrent sessions each
step it one step at a time, driven by ``--clients`` client processes (default 4), each a
non-blocking loop over its share of the connections with envwire's sans-IO gym-socket codec,
so that no client thread per session competes for the cores.

Every figure is beside a baseline of the same run, in alternating rounds:

- **one core**: the same env stepped in a loop in one process, no server (the work itself);
- **pool**: the sessions' steps/s with ``@pool``, its ratio to one core (the target is 1.8),
  with the server's processes (workers included), its RSS and the CPU time each party spent
  per step (server, pool workers, clients), which bound the ratio on a machine the clients
  share;
- **inline**: the same sessions with ``@inline`` (every env in the server process, under its
  GIL), the ratio of the pool to it;
- with ``--process-sessions P``: ``@process`` with P sessions (a process each), for the memory
  of per-session processes.

Then, inside one worker process hosting 64 envs with calls queued for all of them: answering
them one at a time against a pool of 4 threads (what a threaded worker would do), with a
CPU-bound step and with a step that sleeps 1 ms (an env waiting on something).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import multiprocessing.connection
import os
import selectors
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from envwire import messages as m
from envwire.client.gymsocket import DEFAULT_FLAGS
from envwire.protocols.gymsocket import NEED_DATA, ClientConnection, HandshakeReply
from envwire.testing import ServerProcess
from envwire.testing.envs import BurnEnv
from harness import Result, alternate, compare, machine, parse_settings, print_table, rate

__all__ = ["bench_worker_threads", "calibrate", "main"]

ONE_CORE = "one core: the env stepped in one process"
ACTION = 1


def calibrate(step_us: float) -> int:
    """BurnEnv's ``work`` for a step of about ``step_us`` µs here (the best of many timings,
    so that other load on the machine does not shrink the work)."""
    env = BurnEnv(work=10_000)
    env.reset(seed=0)
    best = float("inf")
    for _ in range(30):
        began = time.perf_counter()
        env.step(np.int64(ACTION))
        best = min(best, time.perf_counter() - began)
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
            selector.register(sock, selectors.EVENT_READ, codec)
            sock.send(codec.send_request(step))
        count, began = 0, time.perf_counter()
        deadline = began + seconds
        while (now := time.perf_counter()) < deadline:
            for key, _ in selector.select(deadline - now):
                sock, codec = key.fileobj, key.data
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
        conn.send((count, elapsed))


class _Clients:
    """``count`` client processes holding ``sessions`` sessions of each env between them."""

    def __init__(self, address: tuple[str, int], envs: list[str], sessions: int, count: int):
        ctx = multiprocessing.get_context("spawn")
        self.pipes: list[multiprocessing.connection.Connection] = []
        self.processes = []
        for share in _shares(sessions, count):
            parent, child = ctx.Pipe()
            process = ctx.Process(
                target=_client_main, args=(child, address, envs, share), daemon=True
            )
            process.start()
            self.pipes.append(parent)
            self.processes.append(process)
        for pipe in self.pipes:
            if not pipe.poll(600) or pipe.recv() != "ready":
                raise RuntimeError("a client process did not open its sessions")

    def run(self, env: str, seconds: float) -> float:
        """Steps/s of every session of ``env`` together."""
        for pipe in self.pipes:
            pipe.send((env, seconds))
        results = [pipe.recv() for pipe in self.pipes]
        return sum(count / elapsed for count, elapsed in results)

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
        self.per_step: dict[str, list[tuple[float, float, float]]] = {}

    def measured(self, name: str, measure: Callable[[], float], seconds: float) -> float:
        workers = _descendants(self.server)
        before = _cpu([self.server]), _cpu(workers), _cpu(self.clients)
        steps_per_s = measure()
        after = _cpu([self.server]), _cpu(workers), _cpu(self.clients)
        steps = steps_per_s * seconds
        spent = tuple(1e6 * (b - a) / steps for a, b in zip(before, after, strict=True))
        self.per_step.setdefault(name, []).append(spent)  # type: ignore[arg-type]
        return steps_per_s

    def notes(self, name: str) -> dict[str, Any]:
        rows = self.per_step[name]
        median = [float(np.median([r[i] for r in rows])) for i in range(3)]
        return {
            "cpu us/step: server": round(median[0], 1),
            "pool workers": round(median[1], 1),
            "clients": round(median[2], 1),
        }


# --- serial or threads inside one worker process -------------------------------------------


def _threaded_host(
    conn: multiprocessing.connection.Connection, work: int, sleep: float, envs: int, threads: int
) -> None:
    """Host ``envs`` BurnEnvs; per batch of env indices, step each once, one at a time
    (``threads`` 0) or on a pool of ``threads`` threads; answer when all are done."""
    hosted = [BurnEnv(work=work, sleep=sleep, horizon=2**62) for _ in range(envs)]
    for env in hosted:
        env.reset(seed=0)
    action = np.int64(ACTION)
    executor = concurrent.futures.ThreadPoolExecutor(threads) if threads else None
    while (batch := conn.recv()) is not None:
        if executor is None:
            for i in batch:
                hosted[i].step(action)
        else:
            list(executor.map(lambda i: hosted[i].step(action), batch))
        conn.send(len(batch))


def bench_worker_threads(settings: Any, work: int) -> list[Result]:
    """Steps/s of one worker process with calls queued for all of its 64 envs: answered one
    at a time, or by 4 threads, for a CPU-bound step and a step that sleeps 1 ms."""
    ctx = multiprocessing.get_context("spawn")
    results = []
    for label, sleep in (("CPU-bound step", 0.0), ("step sleeping 1 ms", 0.001)):
        hosts = {}
        for threads in (0, 4):
            parent, child = ctx.Pipe()
            process = ctx.Process(
                target=_threaded_host, args=(child, work, sleep, 64, threads), daemon=True
            )
            process.start()
            name = f"one worker, {label}: " + (f"{threads} threads" if threads else "serial")
            hosts[name] = (parent, process)

        def measure(pipe: multiprocessing.connection.Connection) -> float:
            def batch() -> None:
                pipe.send(list(range(64)))
                pipe.recv()

            return 64 * rate(batch, settings.seconds, warmup=2)

        cases = {name: (lambda p=pipe: measure(p)) for name, (pipe, _) in hosts.items()}
        got = alternate(cases, settings.runs)
        serial, threaded = list(hosts)
        results += [compare(got, serial), compare(got, threaded, serial)]
        for pipe, process in hosts.values():
            pipe.send(None)
            process.join(10)
    return results


# --- the whole -------------------------------------------------------------------------------


def _config(path: Path, work: int) -> None:
    kwargs = f"kwargs = {{ work = {work}, horizon = {2**62} }}"
    entry = 'entry_point = "envwire.testing.envs:BurnEnv"'
    path.write_text(
        "".join(
            f'[[env]]\nid = "bench/Burn-{where}"\n{entry}\n{kwargs}\nisolation = "{where}"\n\n'
            for where in ("pool", "inline", "process")
        )
    )


def main() -> None:
    args, settings = parse_settings(
        __doc__.split("\n\n")[0],
        quick="a smoke run (0.3 s, 1 run, 100 sessions)",
        extra=(
            ("--sessions", int, 1000),
            ("--clients", int, 4),
            ("--step-us", float, 200.0),
            ("--process-sessions", int, 0),
        ),
    )
    sessions = 100 if args.quick else args.sessions
    work = calibrate(args.step_us)
    print(f"BurnEnv work={work} for a {args.step_us:g} µs step; {sessions} sessions")
    results = bench_worker_threads(settings, work)
    limits = ("--max-connections", "8192", "--max-connections-per-address", "8192")
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "envwire.toml"
        _config(config, work)
        with ServerProcess((), ("--config", str(config), *limits), start_timeout=120) as server:
            assert server.process is not None
            address = (server.host, server.ports["gym-socket"])
            envs = ["bench/Burn-pool", "bench/Burn-inline"]
            clients = _Clients(address, envs, sessions, args.clients)
            try:
                pool_name = f"pool, {sessions} sessions"
                inline_name = f"inline, {sessions} sessions"
                accounting = _Accounting(server.process.pid, [p.pid for p in clients.processes])
                seconds = settings.seconds

                def over(env: str, name: str) -> Callable[[], float]:
                    run = lambda: clients.run(env, seconds)  # noqa: E731
                    return lambda: accounting.measured(name, run, seconds)

                cases = {
                    ONE_CORE: lambda: _one_core(work, seconds),
                    pool_name: over("bench/Burn-pool", pool_name),
                    inline_name: over("bench/Burn-inline", inline_name),
                }
                got = alternate(cases, settings.runs)
                tree = _descendants(server.process.pid)
                footprint = {
                    "server RSS MiB": round(_rss_mib(server.process.pid)),
                    "worker processes": len(tree),
                    "workers' RSS MiB": round(sum(_rss_mib(p) for p in tree)),
                }
            finally:
                clients.close()
            results.append(compare(got, ONE_CORE))
            pool = compare(got, pool_name, ONE_CORE, target=1.8)
            pool.notes |= footprint | accounting.notes(pool_name)
            inline = compare(got, inline_name, ONE_CORE)
            inline.notes |= accounting.notes(inline_name)
            versus = compare(got, pool_name, inline_name, label=f"{pool_name} / inline")
            results += [pool, inline, versus]
            if args.process_sessions:
                results += _per_process(server, args, settings, base=ONE_CORE, work=work)
    print_table({"results": [vars(r) for r in results], "machine": machine()})
    for result in results:
        shown = {k: v for k, v in result.notes.items() if "rounds" not in k}
        if shown:
            print(f"{result.name}: {shown}")


def _per_process(
    server: ServerProcess, args: Any, settings: Any, *, base: str, work: int
) -> list[Result]:
    """``@process`` with ``--process-sessions`` sessions: steps/s and memory."""
    assert server.process is not None
    address = (server.host, server.ports["gym-socket"])
    clients = _Clients(address, ["bench/Burn-process"], args.process_sessions, args.clients)
    try:
        name = f"process, {args.process_sessions} sessions"
        cases = {
            base: lambda: _one_core(work, settings.seconds),
            name: lambda: clients.run("bench/Burn-process", settings.seconds),
        }
        got = alternate(cases, settings.runs)
        tree = _descendants(server.process.pid)
        result = compare(got, name, base)
        result.notes |= {
            "worker processes": len(tree),
            "workers' RSS MiB": round(sum(_rss_mib(p) for p in tree)),
        }
    finally:
        clients.close()
    return [result]


if __name__ == "__main__":
    main()
