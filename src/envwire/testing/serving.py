"""Run a real ``envwire serve`` process for tests, on free ports, and stop it cleanly."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from envwire.ports import FRONT_ENDS

__all__ = ["CONFORMANCE_ENVS", "ServerProcess", "wait_until"]

#: The envs the conformance kit needs beside the env under test.
CONFORMANCE_ENVS = (
    "CartPole-v1",
    "envwire/Catch-v0",
    "test/Dict-v0=envwire.testing.envs:DictEnv",
    "test/Tuple-v0=envwire.testing.envs:TupleEnv",
    "test/Crash-v0=envwire.testing.envs:CrashEnv@process",
    "test/Hang-v0=envwire.testing.envs:HangEnv@process",
    "test/HangInline-v0=envwire.testing.envs:HangEnv@inline",
    "test/Raise-v0=envwire.testing.envs:RaiseEnv",
)

_LINE = re.compile(r"^envwire: (?P<name>\S+) listening on (?P<host>\S+):(?P<port>\d+)( \(TLS\))?$")


class ServerProcess:
    """``envwire serve ARGS`` in a subprocess; ``ports[name]`` once every front end listens.

    Args:
        envs: env arguments for ``envwire serve``.
        args: extra command-line arguments (front ends default to port 0 = any free port).
        front_ends: the front ends to run (on free ports, unless ``args`` sets their port) and
            wait for; every other front end is turned off.
        start_timeout: seconds to wait for every "listening on" line.
        workers: server processes (``--workers``, unless ``args`` sets it); one by default,
            whatever the server's own default.
    """

    def __init__(
        self,
        envs: Sequence[str] = CONFORMANCE_ENVS,
        args: Sequence[str] = (),
        *,
        front_ends: Sequence[str] = ("gym-socket",),
        start_timeout: float = 60.0,
        cwd: str | Path | None = None,
        workers: int = 1,
    ) -> None:
        self.command = [sys.executable, "-m", "envwire", "serve", *envs, *args]
        if "--workers" not in args:
            self.command += ["--workers", str(workers)]
        self.env_ids = [env.partition("=")[0].partition("@")[0] for env in envs]
        for row in FRONT_ENDS:  # the asked-for front ends on free ports, the others off
            if row.flag not in args:
                self.command += [row.flag, "0" if row.name in front_ends else "off"]
        self.front_ends = tuple(front_ends)
        self.start_timeout = start_timeout
        self.cwd = cwd
        self.ports: dict[str, int] = {}
        self.host = "127.0.0.1"
        self.process: subprocess.Popen[str] | None = None
        self.output: list[str] = []

    def start(self) -> ServerProcess:
        """Start the server and wait until every front end listens.

        Raises:
            RuntimeError: the server exited or did not listen in time (with its output).
        """
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            self.command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=self.cwd,
        )
        ready = threading.Event()
        threading.Thread(target=self._read, args=(ready,), daemon=True).start()
        if not ready.wait(self.start_timeout):
            self.stop()
            raise RuntimeError("envwire serve did not start:\n" + "".join(self.output))
        if self.process.poll() is not None:
            raise RuntimeError("envwire serve exited:\n" + "".join(self.output))
        return self

    def _read(self, ready: threading.Event) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)
            match = _LINE.match(line.strip())
            if match:
                self.host = match["host"]
                self.ports[match["name"]] = int(match["port"])
            if all(name in self.ports for name in self.front_ends):
                ready.set()
        ready.set()  # EOF: the process ended

    def url(self, scheme: str, env_id: str, front_end: str | None = None) -> str:
        """``scheme://host:port/env_id`` for the front end (default: the scheme's name)."""
        return f"{scheme}://{self.host}:{self.ports[front_end or scheme]}/{env_id}"

    def children(self) -> list[int]:
        """The process ids of the server's child processes (its workers, with ``workers``
        above 1; Linux only)."""
        if self.process is None:
            return []
        pid = self.process.pid
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as listing:
                return [int(word) for word in listing.read().split()]
        except OSError:
            return []

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_for(
        self, predicate: Callable[[], object], timeout: float = 10.0, interval: float = 0.05
    ) -> bool:
        """Poll ``predicate()`` until true or ``timeout``; returns its last value."""
        return wait_until(predicate, timeout, interval)


def wait_until(predicate: Callable[[], object], timeout: float = 10.0, every: float = 0.02) -> bool:
    """Poll ``predicate()`` every ``every`` seconds until it is true or ``timeout`` seconds have
    passed (for what a server does in its own time); returns its last value, as a bool."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every)
    return bool(predicate())
