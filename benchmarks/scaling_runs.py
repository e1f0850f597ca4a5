"""What ``bench_scaling.py`` runs: the servers, the harness, and the smoke run's own client.

A :class:`Server` is a command, a folder and an environment; :func:`running` starts one in its
own process group, waits until it serves and stops the whole group afterwards (uvicorn's
workers included). :func:`run_harness` runs OpenEnv's scaling harness once against a server and
reads back the summary and the per-session errors it wrote; :func:`run_smoke` runs the same
session flow with a small asyncio client of its own. Both give a :class:`Cell`.
"""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import websockets

__all__ = [
    "BENCHMARK_APP",
    "Cell",
    "Server",
    "check_harness",
    "envwire_server",
    "error_text",
    "free_port",
    "log_issues",
    "percentile",
    "raise_open_files",
    "run_harness",
    "run_smoke",
    "running",
    "uvicorn_server",
    "wait_for_quiet",
]

#: What the harness's app reads for its concurrency limit; openenv-core's default is 100.
CONCURRENCY = {"MAX_CONCURRENT_ENVS": "20000"}
#: The harness's env, as uvicorn and envwire are told to load it (from the checkout's folder).
BENCHMARK_APP = "benchmark.server.app:app"
#: Log lines worth reporting; uvicorn logs a worker its supervisor killed ("Child process
#: [pid] died", when it did not answer a health check in time) at INFO.
_LOG_MARKS = ("ERROR", "WARNING", "CRITICAL", " died")
_ADDRESS = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}:\d+\b")
_PID = re.compile(r"\[\d+\]")


@dataclass
class Cell:
    """One server at one N: the harness's figures (seconds) and what went wrong."""

    server: str
    n: int
    successful: int
    wall: float
    connect_p99: float
    reset_p99: float
    step_p99: float
    total_p99: float
    load: tuple[float, float]
    #: Failed sessions per error, as the client recorded them ("type: message").
    errors: dict[str, int] = field(default_factory=dict)
    #: Error and warning lines of the server's own log, with their counts.
    server_log: dict[str, int] = field(default_factory=dict)
    #: The harness's whole summary row, P50 and P95 included.
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def success(self) -> float:
        """Successful sessions over sessions started."""
        return self.successful / self.n

    @property
    def rps(self) -> float:
        """Successful sessions per second of wall time."""
        return self.successful / self.wall if self.wall > 0 else 0.0


@dataclass(frozen=True)
class Server:
    """How to start one server: its command, its folder, its environment, its readiness."""

    label: str
    port: int
    command: tuple[str, ...]
    cwd: Path
    env: dict[str, str]
    #: Log lines saying "Application startup complete" to wait for (uvicorn logs one per
    #: worker, and /health answers as soon as the first is up); 0: /health alone.
    workers: int = 0


def raise_open_files() -> int:
    """Raise this process's soft limit on open files to the hard limit; children inherit it.

    Returns:
        The soft limit now in force.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile, interpolated between the two nearest ranks (0.0 if empty):
    the definition the harness uses, so smoke figures read like the harness's."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (rank - low) * (ordered[high] - ordered[low])


def free_port() -> int:
    """A TCP port free on loopback now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _environment(pythonpath: str | None) -> dict[str, str]:
    # The caller's PYTHONPATH may point at another envwire: each process gets only its own.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | CONCURRENCY
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return env


def uvicorn_server(checkout: Path, port: int) -> Server:
    """openenv-core's app on uvicorn with two workers, as the harness's authors run it."""
    command = (sys.executable, "-m", "uvicorn", BENCHMARK_APP, "--workers", "2")
    return Server(
        "uvicorn --workers 2",
        port,
        (*command, "--port", str(port)),
        checkout,
        _environment(None),
        workers=2,
    )


def envwire_server(
    label: str, src: Path, app: str, app_dir: Path, port: int, *, extra: Sequence[str] = ()
) -> Server:
    """envwire from the source tree ``src``, default settings (``extra``: more ``serve``
    options, e.g. to test a cause), HTTP front end only."""
    command: tuple[str, ...] = (sys.executable, "-m", "envwire", "serve")
    command += (f"bench/Benchmark-v0={app}",)
    options = ("--app-dir", str(app_dir), "--http", str(port), "--gym-socket", "off")
    command += (*options, "--grpc", "off", *extra)
    return Server(label, port, command, app_dir, _environment(str(src)))


def log_issues(log: Path, limit: int = 5) -> dict[str, int]:
    """The server log's error and warning lines (and uvicorn's dead workers) and the
    exceptions its tracebacks end in, counted, the ``limit`` most frequent.

    Client addresses and process ids are masked, so that one cause logged many times counts
    once.
    """
    counts: Counter[str] = Counter()
    in_traceback = False
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("Traceback (most recent call last)"):
            in_traceback = True
        elif in_traceback and line and not line.startswith(" "):
            # The first unindented line after a traceback names its exception.
            in_traceback = False
            counts[_mask(line)] += 1
        elif any(mark in line for mark in _LOG_MARKS):
            counts[_mask(line)] += 1
    return dict(counts.most_common(limit))


def _mask(line: str) -> str:
    return _PID.sub("[<pid>]", _ADDRESS.sub("<address>", line.strip()))[:160]


@contextmanager
def running(server: Server, log: Path, timeout: float = 300) -> Iterator[str]:
    """Start ``server`` (its own process group), wait until it serves, yield its base URL;
    stop the whole group on exit.

    Raises:
        RuntimeError: the server exited or was not ready within ``timeout`` seconds (its log
            is at ``log``).
    """
    base = f"http://127.0.0.1:{server.port}"
    with log.open("wb") as out:
        process = subprocess.Popen(
            server.command,
            cwd=server.cwd,
            env=server.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # uvicorn's workers are children: stop them with it
        )
    try:
        _wait_ready(server, process, base, log, timeout)
        yield base
    finally:
        _stop(process)


def _wait_ready(
    server: Server, process: subprocess.Popen[bytes], base: str, log: Path, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{server.label} exited with {process.returncode}; see {log}")
        try:
            healthy = httpx.get(f"{base}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            healthy = False
        started = log.read_text(errors="replace").count("Application startup complete")
        if healthy and started >= server.workers:
            return
        time.sleep(0.3)
    raise RuntimeError(f"{server.label} was not ready within {timeout:.0f} s; see {log}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    # Nothing is measured while a server stops: a slow graceful stop is not waited for long.
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def wait_for_quiet(max_load: float, patience: float) -> float:
    """Wait up to ``patience`` seconds for the one-minute load average to fall below
    ``max_load``; the load average then (reached or not)."""
    deadline = time.monotonic() + patience
    while (load := os.getloadavg()[0]) >= max_load and time.monotonic() < deadline:
        time.sleep(5)
    return load


# --- the harness -----------------------------------------------------------------------------


def check_harness(checkout: Path) -> None:
    """Raise ``SystemExit`` unless ``checkout`` holds the harness and its benchmark app."""
    for part in ("tests/test_scaling.py", "benchmark/server/app.py"):
        if not (checkout / part).is_file():
            raise SystemExit(
                f"--harness {checkout}: expected a checkout of burtenshaw/openenv-scaling "
                f"holding {part}, found none"
            )


def run_harness(checkout: Path, server: str, base: str, n: int, *, wait: float, out: Path) -> Cell:
    """One harness run (WebSocket mode, its defaults) of ``n`` sessions against ``base``.

    Raises:
        RuntimeError: the harness wrote no summary (its output is in ``out/harness.log``).
    """
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "tests/test_scaling.py", "--url", base, "-n", str(n)]
    command += ["--wait", str(wait), "--output-dir", str(out)]
    load_before = os.getloadavg()[0]
    with (out / "harness.log").open("wb") as log:
        # Its own limit is 120 s a phase: a session cannot take much more than 6 minutes.
        subprocess.run(
            command,
            cwd=checkout,
            env=_environment(None),
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=900,
            check=False,
        )
    load_after = os.getloadavg()[0]
    summary_csv = out / "summary.csv"
    if not summary_csv.is_file():
        raise RuntimeError(f"the harness wrote no summary; see {out / 'harness.log'}")
    with summary_csv.open() as f:
        summary: dict[str, Any] = list(csv.DictReader(f))[-1]
    errors: Counter[str] = Counter()
    with (out / "raw.jsonl").open() as f:
        for line in f:
            row = json.loads(line)
            if not row["success"]:
                errors[error_text(row["error_type"], row["error_message"])] += 1
    return Cell(
        server=server,
        n=n,
        successful=int(summary["successful"]),
        wall=float(summary["total_wall_time"]),
        connect_p99=float(summary["connect_p99"]),
        reset_p99=float(summary["reset_p99"]),
        step_p99=float(summary["step_p99"]),
        total_p99=float(summary["total_p99"]),
        load=(load_before, load_after),
        errors=dict(errors.most_common()),
        summary=summary,
    )


def error_text(kind: str | None, message: str | None) -> str:
    text = f"{kind}: {message}" if message else str(kind)
    return text if len(text) <= 160 else text[:157] + "..."


# --- the smoke run's own client ---------------------------------------------------------------


async def _smoke_session(url: str, wait: float) -> tuple[float, float, float, float]:
    """One session as the harness runs it: connect, reset, one step, close; each phase's
    seconds and the total. Raises on any error reply or a step that did not sleep."""
    start = time.perf_counter()
    async with websockets.connect(url, open_timeout=60) as ws:
        connected = time.perf_counter()
        await ws.send(json.dumps({"type": "reset", "data": {}}))
        reply = json.loads(await asyncio.wait_for(ws.recv(), 60))
        if reply.get("type") == "error":
            raise RuntimeError(f"expected a reset reply, got {reply}")
        reset = time.perf_counter()
        await ws.send(json.dumps({"type": "step", "data": {"wait_seconds": wait}}))
        reply = json.loads(await asyncio.wait_for(ws.recv(), 60))
        waited = reply.get("data", {}).get("observation", {}).get("waited_seconds")
        if waited != wait:
            raise RuntimeError(f"expected a step of {wait} s, got {reply}")
        stepped = time.perf_counter()
        await ws.send(json.dumps({"type": "close"}))
    end = time.perf_counter()
    return connected - start, reset - connected, stepped - reset, end - start


async def _smoke(url: str, n: int, wait: float) -> tuple[list[Any], float]:
    start = time.perf_counter()
    sessions = [_smoke_session(url, wait) for _ in range(n)]
    results = await asyncio.gather(*sessions, return_exceptions=True)
    return list(results), time.perf_counter() - start


def run_smoke(server: str, base: str, n: int, wait: float) -> Cell:
    """``n`` concurrent sessions of this script's own client against ``base``."""
    load_before = os.getloadavg()[0]
    url = base.replace("http://", "ws://") + "/ws"
    results, wall = asyncio.run(_smoke(url, n, wait))
    done = [r for r in results if isinstance(r, tuple)]
    errors = Counter(
        error_text(type(r).__name__, str(r)) for r in results if isinstance(r, BaseException)
    )
    phases = [[r[i] for r in done] for i in range(4)]
    return Cell(
        server=server,
        n=n,
        successful=len(done),
        wall=wall,
        connect_p99=percentile(phases[0], 99),
        reset_p99=percentile(phases[1], 99),
        step_p99=percentile(phases[2], 99),
        total_p99=percentile(phases[3], 99),
        load=(load_before, os.getloadavg()[0]),
        errors=dict(errors.most_common()),
    )
