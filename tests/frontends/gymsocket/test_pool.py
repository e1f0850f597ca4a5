"""``@pool`` through a real ``envwire serve``: many gym-socket sessions share a few worker
processes, and a crash in one ends only the sessions that shared its process."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import envwire
from envwire.errors import EnvCrashedError
from envwire.testing import ServerProcess

ENVS = (
    "test/Tuple-v0=envwire.testing.envs:TupleEnv@pool",
    "test/Crash-v0=envwire.testing.envs:CrashEnv@pool",
)
ACTION = (1, np.array([1, 0], np.int8))


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess(ENVS, ("--pool-workers", "2")) as server:
        yield server


def pool_processes(server: ServerProcess) -> set[int]:
    """The server's pool worker processes: the children of its fork server (the server's
    only child process that has children of its own, in this test)."""
    assert server.process is not None
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(parent, []).append(int(entry))
    return {g for c in children.get(server.process.pid, []) for g in children.get(c, [])}


def test_many_sessions_share_two_worker_processes(server: ServerProcess) -> None:
    envs: list[Any] = [envwire.make(server.url("gym-socket", "test/Tuple-v0")) for _ in range(8)]
    try:
        for seed, env in enumerate(envs):
            _, info = env.reset(seed=seed)
            assert info == {"t": 0}
        for steps in range(1, 4):
            for env in envs:
                _, reward, _, _, info = env.step(ACTION)
                assert info == {"t": steps} and reward == pytest.approx(steps / 10)
        assert len(pool_processes(server)) == 2
    finally:
        for env in envs:
            env.close()


def test_a_crash_ends_only_the_sessions_of_its_process(server: ServerProcess) -> None:
    url = server.url("gym-socket", "test/Crash-v0")  # crashes on its third step
    crashing, *others = [envwire.make(url) for _ in range(4)]
    try:
        for env in (crashing, *others):
            env.reset(seed=0)
        crashing.step(ACTION)
        crashing.step(ACTION)
        with pytest.raises(EnvCrashedError, match="killed by SIGSEGV during step"):
            crashing.step(ACTION)
        errors: list[str] = []
        lost = []
        for env in others:  # two processes, four sessions: one other shared the crashed one
            try:
                env.step(ACTION)
            except EnvCrashedError as exc:
                errors.append(str(exc))
                lost.append(env)
        assert len(lost) == 1
        assert "hosting this env was killed by SIGSEGV while test/Crash-v0 ran step" in errors[0]
        for env in (crashing, *lost):  # Reset makes the env anew, on a fresh process
            env.reset(seed=1)
            env.step(ACTION)
        assert len(pool_processes(server)) == 2
    finally:
        for env in (crashing, *others):
            env.close()
