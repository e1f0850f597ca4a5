"""Run untrusted Python code behind an OS boundary (bubblewrap, seccomp, Landlock, rlimits).

Every :meth:`Sandbox.run` starts the interpreter inside ``bwrap`` with, as layers (``docs/
security.md`` states what each guarantees on which host; :attr:`Sandbox.enforcement` reports
which are active here):

- **namespaces**: new user, PID, IPC, UTS, cgroup and network namespaces, a mount namespace whose
  root holds only the Python runtime and standard library (read-only, see
  :mod:`~envwire.envs.coding.view`), a fresh ``/proc`` of the run's PID namespace, four device
  nodes, and the run's directory: a tmpfs of ``disk`` bytes (``/tmp`` points to it), gone with
  the run. No capabilities, no further user namespaces, killed with its parent.
- **seccomp**: bubblewrap loads :func:`~envwire.envs.coding.seccomp.build_filter` (no ptrace,
  mounts, namespaces, keyrings, bpf, perf, modules, ...); the bootstrap adds one refusing
  ``execve``, so the program can start no other program.
- **Landlock** (where the kernel has it): read-only everywhere but the run's directory; no TCP;
  no signals or abstract sockets outside the run.
- **a user id per run** when the server runs as root: slot ``n`` of the host-wide
  :class:`~envwire.envs.coding.pool.SlotPool` runs as ``uid_base + n``. The pool also bounds how
  many runs go at once (``runs``, default 8); a run waits up to ``queue_timeout`` for a slot.
- **limits**: wall time (the parent kills the run's PID namespace); ``RLIMIT_AS`` per process and
  the sum of resident memory across the run's processes (polled); ``RLIMIT_NPROC`` counted in
  the run's own user namespace; ``RLIMIT_NOFILE``, ``RLIMIT_FSIZE``, ``RLIMIT_CPU``; output.
- **the audit hook** of :mod:`~envwire.envs.coding.bootstrap`, a second layer inside the
  interpreter, never the only one.

Where bubblewrap cannot make its namespaces, :meth:`Sandbox.run` raises
:class:`~envwire.errors.ConfigError` naming the missing capability, unless the operator allowed
an unsafe sandbox (``envwire serve --unsafe-sandbox``): then a run is a plain process in a host
directory with the layers that need no namespace (rlimits, seccomp loaded by the bootstrap,
Landlock, the audit hook, a user id per run as root, no new processes otherwise).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from envwire.envs.coding import host, seccomp, watch
from envwire.envs.coding.limits import SandboxLimits, SandboxResult, result_of
from envwire.envs.coding.members import Members, NamespaceMembers, UserMembers
from envwire.envs.coding.pool import DEFAULT_RUNS, DEFAULT_UID_BASE, SlotPool
from envwire.envs.coding.view import RUN_DIR, RuntimeView, bwrap_argv, public, runtime_view
from envwire.errors import ConfigError

__all__ = ["Sandbox", "SandboxLimits", "SandboxResult", "configure", "probe", "status"]

_HERE = Path(__file__).resolve().parent
_UNSAFE_VAR, _RUNS_VAR = "ENVWIRE_SANDBOX_UNSAFE", "ENVWIRE_SANDBOX_RUNS"


def configure(*, unsafe: bool | None = None, runs: int | None = None) -> None:
    """Server-wide sandbox settings: allow an unsafe sandbox, and how many runs go at once.

    Stored in this process's environment (``ENVWIRE_SANDBOX_UNSAFE``, ``ENVWIRE_SANDBOX_RUNS``),
    so env worker processes started afterwards agree; sandboxes made afterwards use them.
    """
    if unsafe is not None:
        os.environ[_UNSAFE_VAR] = "1" if unsafe else "0"
    if runs is not None:
        if runs < 1:
            raise ConfigError(f"sandbox_runs must be at least 1, got {runs}")
        os.environ[_RUNS_VAR] = str(runs)


def status() -> dict[str, Any] | None:
    """:attr:`Sandbox.enforcement` of a sandbox with the server-wide settings, once some code of
    this process has probed it (None before: probing takes a few seconds, status must not)."""
    found = _PROBES.get(Sandbox()._key())  # no lock: a probe holds it for seconds
    return dict(found) if found is not None else None


def probe(background: bool = True) -> None:
    """Probe the server-wide sandbox now (in a daemon thread unless ``background`` is False),
    so that :func:`status` has an answer before the first run."""
    if background:
        thread = threading.Thread(target=probe, args=(False,), name="envwire-sandbox-probe")
        thread.daemon = True
        thread.start()
    else:
        Sandbox().enforcement  # noqa: B018 (probes and caches)


_VIEWS: dict[str, RuntimeView] = {}
_PROBES: dict[tuple[Any, ...], dict[str, Any]] = {}
_PROBE_LOCK = threading.RLock()  # the probe's trial run needs the view


def _source(name: str) -> str:
    return (_HERE / f"{name}.py").read_text(encoding="utf-8")


class Sandbox:
    """Runs Python code under :class:`SandboxLimits` (see the module docstring).

    Args:
        limits: the default limits of every run.
        unsafe: allow running without namespaces where the host has none (default: the
            server-wide setting of :func:`configure`, else False).
        runs: runs at once across every sandbox of this host user (default: :func:`configure`'s
            setting, else 8).
        queue_timeout: seconds a run waits for a free slot before ``CapacityError``.
        bwrap: the bubblewrap binary (a name on PATH or a path).
        python: the interpreter that runs the code (default: this one's base interpreter).
        uid_base: first user id of the runs when the server runs as root.
        root: directory for run directories without namespaces (default: the system's).
        audit_hook: install the interpreter's audit hook (turn off only to test the OS layers
            on their own).
    """

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        unsafe: bool | None = None,
        runs: int | None = None,
        queue_timeout: float = 10.0,
        bwrap: str | None = None,
        python: str | None = None,
        uid_base: int = DEFAULT_UID_BASE,
        root: str | None = None,
        audit_hook: bool = True,
    ) -> None:
        self.limits = limits or SandboxLimits()
        env_unsafe = os.environ.get(_UNSAFE_VAR, "0") not in ("", "0", "false")
        self.unsafe = env_unsafe if unsafe is None else unsafe
        self.runs = runs or int(os.environ.get(_RUNS_VAR, DEFAULT_RUNS))
        self.queue_timeout = queue_timeout
        self.bwrap = host.find_bwrap(bwrap)
        self.python = python or os.path.realpath(getattr(sys, "_base_executable", sys.executable))
        self.uid_base = uid_base
        self.root = root
        self.audit_hook = audit_hook
        self.as_root = os.geteuid() == 0
        self._pool: SlotPool | None = None

    @property
    def pool(self) -> SlotPool:
        if self._pool is None:
            self._pool = SlotPool(self.runs)
        return self._pool

    @property
    def enforcement(self) -> dict[str, Any]:
        """Which layers are active on this host (probed once per process and settings).

        Keys: ``boundary`` ("bubblewrap" or "none"), ``namespaces`` (list), ``seccomp``,
        ``landlock`` (the ABI version, 0 = none), ``separate_user`` (a user id per run),
        ``process_limit``, ``memory``, ``disk``, ``network``, ``audit_hook``, ``runs`` (the
        concurrency bound), ``unsafe`` (runs allowed without the boundary) and ``missing``
        (what the host lacks for the boundary, or None).
        """
        key = self._key()
        with _PROBE_LOCK:
            if key not in _PROBES:
                _PROBES[key] = self._probe()
            return dict(_PROBES[key])

    def _key(self) -> tuple[Any, ...]:
        return (self.bwrap, self.python, self.as_root, self.unsafe, self.runs, self.audit_hook)

    def _probe(self) -> dict[str, Any]:
        missing = host.missing_capability(self.bwrap)
        if missing is None:
            missing = self._trial()
        landlock = host.landlock_abi()
        boundary = missing is None
        separate = self.as_root and (boundary or public(self.python))
        layers: dict[str, Any] = {
            "boundary": "bubblewrap" if boundary else "none",
            "namespaces": ["user", "pid", "ipc", "uts", "cgroup", "net", "mount"]
            if boundary
            else [],
            "seccomp": seccomp.host_architecture() is not None,
            "landlock": landlock,
            "separate_user": separate,
            "process_limit": "rlimit-userns"
            if boundary
            else ("rlimit-uid" if separate else "no-processes"),
            "memory": "rlimit+watchdog",
            "disk": "tmpfs" if boundary else "watchdog",
            "network": "namespace" if boundary else ("landlock" if landlock >= 4 else "audit-hook"),
            "audit_hook": self.audit_hook,
            "runs": self.runs,
            "unsafe": self.unsafe,
            "missing": missing,
        }
        return layers

    def _trial(self) -> str | None:
        """Run a tiny program through the whole boundary; None if it worked, else why not."""
        try:
            view = self._view()
            result = self._run_bwrap("print('ok')", SandboxLimits(wall_time=30.0), view, {})
        except OSError as exc:
            return f"the sandbox cannot start here: {exc}"
        if result.stdout != "ok\n":
            detail = result.stderr.strip().splitlines()[-3:]
            return "bubblewrap cannot create the sandbox here: " + " / ".join(detail)
        return None

    def _view(self) -> RuntimeView:
        with _PROBE_LOCK:
            if self.python not in _VIEWS:
                _VIEWS[self.python] = runtime_view(self.python)
            return _VIEWS[self.python]

    def check(self) -> None:
        """Raise :class:`~envwire.errors.ConfigError` if :meth:`run` would refuse every program
        (no boundary on this host and no unsafe sandbox allowed); the message names what is
        missing."""
        enforcement = self.enforcement
        if enforcement["boundary"] != "bubblewrap" and not self.unsafe:
            raise ConfigError(
                f"sandbox: refusing to run untrusted code: {enforcement['missing']} "
                "(envwire serve --unsafe-sandbox runs it without that boundary)"
            )

    def run(self, code: str, limits: SandboxLimits | None = None) -> SandboxResult:
        """Run ``code`` as ``main.py`` in a fresh sandbox and return what it printed.

        Never raises for anything the code does.

        Raises:
            ConfigError: the host lacks what the sandbox needs (the message names it) and no
                unsafe sandbox is allowed.
            CapacityError: every run slot stayed busy for ``queue_timeout`` seconds.
            OSError: the host cannot start a process at all.
        """
        limits = limits or self.limits
        enforcement = self.enforcement
        if enforcement["boundary"] == "bubblewrap":
            return self._run_bwrap(code, limits, self._view(), enforcement)
        self.check()
        return self._run_plain(code, limits, enforcement)

    def describe(self) -> dict[str, Any]:
        """Limits and enforcement, as JSON data (for docs and metadata)."""
        return {"limits": asdict(self.limits), "enforcement": self.enforcement}

    # --- the two ways to run

    def _rlimits(self, limits: SandboxLimits, nproc: bool) -> list[tuple[str, int]]:
        rlimits = [
            ("RLIMIT_AS", limits.memory),
            ("RLIMIT_CPU", limits.cpu_time or int(limits.wall_time) + 1),
            ("RLIMIT_FSIZE", limits.file_size),
            ("RLIMIT_NOFILE", limits.open_files),
            ("RLIMIT_CORE", 0),
        ]
        return [*rlimits, ("RLIMIT_NPROC", limits.processes)] if nproc else rlimits

    def _bootstrap(self, cfg: dict[str, Any]) -> list[str]:
        return [self.python, "-I", "-S", "-B", "-X", "utf8", "-c", _source("bootstrap"),
                json.dumps(cfg)]  # fmt: skip

    def _run_bwrap(
        self, code: str, limits: SandboxLimits, view: RuntimeView, enforcement: dict[str, Any]
    ) -> SandboxResult:
        assert self.bwrap is not None
        landlock = enforcement.get("landlock", 0)
        cfg = {
            "dir": RUN_DIR,
            "rlimits": self._rlimits(limits, nproc=True),
            "no_new_privs": False,
            "landlock": {"abi": landlock, "network": limits.network} if landlock else None,
            "seccomp": seccomp.build_filter(deny_exec=True).hex(),
            "audit_hook": self.audit_hook,
            "network": limits.network,
            "fork": True,
            "signals": True,
        }
        code_fd = _memfd("main.py", code.encode("utf-8", errors="surrogateescape"))
        filter_fd = _memfd("seccomp", seccomp.build_filter())
        status_r, status_w = os.pipe()
        env = {"HOME": RUN_DIR, "TMPDIR": RUN_DIR, "LANG": "C.UTF-8", "PATH": "/nonexistent"}
        argv = bwrap_argv(
            self.bwrap, view, disk=limits.disk, network=limits.network, code_fd=code_fd,
            seccomp_fd=filter_fd, status_fd=status_w, env=env,
        ) + self._bootstrap(cfg)  # fmt: skip
        namespace = NamespaceMembers(status_r)
        handed = [code_fd, filter_fd, status_w]  # the child's copies; ours close once it runs
        try:
            with self.pool.slot(self.queue_timeout) as slot:
                user: int | None = None
                if self.as_root:
                    uid = self.uid_base + slot
                    if all(public(path) for path in view.binds):
                        user = uid
                    else:
                        stage = {"uid": uid, "gid": uid, "expose": list(view.binds), "argv": argv}
                        argv = [
                            sys.executable,
                            "-I",
                            "-S",
                            "-c",
                            _source("stage"),
                            json.dumps(stage),
                        ]
                return self._supervise(
                    argv, limits, enforcement, namespace, handed=handed, cwd="/", env={}, uid=user
                )
        finally:
            for fd in [*handed, status_r]:
                os.close(fd)

    def _run_plain(
        self, code: str, limits: SandboxLimits, enforcement: dict[str, Any]
    ) -> SandboxResult:
        """The unsafe fallback: a plain process in a host directory (see the module docstring).

        Raises:
            ConfigError: runs take user ids of their own, which cannot reach ``root``.
        """
        separate = bool(enforcement["separate_user"])
        root = self.root or tempfile.gettempdir()
        if separate and not _reachable(root):
            raise ConfigError(
                f"the sandbox's runs cannot reach their directory root {root}: they run as "
                "user ids of their own, so it and every directory above it need o+x; choose "
                "another root or leave the default (the system's temporary directory)"
            )
        workdir = tempfile.mkdtemp(prefix="envwire-sandbox-", dir=root)
        try:
            with self.pool.slot(self.queue_timeout) as slot:
                uid = self.uid_base + slot if separate else None
                main = os.path.join(workdir, "main.py")
                with open(main, "w", encoding="utf-8", errors="surrogateescape") as file:
                    file.write(code)
                if uid is not None:
                    os.chown(workdir, uid, uid)
                    os.chown(main, uid, uid)
                landlock = enforcement["landlock"]
                cfg = {
                    "dir": workdir,
                    "rlimits": self._rlimits(limits, nproc=separate),
                    "no_new_privs": True,
                    "landlock": {"abi": landlock, "network": limits.network} if landlock else None,
                    "seccomp": seccomp.build_filter(deny_exec=True, deny_fork=not separate).hex()
                    if enforcement["seccomp"]
                    else "",
                    "audit_hook": self.audit_hook,
                    "network": limits.network,
                    "fork": separate,
                    "signals": False,
                }
                env = {
                    "HOME": workdir,
                    "TMPDIR": workdir,
                    "LANG": "C.UTF-8",
                    "PATH": "/nonexistent",
                }
                watch = UserMembers(uid)
                return self._supervise(
                    self._bootstrap(cfg), limits, enforcement, watch, directory=workdir,
                    cwd=workdir, env=env, uid=uid,
                )  # fmt: skip
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _supervise(
        self,
        argv: list[str],
        limits: SandboxLimits,
        enforcement: dict[str, Any],
        members: Members,
        *,
        directory: str | None = None,
        handed: list[int] | None = None,
        cwd: str,
        env: dict[str, str],
        uid: int | None = None,
    ) -> SandboxResult:
        """Start ``argv``, enforce the limits from outside, clean up every process it made.

        ``handed``: descriptors the child inherits; closed here (and emptied) once it started,
        so that a pipe among them ends when the child's copies do. ``cwd`` and ``env``: the
        child's directory and environment; ``uid``: the user (and group, with no
        supplementary groups) it runs as, None for this process's own.
        """
        start = time.monotonic()
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
            pass_fds=tuple(handed or ()),
            cwd=cwd,
            env=env,
            user=uid,
            group=uid,
            extra_groups=None if uid is None else [],
        )
        while handed:
            os.close(handed.pop())
        stopped: list[str] = []

        def stop(reason: str) -> None:
            if not stopped:
                stopped.append(reason)
            members.kill(process.pid)

        members.started(process.pid)
        total = watch.OutputBudget(
            limits.output_total,
            lambda: stop(f"it wrote more than {limits.output_total} bytes of output"),
        )
        assert process.stdout is not None and process.stderr is not None
        out = watch.Capture(process.stdout, limits.output, total)
        err = watch.Capture(process.stderr, limits.output, total)
        watchdog = watch.Watchdog(None, limits.memory, stop, directory=directory, disk=limits.disk)
        members.attach(watchdog)
        try:
            process.wait(timeout=limits.wall_time)
        except subprocess.TimeoutExpired:
            stop(f"it ran past the wall-time limit of {limits.wall_time:g} s")
            process.wait()
        finally:
            duration = time.monotonic() - start
            watchdog.close()
            members.kill(process.pid)  # whatever the program left behind
            members.close()
            out.finish(timeout=5)
            err.finish(timeout=5)
        return result_of(process.returncode, out, err, stopped, limits, duration, enforcement)


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _reachable(directory: str) -> bool:
    """Whether any user can pass through ``directory`` and each one above it."""
    parts = os.path.realpath(directory).split("/")
    try:
        return all(
            os.stat("/".join(parts[:i]) or "/").st_mode & 0o001 for i in range(1, len(parts) + 1)
        )
    except OSError:
        return False
