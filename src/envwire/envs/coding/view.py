"""What a sandboxed run sees of the host: the Python runtime and nothing else.

:func:`runtime_view` asks the interpreter itself what it needs (once per interpreter,
unconfined, as the server's user): it imports every extension module of its standard library
and reports the files it has mapped, its ``sys.path`` and its ``site-packages``. The view is then

- read-only binds of the interpreter, its standard library and the directories holding the
  shared libraries it mapped (C libraries only: no programs, no project tree, no home), plus
  ``/etc/ld.so.cache`` so the dynamic loader finds them;
- the host's top-level symlinks (``/lib -> usr/lib`` ...) and every symlink on the way to the
  interpreter and to its ELF loader, so the same absolute paths resolve;
- empty, read-only directories over ``site-packages`` (the standard library only).

:func:`bwrap_argv` turns a view into bubblewrap's command line for one run.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
from dataclasses import dataclass, field

__all__ = ["RUN_DIR", "RuntimeView", "bwrap_argv", "public", "read_interp", "runtime_view"]

#: The run's directory inside the sandbox (a tmpfs of its own); ``/tmp`` points to it.
RUN_DIR = "/sandbox"

_PROBE = """
import json, os, sys, sysconfig
dynload = [p for p in sys.path if p.endswith("lib-dynload") and os.path.isdir(p)]
for directory in dynload:
    for entry in sorted(os.listdir(directory)):
        name = entry.split(".")[0]
        if entry.endswith(".so") and name not in sys.modules:
            try:
                __import__(name)
            except Exception:
                pass
import ctypes
maps = set()
with open("/proc/self/maps") as file:
    for line in file:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            maps.add(parts[5].strip())
paths = sysconfig.get_paths()
print()
print(json.dumps({"executable": sys.executable, "path": sys.path, "maps": sorted(maps),
                  "hide": sorted({paths["purelib"], paths["platlib"]})}))
"""


@dataclass(frozen=True)
class RuntimeView:
    """The host files a run sees (all read-only).

    Attributes:
        python: the interpreter's path, the same inside and outside.
        binds: directories and files bound at their own paths.
        symlinks: ``(path, target)`` symlinks recreated inside.
        hidden: directories covered by an empty read-only directory.
    """

    python: str
    binds: tuple[str, ...]
    symlinks: tuple[tuple[str, str], ...] = ()
    hidden: tuple[str, ...] = field(default=())


def read_interp(executable: str) -> str | None:
    """The ELF program interpreter (``PT_INTERP``) of ``executable``, or None."""
    try:
        with open(executable, "rb") as file:
            head = file.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:  # 64-bit ELF only
                return None
            (phoff,) = struct.unpack_from("<Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            for index in range(phnum):
                file.seek(phoff + index * phentsize)
                p_type, _, offset, _, _, size = struct.unpack("<IIQQQQ", file.read(40))
                if p_type == 3:  # PT_INTERP
                    file.seek(offset)
                    return file.read(size).rstrip(b"\0").decode()
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    return None


def _symlink_chain(path: str) -> tuple[list[tuple[str, str]], str]:
    """Symlinks met while resolving ``path`` component by component, and the real path."""
    links: list[tuple[str, str]] = []
    resolved = "/"
    parts = [p for p in path.split("/") if p]
    hops = 0
    while parts:
        part = parts.pop(0)
        candidate = os.path.join(resolved, part)
        if os.path.islink(candidate) and hops < 40:
            hops += 1
            target = os.readlink(candidate)
            links.append((candidate, target))
            base = "/" if target.startswith("/") else resolved
            parts = [
                p for p in os.path.normpath(os.path.join(base, target)).split("/") if p
            ] + parts
            resolved = "/"
        else:
            resolved = os.path.normpath(candidate)
    return links, resolved


def _outermost(paths: set[str]) -> list[str]:
    """``paths`` without those inside another one."""
    ordered = sorted(paths)
    return [p for p in ordered if not any(p.startswith(q.rstrip("/") + "/") for q in ordered)]


def runtime_view(python: str, timeout: float = 60.0) -> RuntimeView:
    """Ask ``python`` which files it needs (see the module docstring).

    Raises:
        OSError: the interpreter cannot be run or its answer cannot be read.
    """
    try:
        done = subprocess.run(
            [python, "-I", "-S", "-c", _PROBE],
            capture_output=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
        lines = done.stdout.decode(errors="replace").strip().splitlines()
        facts = json.loads(lines[-1]) if done.returncode == 0 and lines else None
    except (subprocess.SubprocessError, json.JSONDecodeError) as exc:
        raise OSError(f"cannot ask {python} what it needs: {exc}") from exc
    if not isinstance(facts, dict):
        raise OSError(f"cannot ask {python} what it needs: {done.stderr.decode()[-500:]}")
    links, real_python = _symlink_chain(python)
    interp = read_interp(real_python)
    if interp:
        more, _ = _symlink_chain(interp)
        links += more
    dirs = {os.path.dirname(os.path.realpath(m)) for m in facts["maps"] if os.path.exists(m)}
    dirs |= {os.path.realpath(p) for p in facts["path"] if os.path.isdir(p)}
    binds = set(_outermost(dirs))
    if not any(real_python.startswith(d + "/") for d in binds):
        binds.add(real_python)
    zips = {os.path.realpath(p) for p in facts["path"] if os.path.isfile(p)}
    binds |= {z for z in zips if not any(z.startswith(d + "/") for d in binds)}
    if os.path.exists("/etc/ld.so.cache"):
        binds.add("/etc/ld.so.cache")
    for entry in sorted(os.listdir("/")):
        if os.path.islink("/" + entry):
            links.append(("/" + entry, os.readlink("/" + entry)))
    inside = [(p, t) for p, t in links if not any(p.startswith(d + "/") for d in binds)]
    hidden = [
        h for h in facts["hide"] if os.path.isdir(h) and any(h.startswith(d + "/") for d in binds)
    ]
    return RuntimeView(
        python=python,
        binds=tuple(sorted(binds)),
        symlinks=tuple(dict.fromkeys(inside)),
        hidden=tuple(sorted(hidden)),
    )


def public(path: str) -> bool:
    """Whether any user can reach ``path`` (every ancestor searchable, the path readable)."""
    parts = os.path.realpath(path).split("/")
    try:
        for i in range(2, len(parts)):
            if not os.stat("/".join(parts[:i])).st_mode & 0o001:
                return False
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return bool(mode & 0o004)


def bwrap_argv(
    bwrap: str,
    view: RuntimeView,
    *,
    disk: int,
    network: bool,
    code_fd: int,
    seccomp_fd: int,
    status_fd: int,
    env: dict[str, str],
) -> list[str]:
    """bubblewrap's options for one run (the command follows them).

    New user, PID, IPC, UTS, cgroup and (unless ``network``) network namespaces, no
    capabilities, no further user namespaces, killed with its parent; the view of
    :class:`RuntimeView` read-only, a fresh ``/proc`` of the run's PID namespace, ``/dev/null``,
    ``/dev/zero``, ``/dev/random``, ``/dev/urandom``, and the run's directory as a tmpfs of
    ``disk`` bytes holding ``main.py`` (read from ``code_fd``) with ``/tmp`` and ``/dev/shm``
    (POSIX semaphores and shared memory) pointing to it.
    """
    argv = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    argv += ["--unshare-cgroup-try", "--disable-userns", "--die-with-parent", "--new-session"]
    if not network:
        argv.append("--unshare-net")
    argv += ["--uid", "1000", "--gid", "1000", "--hostname", "sandbox", "--clearenv"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    for path in view.binds:
        argv += ["--ro-bind", path, path]
    for path, target in view.symlinks:
        argv += ["--symlink", target, path]
    for path in view.hidden:
        argv += ["--size", "4096", "--tmpfs", path, "--remount-ro", path]
    argv += ["--proc", "/proc"]
    for device in ("null", "zero", "random", "urandom"):
        argv += ["--dev-bind", f"/dev/{device}", f"/dev/{device}"]
    argv += ["--size", str(disk), "--perms", "0700", "--tmpfs", RUN_DIR]
    argv += ["--perms", "0600", "--file", str(code_fd), f"{RUN_DIR}/main.py"]
    argv += ["--symlink", RUN_DIR, "/tmp", "--symlink", RUN_DIR, "/dev/shm"]
    argv += ["--remount-ro", "/", "--chdir", RUN_DIR]
    argv += ["--seccomp", str(seccomp_fd), "--json-status-fd", str(status_fd)]
    return argv
