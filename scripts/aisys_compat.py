#!/usr/bin/env python3
"""Check envwire against the AISysProj server: its test suite, its clients, its database.

    python scripts/aisys_compat.py PATH/TO/aisysprojserver [--python PY] [--envwire CMD...]
        [--checks CHECK...] [--runs N]

PATH is a checkout of the AISysProj server (its repository: ``aisysprojserver/``,
``aisysprojserver_clienttools/``, ``aisysprojserver_test/``, ``example_envs/``). Nothing is
installed: ``--python`` (default: this interpreter) must already import that server's
dependencies (Flask, SQLAlchemy, pydantic, ...); the envwire server runs with ``--envwire``
(default: ``<this interpreter> -m envwire``). The helpers in ``scripts/aisys/`` run in ``PY``.

- ``test_act``, ``test_clients``, ``test_user_management``: that module of the suite, with
  ``unittest``, against a fresh ``envwire serve`` (its own arena database, the suite's admin
  password stored as an admin token, plugin uploads on). The only change to the suite is the
  transport: its tests talk to the server through a Flask test client, which
  ``aisys/suite.py`` replaces with one that sends the same requests over HTTP to envwire.
  Everything else (the admin client, the course clients, their requests and checks) is the
  suite's own.
- ``clients`` (``aisys/clients.py``) replaces nothing: the organizer's ``AdminClient`` uploads
  the server's example plugin (``simple_nim``) and makes an env of it, its admin CLI
  (``python -m aisysprojserver_clienttools new-user``) makes one agent per client, and each
  course client plays with its default settings over HTTP until ``--runs`` runs (default 100)
  have finished: ``client_simple_v0.run``, ``client_simple_v1.run``, ``client.run`` (also with
  ``parallel_runs=False`` and ``processes=2``) and ``Agent.run`` (also with
  ``multiprocessing=True``). A client passes when it logged no warning or error, no finished
  run was reported to it twice, and ``/results`` counts exactly the runs reported finished to
  it (v0 reports none: a run it was asked about that gets no request any more has finished).
- ``migration`` (``aisys/migration.py``) runs the original server on a fresh folder, plays a
  small course on it with the course client, and saves its ``/results/test-nim`` and its
  leaderboard page; then ``envwire arena migrate`` reads its database, ``envwire serve`` serves
  the result with the plugins folder, and three things are compared: ``/results/test-nim``
  equal to the original's; the fully evaluated agents in the same order on both leaderboard
  pages; an agent with its old config file (its ``url`` changed) plays on against envwire with
  the course client, and its total runs grow by exactly the runs reported finished.

It prints each check's tests, failures and errors, and ends with ``N passed, N failed``; the
exit status is 0 when every test passed.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

MODULES = ("test_act", "test_clients", "test_user_management")
CHECKS = (*MODULES, "clients", "migration")
HELPERS = Path(__file__).resolve().parent / "aisys"
ADMIN_PASSWORD = "test-admin-password"  # the suite's own admin password (its TestConfig)
LISTENING = re.compile(r"envwire: http listening on ([\w.:\[\]-]+):(\d+)")
FLASK_LISTENING = re.compile(r"Running on http://127\.0\.0\.1:(\d+)")
Counts = tuple[int, int, int]  # tests, failures, errors


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def _start(
    envwire: list[str], db: Path, plugins: Path, log: Path
) -> tuple[subprocess.Popen[bytes], str]:
    command = [
        *envwire,
        "serve",
        "envwire/Nim-v0",
        "--http",
        "0",
        "--host",
        "127.0.0.1",
        "--gym-socket",
        "off",
        "--grpc",
        "off",
        "--arena-db",
        str(db),
        "--arena-sync",
        "normal",
        "--arena-plugins",
        str(plugins),
        "--arena-plugin-upload",
    ]
    out = log.open("wb")
    proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = LISTENING.search(log.read_text(errors="replace"))
        if found:
            return proc, f"http://{found[1]}:{found[2]}/"
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"envwire did not start; its output:\n{log.read_text(errors='replace')}")


class Helpers:
    """Runs the helpers of ``scripts/aisys/`` in the suite's interpreter, in its checkout."""

    def __init__(self, checkout: Path, python: str) -> None:
        self.checkout, self.python = checkout, python
        self.env = {**os.environ, "PYTHONPATH": str(checkout)}

    def run(self, helper: str, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self.python, str(HELPERS / helper), *args],
            cwd=self.checkout,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        sys.stdout.write(done.stderr[-4000:] if done.returncode or helper == "suite.py" else "")
        sys.stdout.write("".join(re.findall(r"(?:CLIENT|CONTINUE) .*\n", done.stdout)))
        return done

    def start(self, helper: str, log: Path, *args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [self.python, str(HELPERS / helper), *args],
            cwd=self.checkout,
            env=self.env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )


def run_check(helpers: Helpers, check: str, *, envwire: list[str], work: Path, runs: int) -> Counts:
    """One module of the suite, or the clients' runs, against a fresh envwire."""
    db, plugins, log = (work / f"{check}.sqlite3", work / f"{check}-plugins", work / f"{check}.log")
    token = subprocess.run(
        [*envwire, "arena", "admin-token", "--db", str(db), "--from-stdin"],
        input=ADMIN_PASSWORD.encode(),
        capture_output=True,
        check=False,
    )
    if token.returncode:
        raise SystemExit(f"could not store the admin password: {token.stderr.decode()}")
    server, url = _start(envwire, db, plugins, log)
    try:
        if check == "clients":
            done = helpers.run("clients.py", url, ADMIN_PASSWORD, str(runs))
        else:
            done = helpers.run("suite.py", url, check)
    finally:
        _stop(server)
    found = re.search(r"RESULT (\d+) (\d+) (\d+)", done.stdout)
    if not found:
        print(done.stdout[-2000:])
        return 1, 0, 1
    return int(found[1]), int(found[2]), int(found[3])


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return str(response.read().decode())


def _ranked(page: str, results: dict[str, dict[str, object]]) -> list[str]:
    """The fully evaluated agents in the order a leaderboard page lists them."""
    names = [html.unescape(urllib.parse.unquote(n)) for n in AGENT_LINK.findall(page)]
    evaluated = {name for name, row in results.items() if row["fully-evaluated"]}
    return [name for name in dict.fromkeys(names) if name in evaluated]


AGENT_LINK = re.compile(r'href="[^"]*/agent/test-nim/([^"/?#]+)/?"')


def check_migration(helpers: Helpers, *, envwire: list[str], work: Path) -> Counts:
    """A course played on the original server, migrated, then served and played on by envwire."""
    there = work / "original"
    there.mkdir()
    log = work / "original.log"
    original = helpers.start("migration.py", log, "serve", str(there), "0")
    try:
        deadline = time.monotonic() + 60
        # it logs to its own log file, in its folder
        server_log = there / "aisysprojserver.log"
        while not (found := FLASK_LISTENING.search(_read(log) + _read(server_log))):
            if original.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the original server did not start:\n{_read(log)}")
            time.sleep(0.2)
        url = f"http://127.0.0.1:{found[1]}/"
        played = helpers.run("migration.py", "play", url, str(there))
    finally:
        _stop(original)
    if played.returncode:
        return 1, 0, 1
    db = work / "migrated.sqlite3"
    migrate = [*envwire, "arena", "migrate", str(there / "aisysprojserver.db"), "--db", str(db)]
    migrated = subprocess.run(migrate, capture_output=True, text=True, check=False)
    print(migrated.stdout[-2000:], migrated.stderr[-2000:], sep="")
    if migrated.returncode:
        return 1, 0, 1
    server, url = _start(envwire, db, there / "plugins", work / "migrated.log")
    try:
        before = json.loads((there / "results.json").read_text())
        after = json.loads(_get(url + "results/test-nim"))
        same_results = after == before
        print(f"results {'equal' if same_results else 'DIFFER'}: {before} / {after}")
        ranks = (
            _ranked((there / "leaderboard.html").read_text(), before),
            _ranked(_get(url + "env/test-nim"), after),
        )
        print(f"fully evaluated agents, ranked: {ranks[0]} there, {ranks[1]} here")
        config = there / "configs" / "agent4.json"  # 3 runs: plays on to fully evaluated
        went_on = helpers.run("migration.py", "continue", url, str(config), "10")
    finally:
        _stop(server)
    failed = [
        not same_results,
        ranks[0] != ranks[1] or not ranks[0],
        "CONTINUE ok" not in went_on.stdout,
    ]
    return 3, sum(failed), 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="a checkout of the AISysProj server")
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter that runs the suite (has its dependencies)",
    )
    parser.add_argument(
        "--envwire",
        nargs="+",
        default=[sys.executable, "-m", "envwire"],
        help="the envwire command",
    )
    parser.add_argument("--checks", nargs="+", default=list(CHECKS), choices=CHECKS)
    parser.add_argument(
        "--runs", type=int, default=100, help="runs each course client plays (clients check)"
    )
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    if not (checkout / "aisysprojserver_test").is_dir():
        raise SystemExit(f"{checkout} is not a checkout of the AISysProj server")
    helpers = Helpers(checkout, args.python)
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="aisys-compat-") as tmp:
        for check in args.checks:
            work = Path(tmp, check)
            work.mkdir()
            if check == "migration":
                counts = check_migration(helpers, envwire=args.envwire, work=work)
            else:
                counts = run_check(helpers, check, envwire=args.envwire, work=work, runs=args.runs)
            tests, failures, errors = counts
            print(f"{check}: {tests} tests, {failures} failures, {errors} errors", flush=True)
            passed += tests - failures - errors
            failed += failures + errors
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
