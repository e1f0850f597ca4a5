"""The root-side step between the server and bubblewrap, when the server runs as root.

Each run gets a user id of its own (see :mod:`envwire.envs.coding.pool`), and bubblewrap must
then start as that user. That user may not be able to reach the interpreter (a Python under a
``0700`` home directory, say), so this program, still root, first makes a private mount
namespace in which every directory the run needs is reachable: each ancestor other users cannot
enter is covered by an empty tmpfs into which only the needed paths are bound back. Then it drops
to the run's user and group (no supplementary groups) and executes bubblewrap. Nothing of this
changes the host's mounts.

Run as ``python -I -S -c SOURCE CONFIG`` with ``CONFIG`` a JSON object: ``uid``, ``gid``,
``expose`` (paths to make reachable) and ``argv`` (bubblewrap's command line). Stdlib only.
"""

from __future__ import annotations

import ctypes
import json
import os
import stat
import sys
from typing import NoReturn

__all__ = ["main"]

_CLONE_NEWNS = 0x00020000
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 1 << 14, 1 << 18


def _mount(libc: ctypes.CDLL, source: str, target: str, kind: str | None, flags: int) -> None:
    options = b"mode=755" if kind == "tmpfs" else None
    kind_b = kind.encode() if kind else None
    if libc.mount(source.encode(), target.encode(), kind_b, flags, options) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")


def _blocked_ancestor(path: str) -> str | None:
    """The first directory on the way to ``path`` that other users cannot enter."""
    parts = path.split("/")
    for i in range(2, len(parts)):
        ancestor = "/".join(parts[:i])
        if not os.stat(ancestor).st_mode & 0o001:
            return ancestor
    return None


def expose(paths: list[str]) -> None:
    """Make ``paths`` reachable by every user in this (new, private) mount namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    _mount(libc, "none", "/", None, _MS_REC | _MS_PRIVATE)
    blocked: dict[str, list[tuple[str, int, bool]]] = {}
    for path in paths:
        ancestor = _blocked_ancestor(path)
        if ancestor is not None:
            is_dir = stat.S_ISDIR(os.stat(path).st_mode)
            blocked.setdefault(ancestor, []).append((path, os.open(path, os.O_PATH), is_dir))
    for ancestor, entries in blocked.items():
        _mount(libc, "tmpfs", ancestor, "tmpfs", 0)
        for path, fd, is_dir in entries:
            if is_dir:
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb"):
                    pass
            _mount(libc, f"/proc/self/fd/{fd}", path, None, _MS_BIND | _MS_REC)
            os.close(fd)


def main(argv: list[str]) -> NoReturn:
    """Expose, drop to the run's user, execute bubblewrap (exit 71 if any step fails)."""
    cfg = json.loads(argv[1])
    try:
        expose(list(cfg["expose"]))
        os.setgroups([])
        os.setgid(int(cfg["gid"]))
        os.setuid(int(cfg["uid"]))
        os.execv(cfg["argv"][0], cfg["argv"])
    except OSError as exc:
        sys.stderr.write(f"[envwire sandbox: cannot start the run as its own user: {exc}]\n")
        sys.stderr.flush()
        os._exit(71)


if __name__ == "__main__":
    main(sys.argv)
