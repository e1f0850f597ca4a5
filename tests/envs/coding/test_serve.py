"""The sandbox's server-wide settings through ``envwire serve``: flags, config, ``/health``."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from envwire.envs.coding.pool import DEFAULT_UID_BASE
from envwire.testing import ServerProcess
from tests.envs.coding.conftest import ATTACK_ENV, ROOT, needs_boundary

pytestmark = needs_boundary

ENTRY = f"{ATTACK_ENV}=tests.envs.coding.helpers:attack_coding@inline"


def wait_for_sandbox(base: str, timeout: float = 60.0) -> dict[str, Any]:
    """``/health`` once it reports the sandbox (probed in the background at start)."""
    deadline = time.monotonic() + timeout
    while True:
        health: dict[str, Any] = httpx.get(f"{base}/health", timeout=10).json()
        if "sandbox" in health or time.monotonic() > deadline:
            return health
        time.sleep(0.2)


def test_health_reports_the_enforcement_and_settings(tmp_path: Path) -> None:
    config = tmp_path / "server.toml"
    config.write_text("[server]\nsandbox_runs = 3\n")
    args = ("--unsafe-sandbox", "--config", str(config))
    with ServerProcess([ENTRY], args, front_ends=("http",), cwd=ROOT) as server:
        base = f"http://{server.host}:{server.ports['http']}"
        health = wait_for_sandbox(base)
        layers = health["sandbox"]
        assert health["status"] == "healthy"
        assert layers["unsafe"] is True and layers["runs"] == 3
        assert layers["boundary"] == "bubblewrap" and layers["missing"] is None
        assert set(layers["namespaces"]) == {"user", "pid", "ipc", "uts", "cgroup", "net", "mount"}


def test_the_config_file_allows_an_unsafe_sandbox(tmp_path: Path) -> None:
    config = tmp_path / "server.toml"
    config.write_text("[server]\nunsafe_sandbox = true\n")
    with ServerProcess([ENTRY], ("--config", str(config)), front_ends=("http",), cwd=ROOT) as srv:
        health = wait_for_sandbox(f"http://{srv.host}:{srv.ports['http']}")
        assert health["sandbox"]["unsafe"] is True and health["sandbox"]["runs"] == 8


def test_a_host_without_the_boundary_refuses_sessions(tmp_path: Path, monkeypatch: Any) -> None:
    """No bwrap on PATH and no --unsafe-sandbox: a coding session is refused, naming why."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with ServerProcess([ENTRY], front_ends=("http",), cwd=ROOT) as server:
        base = f"http://{server.host}:{server.ports['http']}"
        response = httpx.post(f"{base}/envs/{ATTACK_ENV}/reset", json={}, timeout=60)
        assert response.status_code == 500
        detail = response.json()["detail"]
        assert "refusing to run untrusted code: bubblewrap (bwrap) is not installed" in detail
        assert wait_for_sandbox(base)["sandbox"]["boundary"] == "none"
        echo = httpx.get(f"{base}/health", timeout=10)
        assert echo.json()["status"] == "healthy"  # the server itself goes on


def test_the_env_in_worker_processes_shares_the_server_wide_pool(tmp_path: Path) -> None:
    """``@process``: every session's env lives in a worker process; the slot pool (lock files)
    is the same for all of them, so concurrent runs still get distinct slots."""
    entry = ENTRY.replace("@inline", "@process")
    with ServerProcess([entry], front_ends=("http",), cwd=ROOT) as server:
        url = f"http://{server.host}:{server.ports['http']}/envs/{ATTACK_ENV}"
        results: list[str] = []

        def run() -> None:
            with httpx.Client(timeout=60) as http:
                session = http.post(f"{url}/reset", json={}).headers["envwire-session"]
                step = http.post(
                    f"{url}/step",
                    json={"action": {"code": "import time\ntime.sleep(2)\nprint('ran')"}},
                    headers={"envwire-session": session},
                )
                results.append(step.json()["observation"]["stdout"])

        threads = [threading.Thread(target=run) for _ in range(2)]
        for thread in threads:
            thread.start()
        # The most run uids seen at one moment. (Each worker's first run is preceded by the
        # sandbox's trial run, which takes a slot too: over time, up to four uids show.)
        most: set[int] = set()
        while len(most) < 2 and any(thread.is_alive() for thread in threads):
            now = {
                uid
                for uid in run_uids(server.process.pid)
                if DEFAULT_UID_BASE <= uid < DEFAULT_UID_BASE + 8
            }
            most = max(most, now, key=len)
            time.sleep(0.05)
        for thread in threads:
            thread.join()
        assert results == ["ran\n", "ran\n"]
        if os.geteuid() == 0:  # runs from two workers at once, each in a slot of its own
            assert len(most) >= 2, most


def run_uids(root: int) -> set[int]:
    """The uids of the processes under ``root`` (this test's server): runs of other tests, in
    other test processes at the same time, use the same uids."""
    parents: dict[int, int] = {}
    owners: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                parents[int(entry)] = int(stat.rpartition(")")[2].split()[1])
                owners[int(entry)] = os.stat(f"/proc/{entry}").st_uid
    uids = set()
    for pid, uid in owners.items():
        ancestor, seen = pid, 0
        while ancestor in parents and ancestor != root and seen < 64:
            ancestor, seen = parents[ancestor], seen + 1
        if ancestor == root:
            uids.add(uid)
    return uids
