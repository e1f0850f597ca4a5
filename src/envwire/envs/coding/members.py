"""Which processes belong to a run, and how to end them all.

A bubblewrap run's processes are those of its PID namespace, learned from bubblewrap's status
pipe (``--json-status-fd``): killing the namespace's init makes the kernel kill everything in
it, and the server then checks that nothing of it is left. A run without namespaces (the unsafe
fallback) is its user id when it has one of its own; otherwise it is a single process, since
its seccomp filter refuses new ones.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections.abc import Callable

from envwire.envs.coding import watch

__all__ = ["Members", "NamespaceMembers", "UserMembers"]


class Members:
    """Which processes belong to a run, and how to end them all."""

    def started(self, pid: int) -> None:
        """The run's first process started as ``pid``."""

    def attach(self, watchdog: watch.Watchdog) -> None:
        """Give the watchdog the membership predicate (now or once known)."""

    def kill(self, pid: int) -> None:
        """Kill every process of the run started as ``pid``."""

    def close(self) -> None:
        """The run is over: make sure nothing of it is left."""


class NamespaceMembers(Members):
    """Members of a bubblewrap run: its PID namespace, learned from bwrap's status pipe."""

    def __init__(self, status_fd: int) -> None:
        self.status_fd = status_fd
        self.inode: int | None = None
        self.init_pid: int | None = None
        self._known = threading.Event()
        self._watchdog: watch.Watchdog | None = None

    def started(self, pid: int) -> None:
        threading.Thread(target=self._read_status, name="envwire-sandbox-ns", daemon=True).start()

    def _read_status(self) -> None:
        buffer = b""
        with contextlib.suppress(OSError):
            while b"\n" not in buffer:
                chunk = os.read(self.status_fd, 4096)
                if not chunk:
                    break
                buffer += chunk
        with contextlib.suppress(ValueError, KeyError):
            status = json.loads(buffer.split(b"\n", 1)[0])
            self.init_pid, self.inode = int(status["child-pid"]), int(status["pid-namespace"])
            if self._watchdog is not None:
                self._watchdog.member = watch.pid_namespace(self.inode)
        self._known.set()

    def attach(self, watchdog: watch.Watchdog) -> None:
        self._watchdog = watchdog
        if self.inode is not None:
            watchdog.member = watch.pid_namespace(self.inode)

    def kill(self, pid: int) -> None:
        # The namespace's init first: when it dies, the kernel kills everything inside.
        if self.init_pid is not None:
            watch.kill([self.init_pid])
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)

    def close(self) -> None:
        self._known.wait(timeout=5)
        if self.inode is not None:
            watch.wait_gone(watch.pid_namespace(self.inode))


class UserMembers(Members):
    """Members of an unsafe run: its user id when it has one; else its process group (it
    cannot make other processes then: the seccomp filter refuses them)."""

    def __init__(self, uid: int | None) -> None:
        self.uid = uid

    def _member(self, pid: int) -> Callable[[str], bool]:
        uid = self.uid

        def member(proc: str) -> bool:
            try:
                if uid is not None:
                    return os.stat(proc).st_uid == uid
                return int(proc.rsplit("/", 1)[1]) == pid
            except (OSError, ValueError):
                return False

        return member

    def started(self, pid: int) -> None:
        self.pid = pid

    def attach(self, watchdog: watch.Watchdog) -> None:
        watchdog.member = self._member(self.pid)

    def kill(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        if self.uid is not None:
            watch.kill(list(watch.processes(self._member(pid))))

    def close(self) -> None:
        if self.uid is not None:
            watch.wait_gone(self._member(self.pid))
