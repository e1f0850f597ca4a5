"""The code sandbox against hostile code: each attack costs one run an error, nothing more."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

import pytest

from envwire.sandbox import Sandbox, SandboxLimits


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return Sandbox(
        SandboxLimits(wall_time=2.0, memory=256 << 20, output=4096, output_total=1 << 20)
    )


def leftovers(marker: str) -> list[int]:
    """Processes whose working directory is the run's directory ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/cwd").startswith(marker):
                    found.append(int(entry))
            except OSError:
                pass
    return found


def test_a_normal_run(sandbox: Sandbox) -> None:
    result = sandbox.run(
        "import sys, os\nprint('hi')\nprint('warn', file=sys.stderr)\nprint(os.getcwd())"
    )
    assert result.exit_code == 0 and result.ok
    lines = result.stdout.splitlines()
    assert lines[0] == "hi" and result.stderr == "warn\n"
    assert os.path.basename(lines[1]).startswith("envwire-sandbox-")
    assert not os.path.exists(lines[1])  # its own directory, removed afterwards
    other = sandbox.run("import os; print(os.getcwd())")
    assert other.stdout.strip() != lines[1]


def test_exit_codes_and_exceptions(sandbox: Sandbox) -> None:
    assert sandbox.run("raise SystemExit(3)").exit_code == 3
    failed = sandbox.run("raise ValueError('boom')")
    assert failed.exit_code == 1
    assert failed.stderr.startswith("Traceback") and "ValueError: boom" in failed.stderr
    assert 'File "main.py", line 1' in failed.stderr


def test_infinite_loop_hits_the_wall_time(sandbox: Sandbox) -> None:
    result = sandbox.run("while True:\n    pass")
    assert result.timed_out and result.exit_code == 137
    assert "wall-time limit of 2 s" in result.stderr


def test_memory_bomb_is_a_memory_error(sandbox: Sandbox) -> None:
    result = sandbox.run("chunks = []\nwhile True:\n    chunks.append(bytearray(10 ** 7))")
    assert result.exit_code == 1 and "MemoryError" in result.stderr
    assert not result.timed_out


def test_fork_bomb_costs_one_error(sandbox: Sandbox) -> None:
    code = (
        "import os\nprint(os.getcwd(), flush=True)\n"
        "while True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    result = sandbox.run(code)
    assert result.exit_code != 0
    marker = result.stdout.splitlines()[0]
    assert marker.startswith("/") and leftovers(marker) == []  # every process is gone
    assert sandbox.run("print('next')").stdout == "next\n"


def test_network_access_is_refused(sandbox: Sandbox) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        result = sandbox.run(
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1)"
        )
        assert result.exit_code == 1 and "network access is disabled" in result.stderr
        dns = sandbox.run("import socket\nsocket.getaddrinfo('example.com', 80)")
        assert dns.exit_code == 1 and "network access is disabled" in dns.stderr
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    finally:
        listener.close()


def test_writing_outside_its_directory_is_refused(sandbox: Sandbox, tmp_path: Path) -> None:
    outside = Path("/tmp") / f"envwire-test-{uuid.uuid4().hex}"
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    result = sandbox.run(f"open({str(outside)!r}, 'w').write('x')")
    assert result.exit_code == 1 and "no writing outside its directory" in result.stderr
    assert not outside.exists()
    removal = sandbox.run(f"import os\nos.remove({str(victim)!r})")
    assert removal.exit_code == 1 and victim.read_text() == "keep me"
    escape = sandbox.run("import os\nos.rename('main.py', '/tmp/escaped.py')")
    assert escape.exit_code == 1 and not Path("/tmp/escaped.py").exists()
    inside = sandbox.run("open('notes.txt', 'w').write('ok')\nprint(open('notes.txt').read())")
    assert inside.stdout == "ok\n"


def test_huge_output_is_capped(sandbox: Sandbox) -> None:
    result = sandbox.run("while True:\n    print('x' * 1000)")
    assert result.truncated and len(result.stdout) <= 4096
    assert "output beyond 4096 bytes" in result.stderr
    assert "more than 1048576 bytes of output" in result.stderr
    assert not result.timed_out  # stopped for its output, not by the clock


def test_starting_programs_and_ctypes_are_refused(sandbox: Sandbox) -> None:
    program = sandbox.run("import subprocess\nsubprocess.run(['true'])")
    assert program.exit_code == 1 and "starting programs is disabled" in program.stderr
    assert "importing ctypes is disabled" in sandbox.run("import ctypes").stderr
    assert "signalling other processes" in sandbox.run("import os\nos.kill(1, 9)").stderr


def test_enforcement_is_reported(sandbox: Sandbox) -> None:
    layers = sandbox.enforcement
    assert layers["wall_time"] and layers["memory"] and layers["output"]
    assert layers["process_limit"] in ("rlimit", "audit-hook")
    assert layers["network"] in ("namespace", "audit-hook")
    assert sandbox.run("print(1)").enforcement == layers


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="positive"):
        SandboxLimits(wall_time=0)
