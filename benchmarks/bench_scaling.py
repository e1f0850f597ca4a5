"""OpenEnv's own scaling harness against openenv-core on uvicorn and against envwire, side by side.

OpenEnv's authors measure how many concurrent sessions a server holds with the harness of
their ``openenv-scaling`` repository: its ``tests/test_scaling.py`` opens N WebSocket sessions
at once against its ``benchmark`` env (an openenv-core app whose step sleeps ``wait_seconds``),
each one connect, reset, one step, close, and reports the success rate, P50/P95/P99 of each
phase and the wall time. This script runs that harness, unmodified, from a checkout given at
run time (``--harness DIR``; it is not part of this repository), against:

- openenv-core served as its authors run it: ``uvicorn benchmark.server.app:app --workers 2``;
- envwire with its default settings, reading the same app module: ``envwire serve
  bench/Benchmark-v0=benchmark.server.app:app --app-dir DIR --http P --gym-socket off
  --grpc off`` (the root path serves the first env, so the harness's ``<url>/ws`` reaches it),
  once for each envwire source tree given with ``--envwire LABEL=SRC`` (default: the envwire
  this script imports), so that two branches can be compared in one run;

both with ``MAX_CONCURRENT_ENVS=20000`` (the app reads it), for N in a grid, step wait 1.0 s,
the harness's defaults otherwise. Each (server, N) cell gets a freshly started server, and the
servers take turns in a rotating order, so that no server always runs first after a pause.
Before each cell the script waits (up to ``--load-wait`` seconds) for the one-minute load
average to fall below ``--max-load``: on a shared machine a neighbour's work shows up as
latency. The soft limit on open files is raised to the hard limit for every process started
(the harness's client holds N sockets at once).

It prints, per server and N, the success rate, the P99 of each phase and of the whole session,
sessions per second (successful sessions over the wall time, the harness's "RPS"), the load
average before and after, envwire's total P99 over uvicorn's, each server's largest N with at
least 95% success (the rule of the harness's own analysis script), and what failed, grouped by
the error the harness recorded for each failed session.

``--quick`` without ``--harness`` is a smoke run of the same flow against envwire alone, with a
small asyncio client of this script's own and a sleeping app of its own (``scaling_app.py``):
it shows the script works (CI runs it), not how servers scale, and says so.

Run: ``python benchmarks/bench_scaling.py --harness PATH [--grid 512,1024] [--envwire
LABEL=SRC ...] [--out DIR] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict
from functools import partial
from pathlib import Path

import envwire
from harness import machine
from scaling_runs import (
    BENCHMARK_APP,
    Cell,
    Server,
    check_harness,
    envwire_server,
    error_text,
    free_port,
    log_issues,
    raise_open_files,
    run_harness,
    run_smoke,
    running,
    uvicorn_server,
    wait_for_quiet,
)

__all__ = ["main", "max_batch", "report"]

GRID = (512, 1024, 2048, 4096, 8192)
QUICK_GRID = (16, 64)
SMOKE_GRID = (8, 32)
WAIT = 1.0
SMOKE_WAIT = 0.2
#: The harness's analysis counts a batch size as held at this success rate.
THRESHOLD = 0.95
HERE = Path(__file__).resolve().parent
UVICORN = "uvicorn --workers 2"
#: A server description, given the port it is to listen on.
Factory = Callable[[int], Server]


def max_batch(cells: Sequence[Cell], server: str) -> int | None:
    """The largest N at which ``server`` reached :data:`THRESHOLD` success, None if none did.

    As the harness's analysis does, a failing N below a passing one does not disqualify it.
    """
    passed = [c.n for c in cells if c.server == server and c.success >= THRESHOLD]
    return max(passed, default=None)


# --- the report ------------------------------------------------------------------------------


def report(cells: Sequence[Cell], servers: Sequence[str], baseline: str | None) -> str:
    """The run as Markdown: the table (seconds; with a baseline, each server's total P99 over
    the baseline's at the same N), each server's largest N held, and what failed."""
    names = ["N", "server", "success", "connect P99", "reset P99", "step P99", "total P99"]
    names += [f"total P99 / {baseline}"] if baseline else []
    names += ["sessions/s", "wall", "load before, after"]
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    for n in sorted({c.n for c in cells}):
        row = {c.server: c for c in cells if c.n == n}
        for server in servers:
            if (c := row.get(server)) is None:
                continue
            phases = (c.connect_p99, c.reset_p99, c.step_p99, c.total_p99)
            values = [str(n), server, f"{100 * c.success:.1f}%"]
            values += [f"{p:.2f}" if c.successful else "-" for p in phases]
            if baseline:
                base = row.get(baseline)
                ratio = server != baseline and c.successful and base and base.successful
                values.append(f"{c.total_p99 / base.total_p99:.2f}" if ratio and base else "")
            values += [f"{c.rps:.0f}", f"{c.wall:.1f}", f"{c.load[0]:.2f}, {c.load[1]:.2f}"]
            lines.append("| " + " | ".join(values) + " |")
    lines += ["", f"Largest N with at least {THRESHOLD:.0%} success:"]
    for server in servers:
        held = max_batch(cells, server)
        lines.append(f"- {server}: {held if held is not None else 'none'}")
    failed = [c for c in cells if c.errors or c.server_log]
    if failed:
        lines += ["", "What failed (sessions per error, as the client saw it; the server's log):"]
    for c in failed:
        lines.append(f"- {c.server}, N={c.n}:")
        lines += [f"  - {count} x `{error}`" for error, count in c.errors.items()]
        lines += [f"  - server log, {count} x `{line}`" for line, count in c.server_log.items()]
    return "\n".join(lines)


def _builds(given: Sequence[str]) -> dict[str, Path]:
    """``--envwire LABEL=SRC`` options as label -> source tree; default: this envwire."""
    if not given:
        return {"envwire": Path(envwire.__file__).resolve().parents[1]}
    builds: dict[str, Path] = {}
    for option in given:
        label, sep, src = option.partition("=")
        path = Path(src).resolve()
        if not sep or not (path / "envwire" / "__init__.py").is_file():
            raise SystemExit(
                f"--envwire {option!r}: expected LABEL=SRC, SRC a folder holding envwire/"
            )
        builds[f"envwire ({label})"] = path
    return builds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--harness", type=Path, help="a checkout of burtenshaw/openenv-scaling")
    parser.add_argument("--grid", help=f"comma-separated N (default {GRID})")
    parser.add_argument("--wait", type=float, default=None, help=f"step wait (default {WAIT})")
    parser.add_argument(
        "--envwire",
        action="append",
        default=[],
        metavar="LABEL=SRC",
        help="an envwire source tree to measure (repeatable; default: the imported one)",
    )
    parser.add_argument(
        "--envwire-option",
        action="append",
        default=[],
        metavar="OPTION",
        help="one more `envwire serve` option for every envwire build, e.g. "
        "--envwire-option=--handshake-timeout=120 (repeatable; default: none, its defaults)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small grid; without --harness, "
        "a smoke run against envwire alone with this script's own client",
    )
    parser.add_argument("--max-load", type=float, default=1.5, help="wait for a load below this")
    parser.add_argument("--load-wait", type=float, default=600, help="seconds to wait for it")
    parser.add_argument("--out", type=Path, help="keep the harness's files and server logs here")
    parser.add_argument("--json", type=Path, help="write the cells here")
    args = parser.parse_args()
    smoke = args.harness is None
    if smoke and not args.quick:
        parser.error("--harness DIR is needed (or --quick for a smoke run without it)")
    # A plain SIGTERM would skip the cleanup that stops the servers and the harness.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    limit = raise_open_files()
    builds = _builds(args.envwire)
    wait = args.wait if args.wait is not None else (SMOKE_WAIT if smoke else WAIT)
    default = SMOKE_GRID if smoke else QUICK_GRID if args.quick else GRID
    grid = [int(n) for n in args.grid.split(",")] if args.grid else list(default)

    factories = _servers(args.harness, builds, args.envwire_option)
    servers = list(factories)
    print(f"open files limit {limit}; N {grid}; step wait {wait} s; servers {servers}")

    cells: list[Cell] = []
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch)
        for i, n in enumerate(grid):
            for server in servers[i % len(servers) :] + servers[: i % len(servers)]:
                if (
                    not args.quick
                    and wait_for_quiet(args.max_load, args.load_wait) >= args.max_load
                ):
                    print(f"load still at or above {args.max_load} after {args.load_wait:.0f} s")
                cell = _measure(
                    server, factories[server], n, wait=wait, out=out, harness=args.harness
                )
                cells.append(cell)
                print(
                    f"{server:<22} N={n:<6} success {100 * cell.success:5.1f}%  total P99 "
                    f"{cell.total_p99:6.2f} s  {cell.rps:6.0f} sessions/s  load "
                    f"{cell.load[0]:.2f} -> {cell.load[1]:.2f}",
                    flush=True,
                )
    baseline = None if smoke else UVICORN
    print()
    print(report(cells, servers, baseline))
    m = machine()
    print(f"\nmachine: {m['cpus']} cores, {m['processor']}, Python {m['python']}")
    if args.json:
        data = {
            "machine": m,
            "open_files": limit,
            "wait": wait,
            "cells": [asdict(c) for c in cells],
        }
        args.json.write_text(json.dumps(data, indent=1))
    if smoke and any(c.successful < c.n for c in cells):
        raise SystemExit("smoke run: some sessions failed (above)")


def _servers(
    harness: Path | None, builds: dict[str, Path], extra: Sequence[str]
) -> dict[str, Factory]:
    """The servers of the run, by label: uvicorn and each envwire build (with the ``extra``
    options) on the harness's app, or (no harness: the smoke run) each envwire build on the
    smoke app alone."""
    factories: dict[str, Factory] = {}
    if extra:  # the table says which cells ran with options other than the defaults
        builds = {f"{label} {' '.join(extra)}": src for label, src in builds.items()}
    if harness is None:
        print("SMOKE RUN: envwire alone, this script's own client and sleeping app; not the")
        print("OpenEnv harness and no baseline: it shows the script works, not how servers scale.")
        for label, src in builds.items():
            app = "scaling_app:app"
            factories[label] = partial(envwire_server, label, src, app, HERE, extra=extra)
        return factories
    checkout = harness.resolve()
    check_harness(checkout)
    factories[UVICORN] = partial(uvicorn_server, checkout)
    for label, src in builds.items():
        factories[label] = partial(envwire_server, label, src, BENCHMARK_APP, checkout, extra=extra)
    return factories


def _measure(
    server: str, factory: Factory, n: int, *, wait: float, out: Path, harness: Path | None
) -> Cell:
    """One cell on a freshly started server; a server that fails to start or a harness
    that fails to report counts as N failed sessions, with the reason."""
    folder = out / f"{server.replace(' ', '_').replace('(', '').replace(')', '')}-{n}"
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "server.log"
    load = os.getloadavg()[0]
    try:
        with running(factory(free_port()), log) as base:
            if harness is None:
                cell = run_smoke(server, base, n, wait)
            else:
                cell = run_harness(harness.resolve(), server, base, n, wait=wait, out=folder)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        cell = Cell(server, n, 0, 0.0, 0.0, 0.0, 0.0, 0.0, (load, os.getloadavg()[0]))
        cell.errors = {error_text(type(exc).__name__, str(exc)): n}
    cell.server_log = log_issues(log) if log.is_file() else {}
    return cell


if __name__ == "__main__":
    main()
