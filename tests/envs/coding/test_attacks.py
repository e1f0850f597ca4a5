"""Hostile programs against the code sandbox: each fails exactly as expected, and the server
serves another session afterwards.

Every attack of :data:`tests.envs.coding.attacks.ATTACKS` runs twice: through a real
``envwire serve`` with openenv-core's own client (every layer, audit hook included), and in this
process with the audit hook turned off, to show that the OS layers hold on their own. The
resource attacks (fork bomb, memory, disk, descriptors, output, time) and the attacks between
concurrent sessions follow.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient

from envwire.envs.coding import Sandbox, SandboxLimits
from envwire.envs.coding.pool import SlotPool
from envwire.testing import ServerProcess
from tests.envs.coding.attacks import ATTACKS, Attack
from tests.envs.coding.conftest import ATTACK_ENV, needs_boundary

pytestmark = needs_boundary


def run_session(server: ServerProcess, code: str) -> dict[str, Any]:
    """One session of the attack env: reset, run ``code``, close; the observation."""
    url = f"http://{server.host}:{server.ports['http']}/envs/{ATTACK_ENV}"
    with GenericEnvClient(base_url=url).sync() as env:
        env.reset()
        result = env.step({"code": code})
        observation: dict[str, Any] = result.observation
        observation["reward"] = result.reward
        return observation


def assert_unharmed(server: ServerProcess) -> None:
    """The server runs and serves a new session's program."""
    assert server.process is not None and server.process.poll() is None
    after = run_session(server, "print('next session')")
    assert after["stdout"] == "next session\n" and after["exit_code"] == 0


@pytest.fixture(scope="module")
def bare() -> Sandbox:
    """A sandbox without the audit hook: only the OS layers stand."""
    return Sandbox(SandboxLimits(wall_time=5.0), audit_hook=False)


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack_through_the_server(
    attack: Attack, server: ServerProcess, facts: dict[str, str]
) -> None:
    expected = attack.expected(True, facts)
    assert expected is not None
    observation = run_session(server, attack.program(facts))
    assert attack.shown(expected, observation["stdout"], observation["stderr"]) == expected
    assert observation["exit_code"] == (0 if expected.endswith("\n") else 1)
    assert facts["secret"] not in observation["stdout"] + observation["stderr"]
    assert_unharmed(server)


BARE = [a for a in ATTACKS if a.bare is not None]


@pytest.mark.parametrize("attack", BARE, ids=[a.name for a in BARE])
def test_attack_on_the_os_layers_alone(
    attack: Attack, bare: Sandbox, server: ServerProcess, facts: dict[str, str]
) -> None:
    if attack.needs_landlock and not bare.enforcement["landlock"]:
        pytest.skip("this kernel has no Landlock")
    expected = attack.expected(False, facts)
    assert expected is not None
    result = bare.run(attack.program(facts))
    assert attack.shown(expected, result.stdout, result.stderr) == expected
    assert server.process is not None and server.process.poll() is None
    health = httpx.get(f"http://{server.host}:{server.ports['http']}/health", timeout=10)
    assert health.status_code == 200


# --- resources, through the server


@pytest.mark.parametrize(
    ("code", "last_line"),
    [
        pytest.param(
            "chunks = []\nwhile True:\n    chunks.append(bytearray(10 ** 7))",
            "MemoryError",
            id="memory bomb",
        ),
        pytest.param(
            "for i in range(20):\n    open(f'f{i}', 'wb').write(b'x' * (1 << 20))",
            "OSError: [Errno 28] No space left on device",
            id="disk fill",
        ),
        pytest.param(
            "for i in range(20):\n    open(f'/tmp/f{i}', 'wb').write(b'x' * (1 << 20))",
            "OSError: [Errno 28] No space left on device",
            id="disk fill through /tmp",
        ),
        pytest.param(
            "import socket\nsockets = [socket.socketpair() for _ in range(100)]",
            "OSError: [Errno 24] Too many open files",
            id="descriptor exhaustion",
        ),
        pytest.param(
            "while True:\n    pass",
            "[envwire sandbox: the program was killed because it ran past the wall-time limit"
            " of 5 s]",
            id="infinite loop",
        ),
        pytest.param(
            "while True:\n    print('x' * 4096)",
            "[envwire sandbox: the program was killed because it wrote more than 8388608 bytes"
            " of output]",
            id="huge output",
        ),
        pytest.param(
            "import os, time\nfor _ in range(4):\n    if os.fork() == 0:\n"
            "        block = bytearray(100 << 20)\n"
            "        for i in range(0, len(block), 4096): block[i] = 1\n"
            "        time.sleep(30)\ntime.sleep(30)",
            "limit of 256 MiB]",
            id="memory held by four children",
        ),
    ],
)
def test_resource_attack_through_the_server(
    code: str, last_line: str, server: ServerProcess
) -> None:
    observation = run_session(server, code)
    assert observation["stderr"].strip().splitlines()[-1].endswith(last_line)
    assert observation["reward"] == 0.0
    assert_unharmed(server)


# --- processes that try to stay


@pytest.fixture
def private(tmp_path: Path) -> Sandbox:
    """A sandbox with a pool and user ids of its own, so leftovers can be looked for by uid."""
    if os.geteuid() != 0:
        pytest.skip("leftovers are found by their user id, which needs a uid per run (root)")
    box = Sandbox(SandboxLimits(wall_time=3.0), uid_base=2_100_000_000, runs=2)
    box._pool = SlotPool(2, directory=str(tmp_path))
    return box


def leftovers(box: Sandbox) -> list[int]:
    """Processes of the sandbox's user ids still alive (zombies aside)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            info = os.stat(f"/proc/{entry}")
            with open(f"/proc/{entry}/stat", "rb") as file:
                state = file.read().rpartition(b")")[2].split()[0]
        except (OSError, IndexError, ValueError):
            continue
        if box.uid_base <= info.st_uid < box.uid_base + box.runs and state != b"Z":
            found.append(int(entry))
    return found


def test_double_fork_and_setsid_do_not_outlive_the_run(private: Sandbox) -> None:
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(60)\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\nprint('the grandchild is on its own')\n"
    )
    result = private.run(code)
    assert result.stdout == "the grandchild is on its own\n" and result.exit_code == 0
    assert leftovers(private) == []


def test_fork_bomb_leaves_nothing(private: Sandbox) -> None:
    code = (
        "import os\nroot = os.getpid()\n"
        "while True:\n"
        "    try:\n"
        "        os.fork()\n"
        "    except OSError as exc:\n"
        "        if os.getpid() == root:\n"
        "            print(exc, flush=True)\n"
        "            break\n"
    )
    result = private.run(code)
    assert result.stdout.splitlines()[0] == "[Errno 11] Resource temporarily unavailable"
    assert leftovers(private) == []
    assert private.run("print('next')").stdout == "next\n"


# --- between concurrent sessions (the review's critical finding)


def test_concurrent_sessions_cannot_touch_each_other(server: ServerProcess) -> None:
    """Session B looks for session A's files, rewrites "its" main.py, signals everything it
    sees; A's run is untouched and returns its own output."""
    token = uuid.uuid4().hex
    victim = (
        f"open('secret.txt', 'w').write('{token}')\n"
        "import time\ntime.sleep(3)\n"
        f"print(open('secret.txt').read() == '{token}', open('main.py').read().count('{token}'))"
    )
    attacker = (
        "import os, signal\n"
        "found = []\n"
        "for top, dirs, files in os.walk('/'):\n"
        "    dirs[:] = [d for d in dirs if os.path.join(top, d) not in ('/proc', '/sys')]\n"
        "    found += [os.path.join(top, f) for f in files if f in ('secret.txt',)]\n"
        "open('main.py', 'w').write('print(\"hijacked\")')\n"
        "for pid in [int(p) for p in os.listdir('/proc') if p.isdigit()]:\n"
        "    if pid != os.getpid():\n"
        "        try:\n"
        "            os.kill(pid, signal.SIGKILL)\n"
        "        except OSError as exc:\n"
        "            found.append(type(exc).__name__)\n"
        "print(found)\n"
    )
    results: dict[str, dict[str, Any]] = {}

    def run(name: str, code: str) -> None:
        results[name] = run_session(server, code)

    first = threading.Thread(target=run, args=("victim", victim))
    first.start()
    time.sleep(1.5)  # the victim's run is under way
    run("attacker", attacker)
    first.join()
    assert results["victim"]["stdout"] == f"True {victim.count(token)}\n"
    assert results["victim"]["reward"] == 1.0
    # No secret.txt anywhere in its view; its PID namespace holds only itself and bubblewrap's
    # init, which lives in a user namespace above the program's (signals to it are refused).
    assert results["attacker"]["stdout"] == "['PermissionError']\n"


def test_concurrent_runs_all_end_cleanly(server: ServerProcess) -> None:
    """The review's end-of-run sweep killed every concurrent run (exit 137): runs that end at
    different times now leave each other alone."""
    results: dict[int, dict[str, Any]] = {}

    def run(index: int) -> None:
        code = f"import time\ntime.sleep({0.3 * index})\nprint('run {index}')"
        results[index] = run_session(server, code)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for index, observation in results.items():
        assert observation["stdout"] == f"run {index}\n" and observation["exit_code"] == 0
    assert len(results) == 6


def test_concurrent_runs_have_distinct_user_ids(private: Sandbox) -> None:
    # A wall time far above the sleep, and the uids looked for until both runs are seen: on a
    # loaded host starting a sandbox can take seconds.
    limits = SandboxLimits(wall_time=30.0)
    threads = [
        threading.Thread(target=private.run, args=("import time\ntime.sleep(5)", limits))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    uids: set[int] = set()
    deadline = time.monotonic() + 5.0
    while len(uids) < 2 and time.monotonic() < deadline:
        for pid in leftovers(private):
            with contextlib.suppress(OSError):  # it may have ended meanwhile
                uids.add(os.stat(f"/proc/{pid}").st_uid)
        time.sleep(0.05)
    for thread in threads:
        thread.join()
    assert len(uids) == 2 and all(private.uid_base <= uid < private.uid_base + 2 for uid in uids)
