"""Pooled workers: a few worker processes (by default one per core), each hosting the envs of
many sessions.

``process`` isolation gives every session an interpreter of its own: a thousand sessions are a
thousand processes. A :class:`WorkerPool` keeps ``size`` of them and places each new session's
env in the one hosting the fewest sessions; :meth:`WorkerPool.worker` returns a
:class:`PooledWorker`, which sessions use like any other worker.

**How calls travel.** One pipe per worker process. A request is a header (a call id and the
slot, which is the session's env inside that process) followed by the pickled method and
arguments; the reply carries the call id back. The process answers one request at a time, in
the order they came: a CPU-bound env gains nothing from threads inside one interpreter (the
GIL runs one at a time, and switching costs; ``benchmarks/bench_pool.py`` measures both), so
the pool spreads sessions over processes instead. Many sessions' calls are in flight on one
pipe at once, and since the process keeps their order, the parent knows which call it is
running: the oldest unanswered one. One caller at a time reads the replies, settling the
others' calls as it goes, until its own has come, then hands the reading to another waiting
caller (:class:`~envwire.runtime.poolprocess.PoolProcess` says how): a session alone on its
process gets its reply without a hand-off between threads.

**Placement** is by sessions hosted, not by recent CPU: the count is exact and free to keep,
and over a session's life (thousands of steps) it is the load; a CPU sample would chase bursts
that are over before the next session arrives. A new process is started while the pool has
fewer than ``size`` and every live one hosts at least one session, so a pool that serves one
session has one process.

**Failures.** An env that raises fails only its own call (:class:`~envwire.errors.EnvError`).
A process that dies (segfault, ``os._exit``) ends every session it hosted: each is told
:class:`~envwire.errors.EnvCrashedError` naming the signal, at once for calls in flight, else
at its next call. A hang is the running call past its own timeout, counted from when the
process started it (a call queued behind others is not late): the process is killed, that
call's session gets :class:`~envwire.errors.EnvTimeoutError`, and the others it hosted get
``EnvCrashedError`` saying which env hung (their env is gone, but their own call did not
overrun). Either way the dead process leaves the pool, a fresh one is started for the next
session placed, and a Reset of a broken session makes its env anew there.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from envwire.errors import (
    ConfigError,
    EnvCrashedError,
    EnvError,
    EnvTimeoutError,
    InvalidArgumentError,
)
from envwire.registry import EnvSpec
from envwire.runtime.hosts import HOST_METHODS
from envwire.runtime.poolprocess import STOP_GRACE, PoolProcess

__all__ = ["PooledWorker", "WorkerPool"]


class PooledWorker:
    """One session's env, in a slot of a pool process (made by :meth:`WorkerPool.worker`)."""

    def __init__(self, spec: EnvSpec, process: PoolProcess, slot: int) -> None:
        self.spec = spec
        self.on_hang: Callable[[EnvTimeoutError], None] | None = None  # the caller hears itself
        self.slot = slot
        self._process = process
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The worker process hosting the env."""
        return self._process.pid

    def call(self, method: str, *args: object, timeout: float | None) -> Any:
        if method not in HOST_METHODS:
            raise InvalidArgumentError(f"unknown host method {method!r}")
        if self._closed:
            raise EnvCrashedError(f"{self.spec.id}: the env was closed")
        return self._process.call(self.slot, self.spec.id, method, args, timeout)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._process.free(self.slot, self.spec.resolved_step_timeout)


class WorkerPool:
    """Worker processes shared by the sessions of envs with ``pool`` isolation.

    Args:
        size: most worker processes at once; 0 means one per core (``os.cpu_count()``).
        protected: files the worker processes must not reach (the token file, the TLS key);
            each process gives up what it does not need first (:mod:`.confine`).

    Raises (from the constructor):
        ConfigError: a negative size.
    """

    def __init__(self, size: int = 0, *, protected: tuple[str, ...] = ()) -> None:
        if size < 0:
            raise ConfigError(f"pool_workers must be 0 (one per core) or more, got {size}")
        self.size = size or os.cpu_count() or 1
        self.protected = protected
        self._processes: list[PoolProcess] = []
        self._started = itertools.count()
        self._slots = itertools.count(1)
        self._lock = threading.Lock()
        self._closed = False

    def worker(self, spec: EnvSpec, num_envs: int = 1, mode: str | None = None) -> PooledWorker:
        """A session's env: ``num_envs`` copies of ``spec`` (a vector env with an autoreset
        ``mode``), made in the least loaded worker process.

        Raises:
            EnvwireError: what making the env raised; EnvTimeoutError / EnvCrashedError when
                making it hung or killed the process (which ends that process's other
                sessions too); EnvError when the pool is closed or cannot start a process.
        """
        process, slot = self._place(spec)
        try:
            process.call(slot, spec.id, "make", (spec, num_envs, mode), spec.make_timeout)
        except BaseException:
            process.free(slot, spec.resolved_step_timeout)
            raise
        return PooledWorker(spec, process, slot)

    def _place(self, spec: EnvSpec) -> tuple[PoolProcess, int]:
        with self._lock:
            if self._closed:
                raise EnvError(f"{spec.id}: the worker pool is closed (the server is stopping)")
            live = [p for p in self._processes if p.lost is None]
            best = min(live, key=lambda p: p.load, default=None)
            if best is None or (best.load > 0 and len(live) < self.size):
                # Starting a process (a fork of the fork server) takes milliseconds, under the
                # lock: it happens at most `size` times, plus once per process lost.
                try:
                    best = PoolProcess(next(self._started), self._exited, self.protected)
                except OSError as exc:  # out of processes, memory or file descriptors
                    raise EnvError(f"{spec.id}: cannot start a pool worker process: {exc}") from exc
                live.append(best)
            self._processes = live
            slot = next(self._slots)
            best.host(slot, spec.id)
        return best, slot

    def _exited(self, process: PoolProcess) -> None:
        with self._lock:
            if process in self._processes:
                self._processes.remove(process)

    def loads(self) -> dict[int, int]:
        """Sessions hosted by each live worker process, by process id."""
        with self._lock:
            return {p.pid or 0: p.load for p in self._processes if p.lost is None}

    def counts(self) -> dict[int, int]:
        """Envs each live worker process holds, as it says itself, by process id (waits for
        the requests already sent to each)."""
        with self._lock:
            live = [p for p in self._processes if p.lost is None]
        return {p.pid or 0: p.count() for p in live}

    def close(self) -> None:
        """Close every env and end every worker process (idempotent; never raises).

        Each process finishes the requests already sent, closes its envs and exits; one that
        is not done within :data:`STOP_GRACE` seconds is killed.
        """
        with self._lock:
            self._closed = True
            processes, self._processes = self._processes, []
        for process in processes:
            process.stop()
        deadline = time.monotonic() + STOP_GRACE
        for process in processes:
            process.process.join(max(0.0, deadline - time.monotonic()))
            if process.process.is_alive():
                process.kill()
                process.process.join(5)
