"""What a pool worker process gives up before it hosts any env (docs/guides/security.md,
"What a pooled env can reach").

A pool worker runs the code of many sessions' envs, as the server's user. :func:`confine`,
called first thing in the worker, takes from it what it does not need:

- the server's process group and session: ``setsid``, so signals sent to the server's group
  (a terminal's Ctrl-C, a ``kill -- -PGID``) do not reach the envs; the server ends its workers
  itself (the pipe's EOF, then ``SIGKILL`` after a grace period);
- inherited file descriptors: all but stdin, stdout, stderr, its pipe and multiprocessing's
  own (the resource tracker's, the parent's sentinel) now point at ``/dev/null``;
- with Landlock (Linux 5.13+, where enabled): a domain of its own, so it can no longer ptrace
  (nor read the memory of) any process outside it, the server included; from Landlock ABI 6
  (Linux 6.12) it cannot signal them either; and the ``protected`` files (the token file, the
  TLS key) can be neither read, written, truncated, renamed nor linked elsewhere: every other
  path keeps every right, except that entries cannot be made or removed directly in a
  directory on the way to a protected file; and ``PR_SET_NO_NEW_PRIVS`` (which Landlock needs
  of a process without ``CAP_SYS_ADMIN``).

It never raises: what the host lacks is left out, and :func:`confine` returns what holds.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import stat
import sys
from collections.abc import Iterable
from multiprocessing import resource_tracker
from typing import Final

__all__ = ["confine", "landlock_abi"]

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
# Landlock's file system rights: the 13 of ABI 1, then REFER (ABI 2) and TRUNCATE (ABI 3).
_FS_V1: Final = (1 << 13) - 1
_FS_REFER, _FS_TRUNCATE = 1 << 13, 1 << 14
# The rights that apply to a file (the others are a directory's).
_FS_FILE: Final = 1 | 2 | 4 | _FS_TRUNCATE  # EXECUTE, WRITE_FILE, READ_FILE, TRUNCATE
_SCOPE_SIGNAL = 2


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where Landlock is missing or disabled."""
    if not sys.platform.startswith("linux"):  # the syscall numbers are Linux's
        return 0
    try:
        return max(int(_libc().syscall(_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)), 0)
    except (OSError, AttributeError):
        return 0


def _granted(protected: Iterable[str]) -> list[str]:
    """The paths whose subtrees keep every right: the siblings of each protected file and of
    each directory on the way to one (``/`` alone when nothing is protected)."""
    blocked: set[str] = set()
    for given in protected:
        path = os.path.realpath(given)
        while True:
            blocked.add(path)
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
    if not blocked:
        return ["/"]
    granted = []
    for directory in sorted(blocked):
        with contextlib.suppress(OSError):
            for name in os.listdir(directory):
                child = os.path.join(directory, name)
                if child not in blocked:
                    granted.append(child)
    return granted


def _landlock(abi: int, protected: list[str]) -> bool:
    """Enter a Landlock domain of this process's own (see the module docstring)."""
    libc = _libc()
    fs = _FS_V1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(fs, 0, _SCOPE_SIGNAL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 8
    ruleset = int(libc.syscall(_CREATE_RULESET, ctypes.byref(attr), size, 0))
    if ruleset < 0:
        return False
    try:
        for path in _granted(protected):
            # A symbolic link gets no rule: what it points to is reached by its own path (a
            # link to a directory on the way to a protected file must not open its subtree).
            try:
                fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue  # gone meanwhile
            try:
                kind = os.fstat(fd).st_mode
                if stat.S_ISLNK(kind):
                    continue
                rule = _PathBeneath(fs if stat.S_ISDIR(kind) else fs & _FS_FILE, fd)
                if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0):
                    return False
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0):
            return False
        return bool(libc.syscall(_RESTRICT_SELF, ruleset, 0) == 0)
    finally:
        os.close(ruleset)


def _multiprocessing_descriptors() -> set[int]:
    """The descriptors this process's Python objects own: its standard streams, the
    multiprocessing resource tracker's pipe and the parent's sentinel."""
    found: set[int | None] = set()
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            found.add(stream.fileno())
    found.add(getattr(resource_tracker._resource_tracker, "_fd", None))
    found.add(getattr(multiprocessing.parent_process(), "_sentinel", None))
    return {fd for fd in found if isinstance(fd, int)}


def _drop_descriptors(keep: set[int]) -> None:
    """Point every descriptor but ``keep`` at /dev/null: what it held (a pipe, a socket of
    the server's) is let go, and its number stays taken, so a Python object that still owns
    it closes /dev/null later, never a descriptor opened since under the same number."""
    try:
        found = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        for fd in found:
            if fd not in keep and fd != null:
                with contextlib.suppress(OSError):  # the listing's own, closed since
                    os.fstat(fd)
                    os.dup2(null, fd, inheritable=False)
    finally:
        os.close(null)


def confine(keep: Iterable[int], protected: Iterable[str] = ()) -> dict[str, object]:
    """Give up what a pool worker does not need (see the module docstring); ``keep``: the
    descriptors it needs beyond stdin, stdout and stderr. Returns what holds: ``session``
    (a session of its own), ``landlock`` (the ABI of the domain entered, 0 for none),
    ``signals`` (signals outside it refused), ``protected`` (the files kept from it)."""
    held: dict[str, object] = {"session": False, "landlock": 0, "signals": False}
    with contextlib.suppress(OSError):  # already a group leader: nothing to leave
        os.setsid()
    held["session"] = os.getsid(0) == os.getpid()
    _drop_descriptors({0, 1, 2, *keep, *_multiprocessing_descriptors()})
    paths = [p for p in protected if p]
    abi = landlock_abi()
    if abi and _landlock(abi, paths):
        held.update(landlock=abi, signals=abi >= 6)
        held["protected"] = paths
    else:
        held["protected"] = []
    return held
