"""Run untrusted Python code in a separate, limited process.

Every :meth:`Sandbox.run` starts a fresh ``python -I`` process in a new session, in its own
temporary directory (removed afterwards), with stdin closed and a minimal environment. What is
enforced, layer by layer (``Sandbox.enforcement`` reports which layers this host allows):

- **wall time**: the parent kills the whole process group when ``wall_time`` runs out, and every
  leftover process of the sandbox user; ``RLIMIT_CPU`` backs it up.
- **memory**: ``RLIMIT_AS`` (address space), so a memory bomb ends in ``MemoryError``.
- **processes**: ``RLIMIT_NPROC``. The kernel counts it per user and ignores it for root, so when
  the server runs as root each run gets a user id of its own (``uid_base`` + slot), which also
  keeps the code away from every file the server's user owns. Without root the limit applies
  to the server's user as a whole, which in practice means the code cannot fork at all.
- **files**: writes (``open`` for writing, ``os.remove``, ``rename``, ``mkdir``, ...) outside
  the run's directory are refused by an audit hook (PEP 578); ``RLIMIT_FSIZE`` caps file sizes.
  Reading is limited only by Unix permissions.
- **network**: a new, empty network namespace (``unshare(CLONE_NEWNET)``, which needs root or
  ``CAP_SYS_ADMIN``) where allowed; everywhere, the audit hook refuses to create Internet
  sockets and to resolve names.
- **programs**: the audit hook refuses ``exec``, ``posix_spawn``, ``os.system`` and
  ``subprocess`` (a new program would escape the hook) and ``ctypes``; ``os.fork`` stays allowed
  under the process limit.
- **output**: ``output`` bytes of stdout and of stderr are kept; a program that writes more than
  ``output_total`` bytes in all is stopped.

The audit hook is a Python-level guard, not a security boundary against code that finds a way
around the interpreter; the boundary is the OS layers above (user id, rlimits, namespaces). There
is no seccomp filter.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import IO, Any

__all__ = ["BOOTSTRAP", "Sandbox", "SandboxLimits", "SandboxResult"]

_MIB = 1 << 20


@dataclass(frozen=True)
class SandboxLimits:
    """What one run may use.

    Attributes:
        wall_time: seconds before the run is killed.
        cpu_time: CPU seconds (``RLIMIT_CPU``); default ``wall_time`` rounded up, plus one.
        memory: bytes of address space (``RLIMIT_AS``).
        processes: processes and threads of the sandbox user (``RLIMIT_NPROC``).
        file_size: largest file the code may write, in bytes (``RLIMIT_FSIZE``).
        open_files: open file descriptors (``RLIMIT_NOFILE``).
        output: bytes of stdout, and of stderr, that are kept.
        output_total: bytes of output after which the program is stopped.
        network: allow network access (off by default).
    """

    wall_time: float = 10.0
    cpu_time: int | None = None
    memory: int = 512 * _MIB
    processes: int = 32
    file_size: int = 16 * _MIB
    open_files: int = 64
    output: int = 64 * 1024
    output_total: int = 8 * _MIB
    network: bool = False

    def __post_init__(self) -> None:
        if self.wall_time <= 0 or self.memory <= 0 or self.processes < 1 or self.output < 0:
            raise ValueError(f"SandboxLimits: limits must be positive, got {self}")


@dataclass(frozen=True)
class SandboxResult:
    """The outcome of one run.

    ``exit_code`` is the program's exit status; a run stopped by a signal reports 128 + the
    signal number (137 for SIGKILL), as shells do, and says why at the end of ``stderr``.
    """

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False
    truncated: bool = False
    duration: float = 0.0
    enforcement: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the program exited with status 0."""
        return self.exit_code == 0


#: The program every run starts with: it confines itself, then runs ``main.py``.
BOOTSTRAP = r"""
import json, os, resource, sys
cfg = json.loads(sys.argv[1])
sys.dont_write_bytecode = True
if cfg["uid"] is not None:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if cfg["namespaces"]:
        # A private mount namespace (and, unless networking is allowed, an empty network one).
        libc.unshare(0x00020000 | (0 if cfg["network"] else 0x40000000))
        libc.mount(b"none", b"/", None, (1 << 14) | (1 << 18), None)  # MS_REC | MS_PRIVATE
        # The sandbox user must still reach the interpreter: cover each directory others
        # cannot enter (a 0700 home holding the interpreter) with an empty tmpfs and bind the
        # needed directories back into it. Everything else in that directory stays hidden.
        needed = sorted({os.path.realpath(p) for p in sys.path + [os.path.dirname(sys.executable)]
                         if p and os.path.isdir(p)})
        needed = [p for p in needed if not any(p.startswith(q + "/") for q in needed if q != p)]
        blocked = {}
        for path in needed:
            parts = path.split("/")
            for i in range(2, len(parts) + 1):
                ancestor = "/".join(parts[:i])
                if not os.stat(ancestor).st_mode & 0o001:
                    blocked.setdefault(ancestor, []).append((path, os.open(path, os.O_RDONLY)))
                    break
        for ancestor, paths in blocked.items():
            libc.mount(b"tmpfs", ancestor.encode(), b"tmpfs", 0, b"mode=755")
            for path, fd in paths:
                os.makedirs(path, exist_ok=True)
                source = f"/proc/self/fd/{fd}".encode()
                libc.mount(source, path.encode(), None, 4096 | (1 << 14), None)  # MS_BIND|MS_REC
                os.close(fd)
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    for res, value in cfg["rlimits"] + [["RLIMIT_NPROC", cfg["processes"]]]:
        resource.setrlimit(getattr(resource, res), (value, value))
    os.setgroups([])
    os.setgid(cfg["uid"])
    os.setuid(cfg["uid"])
    libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the server
    del ctypes, libc
    for name in [n for n in sys.modules if n == "ctypes" or n.startswith(("ctypes.", "_ctypes"))]:
        del sys.modules[name]
else:
    for res, value in cfg["rlimits"]:
        resource.setrlimit(getattr(resource, res), (value, value))
root = os.path.realpath(cfg["dir"])
allow_net = cfg["network"]
fork_fd = os.open(cfg["fork_file"], os.O_WRONLY | os.O_APPEND) if cfg["fork_file"] else -1

def _audit(root=root, allow_net=allow_net, fork_fd=fork_fd, fork_budget=cfg["processes"],
           realpath=os.path.realpath, join=os.path.join, getcwd=os.getcwd,
           fsdecode=os.fsdecode, sep=os.sep, getpid=os.getpid, write=os.write, fstat=os.fstat,
           W=os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC):
    def inside(path):
        if isinstance(path, int):
            return path != fork_fd
        try:
            full = realpath(join(getcwd(), fsdecode(path)))
        except Exception:
            return False
        return full == root or full.startswith(root + sep) or full == "/dev/null"
    paths1 = {"os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate",
              "os.utime", "os.mkfifo", "os.mknod", "os.chflags", "os.lchflags", "os.setxattr",
              "os.removexattr"}
    paths2 = {"os.rename", "os.link", "os.symlink"}
    programs = {"os.system", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen",
                "os.startfile", "pty.spawn", "os.forkpty"}
    net = {"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
           "socket.gethostbyname_ex", "socket.getnameinfo", "socket.connect", "socket.bind",
           "socket.sendto", "socket.sendmsg"}
    hidden = {"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames"}
    def hook(event, args):
        if event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags > 0 and flags & W)
            if writing and path is not None and not inside(path):
                raise PermissionError(f"sandbox: no writing outside its directory: {path!r}")
        elif event in paths1:
            if not inside(args[0]):
                raise PermissionError(f"sandbox: no changes outside its directory: {args[0]!r}")
        elif event in paths2:
            if not (inside(args[0]) or event == "os.symlink") or not inside(args[1]):
                raise PermissionError(f"sandbox: no changes outside its directory: {args[1]!r}")
        elif event == "socket.__new__":
            if not allow_net and args[1] != 1:  # only AF_UNIX
                raise PermissionError("sandbox: network access is disabled")
        elif event in net:
            if not allow_net and not (event == "socket.bind" and isinstance(args[1], str)):
                raise PermissionError("sandbox: network access is disabled")
        elif event == "os.fork" and fork_fd >= 0:
            # No per-user process limit applies here (root without namespaces): count forks.
            try:
                write(fork_fd, b"x")
                over = fstat(fork_fd).st_size > fork_budget
            except OSError:
                over = True
            if over:
                raise BlockingIOError("sandbox: process limit reached")
        elif event in programs:
            raise PermissionError("sandbox: starting programs is disabled")
        elif event.startswith("ctypes.") or event in hidden:
            raise PermissionError(f"sandbox: {event} is disabled")
        elif event == "import" and args[0] in ("ctypes", "_ctypes", "cffi", "_cffi_backend"):
            raise ImportError(f"sandbox: importing {args[0]} is disabled")
        elif event in ("os.kill", "os.killpg", "signal.pthread_kill"):
            if args[0] != getpid():
                raise PermissionError("sandbox: signalling other processes is disabled")
    return hook

sys.addaudithook(_audit())
del _audit, cfg, root, allow_net, fork_fd
with open("main.py", encoding="utf-8") as _f:
    _code = compile(_f.read(), "main.py", "exec")
del _f
_globals = {"__name__": "__main__", "__builtins__": __builtins__}
del json, resource
try:
    exec(_code, _globals)
except SystemExit:
    raise
except BaseException as exc:  # report it as python would, without this bootstrap's frame
    import traceback
    traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
    sys.exit(1)
"""


#: Runs in progress (directory -> process group), cleaned up at interpreter exit too: a server
#: stopped while an abandoned env thread still waits on a run must not leave them behind.
_LIVE: dict[str, int | None] = {}
_LIVE_LOCK = threading.Lock()


@atexit.register
def _cleanup_live_runs() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE.items())
    for workdir, pgid in live:
        if pgid is not None:
            _kill_group(pgid)
        shutil.rmtree(workdir, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.unlink(workdir + ".forks")


class _UidPool:
    """Distinct user ids for concurrent runs (only used when the server runs as root)."""

    def __init__(self, base: int, size: int) -> None:
        self._free = list(range(base + size - 1, base - 1, -1))
        self._cond = threading.Condition()

    def acquire(self, timeout: float) -> int:
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._free), timeout):
                raise RuntimeError("sandbox: every sandbox user id is in use")
            return self._free.pop()

    def release(self, uid: int) -> None:
        with self._cond:
            self._free.append(uid)
            self._cond.notify()


class _Capture:
    """Reads one pipe, keeping the first ``keep`` bytes and counting the rest."""

    def __init__(self, pipe: IO[bytes], keep: int, total: _Counter) -> None:
        self.pipe, self.keep, self.total = pipe, keep, total
        self.data = bytearray()
        self.dropped = 0
        self.thread = threading.Thread(target=self._read, name="envwire-sandbox-pipe", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = self.pipe.read1(65536)  # type: ignore[attr-defined]
            except (OSError, ValueError):
                return
            if not chunk:
                return
            room = self.keep - len(self.data)
            self.data += chunk[: max(room, 0)]
            self.dropped += max(len(chunk) - max(room, 0), 0)
            self.total.add(len(chunk))

    def text(self) -> str:
        return bytes(self.data).decode("utf-8", errors="replace")


class _Counter:
    def __init__(self, limit: int, on_exceeded: Any) -> None:
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


def _namespaces_allowed() -> bool:
    """Whether this process may create mount and network namespaces (probed once, in a child)."""
    if not sys.platform.startswith("linux"):
        return False
    probe = (
        "import ctypes,sys; "
        "sys.exit(ctypes.CDLL(None, use_errno=True).unshare(0x00020000 | 0x40000000) != 0)"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-c", probe], capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def _public(path: str) -> bool:
    """Whether other users can reach ``path`` (every ancestor searchable by others)."""
    parts = os.path.realpath(path).split("/")
    for i in range(2, len(parts) + 1):
        try:
            if not os.stat("/".join(parts[:i])).st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


class Sandbox:
    """Runs Python code under :class:`SandboxLimits` (see the module docstring).

    Args:
        limits: the default limits of every run.
        root: directory under which each run's temporary directory is made (default: the
            system's temporary directory).
        uid_base: first user id handed to runs when the server runs as root.
    """

    _probe_lock = threading.Lock()
    _namespaces: bool | None = None

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        root: str | None = None,
        uid_base: int = 1_000_000 + (os.getpid() % 50_000) * 1024,
        python: str = sys.executable,
    ) -> None:
        self.limits = limits or SandboxLimits()
        self.root = root
        self.python = python
        self.as_root = hasattr(os, "geteuid") and os.geteuid() == 0
        self._uid_base = uid_base
        self._uids: _UidPool | None = None
        self._layers: dict[str, Any] | None = None

    @property
    def enforcement(self) -> dict[str, Any]:
        """Which layers this host enforces (probed on first use)."""
        if self._layers is None:
            with Sandbox._probe_lock:
                if Sandbox._namespaces is None:
                    Sandbox._namespaces = self.as_root and _namespaces_allowed()
            namespaces = bool(Sandbox._namespaces)
            separate_user = self.as_root and (
                namespaces or all(_public(p) for p in (sys.prefix, sys.base_prefix))
            )
            if separate_user:
                self._uids = _UidPool(self._uid_base, 1024)
            self._layers = {
                "wall_time": True,
                "memory": True,
                "output": True,
                "own_directory": True,
                "separate_user": separate_user,
                "namespaces": namespaces and separate_user,
                "process_limit": "rlimit" if separate_user or not self.as_root else "audit-hook",
                "network": "namespace" if namespaces and separate_user else "audit-hook",
            }
        return self._layers

    def run(self, code: str, limits: SandboxLimits | None = None) -> SandboxResult:
        """Run ``code`` as ``main.py`` in a fresh directory and return what it printed.

        Never raises for anything the code does; raises ``OSError`` only if the host cannot
        start a process or make a directory at all.
        """
        limits = limits or self.limits
        enforcement = self.enforcement
        workdir = tempfile.mkdtemp(prefix="envwire-sandbox-", dir=self.root)
        with _LIVE_LOCK:
            _LIVE[workdir] = None
        uid = self._uids.acquire(timeout=limits.wall_time + 30) if self._uids else None
        try:
            return self._run(code, limits, workdir, uid, enforcement)
        finally:
            with _LIVE_LOCK:
                _LIVE.pop(workdir, None)
            if uid is not None:
                _kill_user(uid)
                assert self._uids is not None
                self._uids.release(uid)
            shutil.rmtree(workdir, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.unlink(workdir + ".forks")

    def _prepare(
        self,
        code: str,
        limits: SandboxLimits,
        workdir: str,
        uid: int | None,
        enforcement: dict[str, Any],
    ) -> dict[str, Any]:
        """Write ``main.py``, hand the directory to the run's user; the bootstrap's config."""
        with open(os.path.join(workdir, "main.py"), "w", encoding="utf-8") as file:
            file.write(code)
        if uid is not None:
            os.chown(workdir, uid, uid)
            os.chown(os.path.join(workdir, "main.py"), uid, uid)
        os.chmod(workdir, 0o700)
        rlimits = [
            ("RLIMIT_AS", limits.memory),
            ("RLIMIT_CPU", limits.cpu_time or int(limits.wall_time) + 1),
            ("RLIMIT_FSIZE", limits.file_size),
            ("RLIMIT_NOFILE", limits.open_files),
            ("RLIMIT_CORE", 0),
        ]
        if not self.as_root:
            rlimits.append(("RLIMIT_NPROC", limits.processes))
        fork_file = None
        if enforcement["process_limit"] == "audit-hook":
            fork_file = workdir + ".forks"
            with open(fork_file, "wb"):
                pass
        return {
            "dir": workdir,
            "uid": uid,
            "rlimits": rlimits,
            "processes": limits.processes,
            "namespaces": enforcement["namespaces"],
            "network": limits.network,
            "fork_file": fork_file,
        }

    def _run(
        self,
        code: str,
        limits: SandboxLimits,
        workdir: str,
        uid: int | None,
        enforcement: dict[str, Any],
    ) -> SandboxResult:
        config = self._prepare(code, limits, workdir, uid, enforcement)
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": workdir,
            "TMPDIR": workdir,
            "LANG": "C.UTF-8",
        }
        start = time.monotonic()
        process = subprocess.Popen(
            [self.python, "-I", "-X", "utf8", "-c", BOOTSTRAP, json.dumps(config)],
            cwd=workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
        with _LIVE_LOCK:
            _LIVE[workdir] = process.pid  # its process group (a new session)
        stopped: list[str] = []

        def stop(reason: str) -> None:
            if not stopped:
                stopped.append(reason)
            _kill_group(process.pid)

        total = _Counter(
            limits.output_total,
            lambda: stop(f"it wrote more than {limits.output_total} bytes of output"),
        )
        assert process.stdout is not None and process.stderr is not None
        out = _Capture(process.stdout, limits.output, total)
        err = _Capture(process.stderr, limits.output, total)
        try:
            process.wait(timeout=limits.wall_time)
        except subprocess.TimeoutExpired:
            stop(f"it ran past the wall-time limit of {limits.wall_time:g} s")
            process.wait()
        duration = time.monotonic() - start
        _kill_group(process.pid)  # whatever the program left behind in its group
        if uid is not None:
            _kill_user(uid)
        for capture in (out, err):
            capture.thread.join(timeout=5)
            capture.pipe.close()
        code_ = process.returncode
        exit_code = 128 - code_ if code_ < 0 else code_
        stderr = err.text()
        truncated = out.dropped > 0 or err.dropped > 0
        if truncated:
            stderr += (
                f"\n[envwire sandbox: output beyond {limits.output} bytes per stream was dropped]"
            )
        if stopped:
            stderr += f"\n[envwire sandbox: the program was killed because {stopped[0]}]"
        elif code_ < 0:
            stderr += f"\n[envwire sandbox: the program was killed by {_signal_name(-code_)}]"
        return SandboxResult(
            stdout=out.text(),
            stderr=stderr.lstrip("\n") if not err.data else stderr,
            exit_code=exit_code,
            timed_out=bool(stopped) and "wall-time" in stopped[0],
            truncated=truncated or total.exceeded,
            duration=duration,
            enforcement=enforcement,
        )

    def describe(self) -> dict[str, Any]:
        """Limits and enforcement, as JSON data (for docs and metadata)."""
        return {"limits": asdict(self.limits), "enforcement": self.enforcement}


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _kill_user(uid: int, rounds: int = 50) -> None:
    """SIGKILL every process whose real user id is ``uid`` (processes that left the group)."""
    for _ in range(rounds):
        found = False
        try:
            entries = os.listdir("/proc")
        except OSError:
            return
        for entry in entries:
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/status", "rb") as file:
                    status = file.read()
            except OSError:
                continue
            start = status.find(b"\nUid:")
            if start < 0 or int(status[start + 5 :].split()[0]) != uid:
                continue
            found = True
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGKILL)
        if not found:
            return
        time.sleep(0.01)
