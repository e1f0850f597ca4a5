"""Fixtures of the coding tests: the hostile programs' targets, and a real server."""

from __future__ import annotations

import os
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from envwire.envs.coding import Sandbox
from envwire.testing import ServerProcess
from tests.conftest import SANDBOX_MISSING

ROOT = Path(__file__).resolve().parents[3]

#: The sandbox's tests need its boundary (CI installs bubblewrap).
needs_boundary = pytest.mark.skipif(
    SANDBOX_MISSING is not None,
    reason=f"this host cannot build the code sandbox: {SANDBOX_MISSING}",
)
ATTACK_ENV = "test/AttackCoding-v0"
SECRET_VAR = "ENVWIRE_TEST_SECRET"


@pytest.fixture(scope="session")
def secret() -> str:
    """A value only the server's environment holds."""
    return uuid.uuid4().hex


@pytest.fixture(scope="session")
def server(secret: str) -> Iterator[ServerProcess]:
    """``envwire serve`` with the attack env on the OpenEnv front end, ``secret`` in its
    environment."""
    before = os.environ.get(SECRET_VAR)
    os.environ[SECRET_VAR] = secret
    proc = ServerProcess(
        [f"{ATTACK_ENV}=tests.envs.coding.helpers:attack_coding@inline"],
        ("--step-timeout", "30"),
        front_ends=("http",),
        cwd=ROOT,
    )
    try:
        with proc:
            yield proc
    finally:
        if before is None:
            os.environ.pop(SECRET_VAR, None)
        else:
            os.environ[SECRET_VAR] = before


@pytest.fixture(scope="session")
def facts(server: ServerProcess, secret: str) -> Iterator[dict[str, str]]:
    """What the attack programs aim at: the server's pid and port, a listening Unix socket
    and abstract socket of the host, the project's source, the interpreter's path."""
    assert server.process is not None
    with tempfile.TemporaryDirectory() as directory:
        unix = socket.socket(socket.AF_UNIX)
        unix.bind(os.path.join(directory, "host.sock"))
        unix.listen()
        abstract_name = f"envwire-test-{uuid.uuid4().hex}"
        abstract = socket.socket(socket.AF_UNIX)
        abstract.bind("\0" + abstract_name)
        abstract.listen()
        landlock = Sandbox().enforcement["landlock"]
        try:
            yield {
                "server_pid": str(server.process.pid),
                "port": str(server.ports["http"]),
                "project": str(ROOT / "src" / "envwire" / "__init__.py"),
                "unix": os.path.join(directory, "host.sock"),
                "abstract": abstract_name,
                "python": Sandbox().python,
                "secret": secret,
                "tcp_refused": "PermissionError: [Errno 13] Permission denied"
                if landlock >= 4
                else "ConnectionRefusedError: [Errno 111] Connection refused",
            }
        finally:
            unix.close()
            abstract.close()
