"""One pool of run slots for every sandbox of the host user: the concurrency bound and the uids.

A slot is a lock file, ``slot-<n>.lock``, held with ``flock`` for as long as a run lasts. The
kernel drops the lock when its holder dies, so a crashed server never leaks a slot, and every
process of one user (the server, its env worker processes, other servers) shares the same slots:
at most ``size`` runs at once, and slot ``n`` means user id ``uid_base + n`` (used when the
server runs as root), so no two concurrent runs anywhere on the host share a user id.

The directory is ``<tmp>/envwire-sandbox-<euid>``, made ``0700``; one that exists with another
owner, other permissions, or as a symlink is refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
import threading
import time
from collections.abc import Iterator

from envwire.errors import CapacityError, ConfigError

__all__ = ["DEFAULT_RUNS", "DEFAULT_UID_BASE", "SlotPool"]

#: Runs at once, server-wide (and host-user-wide), unless configured.
DEFAULT_RUNS = 8
#: First user id of the runs when the server runs as root (far above ordinary and subordinate
#: ranges); slot n runs as uid_base + n.
DEFAULT_UID_BASE = 2_000_000_000


def _lock_dir() -> str:
    path = os.path.join(tempfile.gettempdir(), f"envwire-sandbox-{os.geteuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise ConfigError(
            f"sandbox: {path} must be a directory of user {os.geteuid()} with mode 0700"
        )
    return path


class SlotPool:
    """``size`` slots shared by every process of this user (see the module docstring).

    Args:
        size: how many runs may hold a slot at once.
        directory: where the lock files live (default: see the module docstring).
    """

    def __init__(self, size: int, directory: str | None = None) -> None:
        if size < 1:
            raise ValueError(f"sandbox: at least one run slot is needed, got {size}")
        self.size = size
        self.directory = directory or _lock_dir()
        self._local = threading.Lock()

    def _try(self, index: int) -> int | None:
        path = os.path.join(self.directory, f"slot-{index}.lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return fd

    @contextlib.contextmanager
    def slot(self, timeout: float) -> Iterator[int]:
        """Hold a free slot (its index) for the ``with`` block.

        Raises:
            CapacityError: every slot stayed busy for ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        delay = 0.005
        while True:
            with self._local:  # threads of this process try in turn; others race via flock
                for index in range(self.size):
                    fd = self._try(index)
                    if fd is not None:
                        break
                else:
                    fd = None
            if fd is not None:
                break
            if time.monotonic() >= deadline:
                raise CapacityError(
                    f"sandbox: all {self.size} run slots stayed busy for {timeout:g} s; "
                    "try again later"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
        try:
            yield index
        finally:
            os.close(fd)  # releases the flock
