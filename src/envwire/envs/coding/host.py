"""What this host lets the sandbox do: bubblewrap, user namespaces, seccomp, Landlock.

Each check returns None when the capability is there, or a sentence naming what is missing and
how to get it; the sandbox refuses to run untrusted code on the first sentence (unless the
operator allowed an unsafe sandbox) and puts it in ``Sandbox.enforcement``.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys

from envwire.envs.coding import seccomp

__all__ = ["find_bwrap", "landlock_abi", "missing_capability"]


def _sysctl(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as file:
            return file.read().strip()
    except OSError:
        return None


def find_bwrap(bwrap: str | None) -> str | None:
    """The bubblewrap binary: ``bwrap`` as given (a path or a name on PATH), or None."""
    found = shutil.which(bwrap or "bwrap")
    return os.path.realpath(found) if found else None


def missing_capability(bwrap: str | None) -> str | None:
    """The first capability the bubblewrap sandbox lacks here, as a sentence; None if none."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux namespaces; this is {sys.platform}"
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    if seccomp.host_architecture() is None:
        return f"no seccomp filter is written for this architecture ({os.uname().machine})"
    if _sysctl("/proc/sys/user/max_user_namespaces") == "0":
        return "user namespaces are disabled (sysctl user.max_user_namespaces = 0)"
    if _sysctl("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        return (
            "unprivileged user namespaces are disabled "
            "(sysctl kernel.unprivileged_userns_clone = 0)"
        )
    if _sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        return (
            "AppArmor restricts unprivileged user namespaces "
            "(sysctl kernel.apparmor_restrict_unprivileged_userns = 1)"
        )
    return None


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers (0: none, or not enabled at boot)."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, VERSION)
    return max(int(version), 0)
