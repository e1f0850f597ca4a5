"""The host-wide run slots and the view a run gets of the host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envwire.envs.coding import pool as pool_module
from envwire.envs.coding.pool import SlotPool
from envwire.envs.coding.sandbox import Sandbox
from envwire.envs.coding.view import public, read_interp, runtime_view
from envwire.errors import CapacityError, ConfigError


def test_slots_are_distinct_and_freed(tmp_path: Path) -> None:
    slots = SlotPool(2, directory=str(tmp_path))
    with slots.slot(1.0) as first, slots.slot(1.0) as second:
        assert {first, second} == {0, 1}
        with pytest.raises(CapacityError, match="all 2 run slots stayed busy"), slots.slot(0.1):
            pass
    with slots.slot(0.1) as again:
        assert again == 0


def test_slots_are_shared_with_other_processes(tmp_path: Path) -> None:
    """Another process holding slot 0 (as another server's worker would) keeps it from us."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, os, sys, time\n"
            f"fd = os.open({str(tmp_path / 'slot-0.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(30)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with SlotPool(2, directory=str(tmp_path)).slot(1.0) as index:
            assert index == 1
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    with SlotPool(1, directory=str(tmp_path)).slot(5.0) as index:  # freed by its death
        assert index == 0


def test_the_lock_directory_must_be_private(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pool_module.tempfile, "gettempdir", lambda: str(tmp_path))
    shared = tmp_path / f"envwire-sandbox-{os.geteuid()}"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(ConfigError, match=r"must be a directory of user \d+ with mode 0700"):
        SlotPool(1)
    shared.chmod(0o700)
    assert SlotPool(1).directory == str(shared)
    with pytest.raises(ValueError, match="at least one run slot"):
        SlotPool(0)


def test_the_view_holds_the_runtime_and_no_site_packages() -> None:
    python = Sandbox().python
    view = runtime_view(python)
    assert any(python.startswith(path) for path in view.binds)
    assert not any("site-packages" in path for path in view.binds)
    # The interpreter's own packages are either outside every bind (Debian's dist-packages)
    # or under one and hidden (a site-packages beside the standard library)
    asked = "import json, sysconfig; p = sysconfig.get_paths(); print(json.dumps(p))"
    done = subprocess.run([python, "-I", "-S", "-c", asked], capture_output=True, check=True)
    paths = json.loads(done.stdout)
    for packages in {os.path.realpath(paths["purelib"]), os.path.realpath(paths["platlib"])}:
        inside = any(packages.startswith(path + "/") for path in view.binds)
        assert not inside or packages in view.hidden, (packages, view)
    interp = read_interp(os.path.realpath(python))
    assert interp is not None and interp.startswith("/")


def test_public_paths() -> None:
    assert public("/usr/bin/env") if os.path.exists("/usr/bin/env") else True
    assert not public("/nonexistent/path")
    assert read_interp("/nonexistent/path") is None
