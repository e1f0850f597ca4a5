"""Watching one run from the server's side: its output, its memory across processes, its disk.

:class:`Capture` reads a pipe, keeping the first bytes and counting the rest against a total for
both streams (:class:`OutputBudget`). :class:`Watchdog` polls, every ``interval`` seconds, the
sum of the resident memory (anonymous and shared-memory pages) of every process of the run, and
optionally the size of its directory, and stops the run when either exceeds its limit. Which
processes belong to the run is a predicate on ``/proc/<pid>`` (its PID namespace, or its user id).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO

__all__ = [
    "Capture",
    "OutputBudget",
    "Watchdog",
    "kill",
    "pid_namespace",
    "processes",
    "resident_memory",
    "wait_gone",
]


class OutputBudget:
    """Bytes written by both streams; calls ``on_exceeded`` once when past ``limit``."""

    def __init__(self, limit: int, on_exceeded: Callable[[], None]) -> None:
        self.limit, self.on_exceeded = limit, on_exceeded
        self.value = 0
        self.exceeded = False
        self._lock = threading.Lock()

    def add(self, n: int) -> None:
        with self._lock:
            self.value += n
            fire = not self.exceeded and self.value > self.limit
            self.exceeded = self.exceeded or fire
        if fire:
            self.on_exceeded()


class Capture:
    """Reads one pipe in a thread, keeping the first ``keep`` bytes and counting the rest."""

    def __init__(self, pipe: IO[bytes], keep: int, total: OutputBudget) -> None:
        self.pipe, self.keep, self.total = pipe, keep, total
        self.data = bytearray()
        self.dropped = 0
        self.thread = threading.Thread(target=self._read, name="envwire-sandbox-pipe", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.pipe.fileno(), 65536)
            except (OSError, ValueError):
                return
            if not chunk:
                return
            room = max(self.keep - len(self.data), 0)
            self.data += chunk[:room]
            self.dropped += max(len(chunk) - room, 0)
            self.total.add(len(chunk))

    def finish(self, timeout: float) -> None:
        """Wait for the pipe's end (every writer gone), then close it."""
        self.thread.join(timeout)
        self.pipe.close()

    def text(self) -> str:
        return bytes(self.data).decode("utf-8", errors="replace")


def processes(member: Callable[[str], bool]) -> Iterator[int]:
    """The live pids in ``/proc`` for which ``member("/proc/<pid>")`` holds (zombies hold
    nothing and cannot be killed: they are left to whoever reaps them)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return
    for entry in entries:
        if entry.isdigit() and member(f"/proc/{entry}") and not _zombie(entry):
            yield int(entry)


def _zombie(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            return file.read().rpartition(b")")[2].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def pid_namespace(inode: int) -> Callable[[str], bool]:
    """A membership predicate: the process lives in the PID namespace ``inode``."""

    def member(proc: str) -> bool:
        try:
            return os.stat(f"{proc}/ns/pid").st_ino == inode
        except OSError:
            return False

    return member


def resident_memory(pid: int) -> int:
    """Bytes of anonymous and shared-memory pages resident for ``pid`` (0 if it is gone)."""
    total = 0
    try:
        with open(f"/proc/{pid}/status", "rb") as file:
            for line in file:
                if line.startswith((b"RssAnon:", b"RssShmem:")):
                    total += int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return 0
    return total


def _directory_size(path: str) -> int:
    total = 0
    stack = [path]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    with contextlib.suppress(OSError):
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        else:
                            total += entry.stat(follow_symlinks=False).st_blocks * 512
        except OSError:
            continue
    return total


def kill(pids: Iterator[int] | list[int]) -> int:
    """SIGKILL each pid; returns how many there were."""
    count = 0
    for pid in pids:
        count += 1
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return count


class Watchdog:
    """Polls a run's memory (and directory) and calls ``stop(reason)`` once past a limit.

    Args:
        member: which ``/proc/<pid>`` entries belong to the run (settable later, once known).
        memory: bytes of resident memory allowed across all of the run's processes.
        stop: called with a reason when a limit is exceeded.
        directory, disk: a host directory whose size is capped at ``disk`` bytes (the fallback
            without a tmpfs of fixed size), or None.
        interval: seconds between two polls.
    """

    def __init__(
        self,
        member: Callable[[str], bool] | None,
        memory: int,
        stop: Callable[[str], None],
        *,
        directory: str | None = None,
        disk: int = 0,
        interval: float = 0.05,
    ) -> None:
        self.member = member
        self.memory, self.stop = memory, stop
        self.directory, self.disk, self.interval = directory, disk, interval
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name="envwire-sandbox-watch", daemon=True
        )
        self._thread.start()

    def _loop(self) -> None:
        while not self._done.wait(self.interval):
            member = self.member
            if member is not None:
                used = sum(resident_memory(pid) for pid in processes(member))
                self.peak = max(self.peak, used)
                if used > self.memory:
                    self.stop(
                        f"its processes used {used >> 20} MiB of memory in all, more than the "
                        f"limit of {self.memory >> 20} MiB"
                    )
                    return
            if self.directory is not None and _directory_size(self.directory) > self.disk:
                self.stop(f"its directory grew past the disk limit of {self.disk >> 20} MiB")
                return

    def close(self) -> None:
        self._done.set()
        self._thread.join(timeout=5)


def wait_gone(member: Callable[[str], bool], timeout: float = 5.0) -> bool:
    """SIGKILL the run's processes until none is left; False if some outlived ``timeout``."""
    deadline = time.monotonic() + timeout
    while kill(list(processes(member))):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
