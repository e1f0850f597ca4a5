"""Workers: where a session's env host lives, and how calls reach it with a timeout.

- :class:`InlineWorker` calls the host in the calling thread: no IPC, the fastest path, for
  trusted cheap envs. A call that overruns its timeout is reported by the :class:`Watchdog`
  through the worker's ``on_hang`` callback (the front end answers the client and drops the
  connection; the stuck thread is abandoned), so it stalls only its own connection.
- :class:`ProcessWorker` runs the host in a child process and talks to it over a pipe. A call
  that overruns kills the child (:class:`EnvTimeoutError`); a child that dies (segfault,
  ``os._exit``) is reported as :class:`EnvCrashedError`. The server goes on either way.
- Envs with ``ray`` isolation live in Ray actors (:mod:`envwire.runtime.ray`), behind the same
  interface; :func:`make_worker` hands them to a :class:`RayRuntime`.
"""

from __future__ import annotations

import functools
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

from envwire.errors import EnvCrashedError, EnvError, EnvTimeoutError, EnvwireError
from envwire.registry import EnvSpec
from envwire.runtime.hosts import EnvHost
from envwire.runtime.ray.cluster import RayRuntime
from envwire.runtime.vector import VectorGroup, VectorHost, split_sizes
from envwire.session import Worker
from envwire.watchdog import Watchdog

__all__ = ["WATCHDOG", "InlineWorker", "ProcessWorker", "make_host", "make_worker"]


#: The watchdog of every inline worker in this process.
WATCHDOG = Watchdog()


class InlineWorker:
    """The host in this process, called in the caller's thread."""

    def __init__(self, spec: EnvSpec, num_envs: int = 1, mode: str | None = None) -> None:
        self.spec = spec
        self.host = make_host(spec, num_envs, mode)
        self.on_hang: Callable[[EnvTimeoutError], None] | None = None
        self.hung = False
        self.deadline: float | None = None
        self._method = ""
        self._timeout = 0.0
        WATCHDOG.watch(self)

    def call(self, method: str, *args: Any, timeout: float) -> Any:
        if self.hung:
            raise EnvTimeoutError(f"{self.spec.id}: the env hung earlier and was abandoned")
        self._method, self._timeout = method, timeout
        self.deadline = time.monotonic() + timeout
        try:
            return self.host.call(method, args)
        finally:
            self.deadline = None

    def overdue(self, now: float) -> bool:
        """Whether the call in progress has run past its deadline."""
        return self.deadline is not None and self.deadline < now

    def expire(self) -> None:
        """Called by the watchdog when the current call is late: abandon the env."""
        self.deadline = None
        self.hung = True
        error = EnvTimeoutError(
            f"{self.spec.id}: {self._method} did not return within {self._timeout:g} s; "
            "the env was abandoned"
        )
        if self.on_hang is not None:
            self.on_hang(error)

    def close(self) -> None:
        if not self.hung:
            self.host.close()


def make_host(spec: EnvSpec, num_envs: int = 1, mode: str | None = None) -> EnvHost | VectorHost:
    """An :class:`EnvHost` (one env) or, with an autoreset ``mode``, a ``VectorHost``."""
    if mode is None:
        return EnvHost(spec, num_envs)
    return VectorHost(spec, num_envs, mode)


def _child_main(
    conn: multiprocessing.connection.Connection, spec: EnvSpec, num_envs: int, mode: str | None
) -> None:
    """The worker process: make the host, then answer calls until told to stop or EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides when workers end
    try:
        host = make_host(spec, num_envs, mode)
    except BaseException as exc:
        conn.send(("err", _portable(exc)))
        return
    conn.send(("ok", None))
    while True:
        try:
            method, args = conn.recv()
        except (EOFError, OSError):
            host.close()
            return
        try:
            conn.send(("ok", host.call(method, args)))
        except BaseException as exc:
            conn.send(("err", _portable(exc)))
        if method == "close":
            return


def _portable(exc: BaseException) -> EnvwireError:
    """An exception that survives pickling across the pipe (envwire errors pickle as is)."""
    if isinstance(exc, EnvwireError):
        return exc
    return EnvError(f"{type(exc).__name__}: {exc}")


def _context() -> multiprocessing.context.BaseContext:
    # forkserver: a clean parent (no threads) forks each worker, with the heavy imports done.
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["envwire.runtime.workers", "gymnasium", "numpy"])
        return ctx
    return multiprocessing.get_context("spawn")


class ProcessWorker:
    """The host in a child process; crashes and hangs cost only this worker.

    Raises (from the constructor): what making the env raised, or :class:`EnvTimeoutError` /
    :class:`EnvCrashedError` when the child does not come up.
    """

    def __init__(self, spec: EnvSpec, num_envs: int = 1, mode: str | None = None) -> None:
        self.spec = spec
        self.on_hang: Callable[[EnvTimeoutError], None] | None = None
        ctx = _context()
        self._conn, child_conn = ctx.Pipe()
        self._process: Any = ctx.Process(  # type: ignore[attr-defined]
            target=_child_main,
            args=(child_conn, spec, num_envs, mode),
            daemon=True,
            name=f"envwire-worker[{spec.id}]",
        )
        self._process.start()
        child_conn.close()
        self._lock = threading.Lock()
        try:
            self._receive("make", spec.make_timeout)
        except BaseException:
            self._kill()
            raise

    def call(self, method: str, *args: Any, timeout: float) -> Any:
        with self._lock:
            self.send(method, *args)
            return self._receive(method, timeout)

    def send(self, method: str, *args: Any) -> None:
        """Start a call without waiting (pair with :meth:`finish`; used to fan out)."""
        if self._conn.closed:
            raise EnvCrashedError(f"{self.spec.id}: the env's worker process is gone")
        try:
            self._conn.send((method, args))
        except (OSError, ValueError):
            raise self._crashed(method) from None

    def finish(self, method: str, timeout: float) -> Any:
        """The result of the call :meth:`send` started."""
        return self._receive(method, timeout)

    def _receive(self, method: str, timeout: float) -> Any:
        if not self._conn.poll(timeout):
            self._kill()
            raise EnvTimeoutError(
                f"{self.spec.id}: {method} did not return within {timeout:g} s; "
                "its worker process was killed"
            )
        try:
            status, value = self._conn.recv()
        except (EOFError, OSError):
            raise self._crashed(method) from None
        if status == "err":
            raise value
        return value

    def _crashed(self, method: str) -> EnvCrashedError:
        self._process.join(timeout=5)
        code = self._process.exitcode
        self._kill()
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        return EnvCrashedError(f"{self.spec.id}: the env's worker process {how} during {method}")

    def _kill(self) -> None:
        self._conn.close()
        if self._process.is_alive():
            self._process.kill()
        self._process.join(timeout=5)

    def close(self) -> None:
        if self._conn.closed:
            return
        try:
            with self._lock:
                self._conn.send(("close", ()))
                self._conn.poll(2.0)
        except (OSError, ValueError):
            pass
        self._kill()


def make_worker(
    spec: EnvSpec,
    num_envs: int = 1,
    mode: str | None = None,
    workers: int = 1,
    *,
    ray: RayRuntime | None = None,
) -> Worker:
    """The worker ``spec.resolved_isolation`` asks for.

    With an autoreset ``mode``, the worker hosts ``num_envs`` copies as a vector env; with
    ``workers`` > 1 they are split over that many worker processes stepped concurrently (at
    most one per core). Envs with ``ray`` isolation go to Ray actors made by ``ray`` (the
    server's :class:`RayRuntime`; None: one on ``RAY_ADDRESS``, else a local Ray).
    """
    if spec.resolved_isolation == "ray":
        return (ray or _default_ray()).make_worker(spec, num_envs, mode, workers)
    workers = min(workers, os.cpu_count() or 1)
    if mode is not None and workers > 1 and num_envs > 1:
        sizes = split_sizes(num_envs, workers)
        started: list[ProcessWorker] = []
        try:
            for size in sizes:
                started.append(ProcessWorker(spec, size, mode))
        except BaseException:
            for worker in started:
                worker.close()
            raise
        return VectorGroup(started, sizes)
    if spec.resolved_isolation == "process":
        return ProcessWorker(spec, num_envs, mode)
    return InlineWorker(spec, num_envs, mode)


@functools.cache
def _default_ray() -> RayRuntime:
    """The Ray runtime of sessions made without a server's (one per process)."""
    return RayRuntime()
