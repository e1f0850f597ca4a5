"""The code sandbox's behaviour and limits: each limit has a default and a test that hits it."""

from __future__ import annotations

import dataclasses
import fcntl
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator

import pytest

from envwire.envs.coding import sandbox as sandbox_module
from envwire.envs.coding.pool import SlotPool
from envwire.envs.coding.sandbox import Sandbox, SandboxLimits
from envwire.errors import CapacityError, ConfigError
from tests.envs.coding.conftest import needs_boundary

pytestmark = needs_boundary

LIMITS = SandboxLimits(
    wall_time=3.0,
    memory=256 << 20,
    processes=16,
    file_size=4 << 20,
    disk=8 << 20,
    open_files=32,
    output=4096,
    output_total=1 << 20,
)


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    box = Sandbox(LIMITS)
    if box.enforcement["boundary"] != "bubblewrap":
        pytest.fail(f"this host cannot build the sandbox: {box.enforcement['missing']}")
    return box


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def test_a_normal_run(sandbox: Sandbox) -> None:
    result = sandbox.run(
        "import sys, os\nprint('hi')\nprint('warn', file=sys.stderr)\nprint(os.getcwd())"
    )
    assert result.exit_code == 0 and result.ok
    assert result.stdout == "hi\n/sandbox\n" and result.stderr == "warn\n"
    assert not result.timed_out and not result.truncated


def test_the_standard_library_works(sandbox: Sandbox) -> None:
    code = (
        "import json, sqlite3, hashlib, tempfile, multiprocessing, decimal\n"
        "db = sqlite3.connect(':memory:'); db.execute('create table t (x)')\n"
        "with tempfile.NamedTemporaryFile('w', delete=False) as f: f.write('x')\n"
        "with multiprocessing.Pool(2) as pool: print(pool.map(abs, [-1, -2]))\n"
        "print(json.dumps({'tmp': os.path.dirname(f.name)}) if False else 'ok')"
    )
    result = sandbox.run("import os\n" + code)
    assert result.stdout == "[1, 2]\nok\n", result.stderr


def test_exit_codes_and_exceptions(sandbox: Sandbox) -> None:
    assert sandbox.run("raise SystemExit(3)").exit_code == 3
    failed = sandbox.run("raise ValueError('boom')")
    assert failed.exit_code == 1
    assert failed.stderr.startswith("Traceback") and "ValueError: boom" in failed.stderr
    assert 'File "main.py", line 1, in <module>' in failed.stderr


def test_each_run_starts_empty(sandbox: Sandbox) -> None:
    sandbox.run("open('left.txt', 'w').write('from the first run')")
    assert sandbox.run("import os; print(sorted(os.listdir('.')))").stdout == "['main.py']\n"


def test_wall_time(sandbox: Sandbox) -> None:
    result = sandbox.run("while True:\n    pass")
    assert result.timed_out and result.exit_code == 137
    assert last_line(result.stderr) == (
        "[envwire sandbox: the program was killed because it ran past the wall-time limit of 3 s]"
    )


def test_memory_of_one_process(sandbox: Sandbox) -> None:
    result = sandbox.run("chunks = []\nwhile True:\n    chunks.append(bytearray(10 ** 7))")
    assert result.exit_code == 1 and last_line(result.stderr) == "MemoryError"


def test_memory_across_processes(sandbox: Sandbox) -> None:
    """The review's 4 children holding 1.2 GiB: the run's processes share one budget."""
    code = (
        "import os, time\n"
        "for _ in range(4):\n"
        "    if os.fork() == 0:\n"
        "        block = bytearray(120 << 20)\n"
        "        for i in range(0, len(block), 4096): block[i] = 1\n"
        "        time.sleep(10); os._exit(0)\n"
        "time.sleep(10)\n"
    )
    result = sandbox.run(code, SandboxLimits(wall_time=8.0, memory=256 << 20))
    assert result.exit_code == 137 and not result.timed_out
    assert "of memory in all, more than the limit of 256 MiB]" in result.stderr


def test_processes(sandbox: Sandbox) -> None:
    code = (
        "import os, time\npids = []\n"
        "try:\n"
        "    while True:\n"
        "        pid = os.fork()\n"
        "        if pid == 0:\n"
        "            time.sleep(5); os._exit(0)\n"
        "        pids.append(pid)\n"
        "except OSError as exc:\n"
        "    print(len(pids), exc)\n"
    )
    result = sandbox.run(code)
    count, message = result.stdout.split(" ", 1)
    # 16 tasks in the run's user namespace: bubblewrap's init, this process, 14 children.
    assert int(count) == 14 and message == "[Errno 11] Resource temporarily unavailable\n"


def test_disk(sandbox: Sandbox) -> None:
    code = (
        "for i in range(20):\n"
        "    with open(f'f{i}', 'wb') as f:\n"
        "        f.write(b'x' * (1 << 20))\n"
    )
    result = sandbox.run(code)
    assert last_line(result.stderr) == "OSError: [Errno 28] No space left on device"


def test_file_size(sandbox: Sandbox) -> None:
    result = sandbox.run("open('big', 'wb').write(b'x' * (5 << 20))")
    assert last_line(result.stderr) == "OSError: [Errno 27] File too large"


def test_open_files(sandbox: Sandbox) -> None:
    result = sandbox.run("files = [open('main.py') for _ in range(100)]")
    assert last_line(result.stderr).startswith("OSError: [Errno 24] Too many open files")


def test_output(sandbox: Sandbox) -> None:
    result = sandbox.run("while True:\n    print('x' * 1000)")
    assert result.truncated and len(result.stdout) == 4096
    assert "output beyond 4096 bytes" in result.stderr
    assert "more than 1048576 bytes of output" in result.stderr
    assert not result.timed_out  # stopped for its output, not by the clock


def wait_until_held(path: str, timeout: float = 30.0) -> None:
    """Return once another holder has ``path`` flocked (the pool's sign of a busy slot)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path):
            fd = os.open(path, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            finally:
                os.close(fd)  # also drops the lock if this probe got it
        time.sleep(0.01)
    raise AssertionError(f"nobody took {path} within {timeout} s")


def test_concurrency_bound(tmp_path: os.PathLike[str]) -> None:
    """Two runs with one slot: the second waits, then gives up with CapacityError."""
    box = Sandbox(LIMITS, runs=1, queue_timeout=0.5)
    box._pool = SlotPool(1, directory=str(tmp_path))  # a pool of its own: no other test waits
    # Probed first: the probe's trial run takes a slot too, and must not be taken for the run's.
    assert box.enforcement["boundary"] == "bubblewrap"
    started = threading.Event()
    results = []

    def first() -> None:
        started.set()
        # Wall time well above the sleep: a loaded host may take seconds to start bubblewrap.
        slow = dataclasses.replace(LIMITS, wall_time=30.0)
        results.append(box.run("import time; time.sleep(2.0); print('first')", slow))

    thread = threading.Thread(target=first)
    thread.start()
    started.wait()
    wait_until_held(os.path.join(tmp_path, "slot-0.lock"))
    with pytest.raises(CapacityError, match=r"all 1 run slots stayed busy for 0\.5 s"):
        box.run("print('second')")
    thread.join()
    assert results[0].stdout == "first\n"
    assert box.run("print('third')").stdout == "third\n"  # the slot is free again


def test_enforcement_is_reported(sandbox: Sandbox) -> None:
    layers = sandbox.enforcement
    assert layers["boundary"] == "bubblewrap" and layers["missing"] is None
    assert set(layers["namespaces"]) == {"user", "pid", "ipc", "uts", "cgroup", "net", "mount"}
    assert layers["seccomp"] is True and layers["audit_hook"] is True
    assert layers["process_limit"] == "rlimit-userns" and layers["disk"] == "tmpfs"
    assert layers["separate_user"] is (os.geteuid() == 0)
    assert sandbox.run("print(1)").enforcement == layers


def test_refuses_without_the_boundary() -> None:
    box = Sandbox(LIMITS, bwrap="/nonexistent/bwrap", unsafe=False)
    message = "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    assert box.enforcement["missing"] == message and box.enforcement["boundary"] == "none"
    with pytest.raises(ConfigError, match=r"refusing to run untrusted code: bubblewrap \(bwrap\)"):
        box.run("print(1)")
    with pytest.raises(ConfigError, match="--unsafe-sandbox"):
        box.check()


@pytest.fixture
def reachable_root() -> Iterator[str]:
    """A directory for run directories that every user can pass through, as the default (the
    system's temporary directory) is: as root, runs may take user ids of their own."""
    root = tempfile.mkdtemp(prefix="envwire-test-root-")
    os.chmod(root, 0o711)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_unsafe_fallback_keeps_the_other_layers(reachable_root: str) -> None:
    """Without bubblewrap, an operator who allows it gets rlimits, seccomp, Landlock, the hook."""
    box = Sandbox(LIMITS, bwrap="/nonexistent/bwrap", unsafe=True, root=reachable_root)
    layers = box.enforcement
    assert layers["boundary"] == "none" and layers["unsafe"] is True
    assert box.run("print('hi')").stdout == "hi\n"
    signal = box.run("import os\nos.kill(os.getppid(), 0)")
    assert last_line(signal.stderr) == (
        "PermissionError: sandbox: signalling other processes is disabled"
    )
    outside = sandbox_module.Sandbox(
        LIMITS, bwrap="/nonexistent/bwrap", unsafe=True, root=reachable_root, audit_hook=False
    )
    target = os.path.join(reachable_root, "outside.txt")
    result = outside.run(f"open({target!r}, 'w')")
    if layers["landlock"]:
        assert last_line(result.stderr).startswith("PermissionError: [Errno 13]")
    else:
        assert last_line(result.stderr).startswith("PermissionError")  # the other user id
    assert not os.path.exists(target)
    execs = outside.run("import os\nos.execv('/bin/true', ['true'])")
    assert last_line(execs.stderr) == "PermissionError: [Errno 1] Operation not permitted"
    if not layers["separate_user"]:  # then no new processes at all: seccomp refuses them
        forks = outside.run("import os\nos.fork()")
        assert last_line(forks.stderr) == "PermissionError: [Errno 1] Operation not permitted"


def test_runs_as_other_users_refuse_a_root_they_cannot_reach(
    tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs that take user ids of their own (as root, with an interpreter every user can
    read) are refused a root those users cannot pass through, with what to do about it."""
    if os.geteuid() != 0:
        pytest.skip("runs take user ids of their own only when the server runs as root")
    monkeypatch.setattr(sandbox_module, "_PROBES", {})  # a probe of its own, not the cache's
    monkeypatch.setattr(sandbox_module, "public", lambda path: True)
    private = os.path.join(str(tmp_path), "private")
    os.mkdir(private, 0o700)
    box = Sandbox(LIMITS, bwrap="/nonexistent/bwrap", unsafe=True, root=private)
    assert box.enforcement["separate_user"] is True
    with pytest.raises(ConfigError, match=r"cannot reach their directory root .*private.*o\+x"):
        box.run("print('hi')")
    assert os.listdir(private) == []  # no run directory was made


def test_configure_sets_the_server_wide_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ENVWIRE_SANDBOX_UNSAFE", "ENVWIRE_SANDBOX_RUNS"):
        monkeypatch.setenv(name, "0")  # restored (removed) after the test
        monkeypatch.delenv(name)
    assert Sandbox().unsafe is False and Sandbox().runs == 8
    sandbox_module.configure(unsafe=True, runs=3)
    assert Sandbox().unsafe is True and Sandbox().runs == 3
    with pytest.raises(ConfigError, match="at least 1"):
        sandbox_module.configure(runs=0)


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError, match="positive"):
        SandboxLimits(wall_time=0)
    with pytest.raises(ValueError, match="positive"):
        SandboxLimits(disk=0)
