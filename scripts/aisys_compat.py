#!/usr/bin/env python3
"""Run the AISysProj server's own test suite against a live envwire server.

    python scripts/aisys_compat.py PATH/TO/aisysprojserver [--python PY] [--envwire CMD...]

PATH is a checkout of the AISysProj server (its repository: ``aisysprojserver/``,
``aisysprojserver_clienttools/``, ``aisysprojserver_test/``, ``example_envs/``). Nothing is
installed: ``--python`` (default: this interpreter) must already import that server's
dependencies (Flask, SQLAlchemy, pydantic, ...), since its test files import them; the envwire
server runs with ``--envwire`` (default: ``<this interpreter> -m envwire``).

For each of the suite's modules ``test_act``, ``test_clients`` and ``test_user_management``,
the script starts a fresh ``envwire serve`` (its own arena database, the suite's admin password
stored as an admin token, plugin uploads on) and runs the module with ``unittest``. The only
change to the suite is the transport: its tests talk to the server through a Flask test client,
which the shim replaces with one that sends the same requests over HTTP to envwire. Everything
else (the admin client, the course clients, their requests and checks) is the suite's own.

It prints each module's tests, failures and errors, and ends with ``N passed, N failed``; the
exit status is 0 when every test passed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODULES = ("test_act", "test_clients", "test_user_management")
ADMIN_PASSWORD = "test-admin-password"  # the suite's own admin password (its TestConfig)
LISTENING = re.compile(r"envwire: http listening on ([\w.:\[\]-]+):(\d+)")

# The shim: run in the suite's interpreter; it replaces Flask's test client, then runs one
# module of the suite with unittest and prints its counts on the last line.
SHIM = r'''
import json as _json
import sys
import unittest

import flask
import requests

BASE = sys.argv[1].rstrip("/")
MODULE = sys.argv[2]


class HttpResponse:
    """What the suite reads of a Flask test response, from an HTTP response."""

    def __init__(self, response):
        self._response = response
        self.status_code = response.status_code
        self.headers = response.headers
        self.data = response.content
        self.text = response.text

    def get_json(self):
        try:
            return _json.loads(self.data)
        except ValueError:
            return None

    @property
    def json(self):  # Flask's test response: .json is get_json()
        return self.get_json()

    def raise_for_status(self):
        self._response.raise_for_status()


class HttpTestClient:
    """Flask's test client interface, over HTTP to a live server."""

    def open(self, path, method="GET", json=None, data=None, headers=None, **kwargs):
        url = BASE + "/" + str(path).lstrip("/")
        return HttpResponse(requests.request(method, url, json=json, data=data, headers=headers,
                                             timeout=60))


flask.Flask.test_client = lambda self, *args, **kwargs: HttpTestClient()
suite = unittest.defaultTestLoader.loadTestsFromName(f"aisysprojserver_test.{MODULE}")
result = unittest.TextTestRunner(verbosity=2).run(suite)
print(f"RESULT {result.testsRun} {len(result.failures)} {len(result.errors)}")
'''


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


def run_module(
    checkout: Path, module: str, python: str, envwire: list[str], work: Path
) -> tuple[int, int, int]:
    """(tests, failures, errors) of one module of the suite against a fresh envwire."""
    db, plugins, log = (
        work / f"{module}.sqlite3",
        work / f"{module}-plugins",
        work / f"{module}.log",
    )
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
        shim = work / "shim.py"
        shim.write_text(SHIM)
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        done = subprocess.run(
            [python, str(shim), url, module],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        sys.stdout.write(done.stderr[-4000:])
        found = re.search(r"RESULT (\d+) (\d+) (\d+)", done.stdout)
        if not found:
            print(done.stdout[-2000:])
            return 1, 0, 1
        return int(found[1]), int(found[2]), int(found[3])
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()


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
    parser.add_argument("--modules", nargs="+", default=list(MODULES), choices=MODULES)
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    if not (checkout / "aisysprojserver_test").is_dir():
        raise SystemExit(f"{checkout} is not a checkout of the AISysProj server")
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="aisys-compat-") as tmp:
        for module in args.modules:
            tests, failures, errors = run_module(
                checkout, module, args.python, args.envwire, Path(tmp)
            )
            bad = failures + errors
            print(f"{module}: {tests} tests, {failures} failures, {errors} errors")
            passed += tests - bad
            failed += bad
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
