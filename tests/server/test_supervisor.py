"""The supervisor of ``envwire serve --workers N`` with workers that cannot start: each is a real
process that crashes at start (as a broken install crashes at import) while a file exists; the
supervisor restarts it with growing delays, then gives up and stops the server with status 1.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from envwire.server.supervisor import Supervisor, bind_ports
from envwire.testing import wait_until

pytestmark = pytest.mark.process

# A worker: crashes at start while the file named by its argument exists (the broken install);
# else says it listens and serves until SIGTERM.
WORKER = """
import json, os, signal, sys, time
role = json.loads(os.environ["ENVWIRE_WORKER"])
if os.path.exists(sys.argv[1]):
    sys.exit(3)
os.write(role["ready_fd"], b"1")
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    time.sleep(1)
"""


def _supervisor(tmp_path: Path, **bounds: Any) -> Supervisor:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    rundir = tmp_path / "run"
    rundir.mkdir(mode=0o700)
    sockets = bind_ports("127.0.0.1", {"gym-socket": 0})
    command = [sys.executable, str(script), str(tmp_path / "broken")]
    return Supervisor(command, 2, sockets, (), str(rundir), grace=10, **bounds)


def _serve(supervisor: Supervisor) -> tuple[threading.Thread, list[int]]:
    status: list[int] = []
    thread = threading.Thread(target=lambda: status.append(supervisor.serve(poll=0.02)))
    thread.start()
    return thread, status


def test_a_worker_that_can_never_start_again_stops_the_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    supervisor = _supervisor(tmp_path, restart_delay=0.1, max_failed_starts=4)
    supervisor.start(timeout=60)
    first = supervisor.children[1]
    assert first is not None
    with caplog.at_level(logging.WARNING, logger="envwire.workers"):
        thread, status = _serve(supervisor)
        try:
            (tmp_path / "broken").touch()  # from now on, every start crashes
            first.process.kill()
            thread.join(60)  # restarted forever, it would never return
            assert not thread.is_alive()
        finally:
            supervisor.request_stop()
            thread.join(30)
    assert status == [1]
    assert supervisor.failure == (
        "worker 1 could not start 4 times in a row (the last exited with status 3); "
        "stopping the server"
    )
    lines = [r.getMessage() for r in caplog.records]
    starts = [r.created for r in caplog.records if "worker 1 replaced by" in r.getMessage()]
    assert len(starts) == 4  # the first replacement and three more, then no more
    # the delays double: 0.1 s, 0.2 s, 0.4 s after the failed starts
    assert starts[3] - starts[2] >= 0.4 and starts[2] - starts[1] >= 0.2
    assert sum("before it listened (3 failed starts in a row)" in line for line in lines) == 1
    assert supervisor.pids() == []  # worker 0 was stopped with the server
    assert first.process.returncode is not None


def test_failed_starts_are_counted_in_a_row_only(tmp_path: Path) -> None:
    """A replacement that listens clears the count: a worker that crashes now and then, with
    good starts in between, is replaced every time."""
    supervisor = _supervisor(tmp_path, restart_delay=0.05, max_failed_starts=2)
    supervisor.start(timeout=60)
    thread, status = _serve(supervisor)
    try:
        for _ in range(3):
            (tmp_path / "broken").touch()  # one failed start ...
            child = supervisor.children[1]
            assert child is not None
            child.process.kill()
            assert wait_until(lambda: supervisor._failed_starts[1] == 1, 30)
            (tmp_path / "broken").unlink()  # ... then a good one
            assert wait_until(lambda: supervisor._failed_starts[1] == 0, 30)
            assert wait_until(lambda: len(supervisor.pids()) == 2, 30)
        assert thread.is_alive() and not supervisor.failure
    finally:
        supervisor.request_stop()
        thread.join(30)
    assert status == [0]


def test_a_replacement_that_never_listens_is_killed_and_counted(tmp_path: Path) -> None:
    supervisor = _supervisor(tmp_path, restart_delay=0.05, max_failed_starts=2, ready_timeout=0.5)
    supervisor.start(timeout=60)
    # from now on the workers start but never say they listen (hung at start)
    (tmp_path / "worker.py").write_text("import time\ntime.sleep(600)\n")
    started = time.monotonic()
    thread, status = _serve(supervisor)
    try:
        child = supervisor.children[0]
        assert child is not None
        child.process.kill()
        thread.join(60)
        assert not thread.is_alive()
    finally:
        supervisor.request_stop()
        thread.join(30)
    assert status == [1] and "worker 0 could not start 2 times" in supervisor.failure
    assert "killed by SIGKILL" in supervisor.failure
    assert time.monotonic() - started >= 1.0  # each hung start had its 0.5 s
