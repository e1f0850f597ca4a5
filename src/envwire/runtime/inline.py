"""Inline workers: the env host in the server process, called in the caller's thread.

No IPC: the fastest path, for trusted cheap envs. A call that overruns its timeout is reported
by the :class:`~envwire.watchdog.Watchdog` through the worker's ``on_hang`` callback (the front
end answers the client and drops the connection; the stuck thread is abandoned), so it stalls
only its own connection. A crash of the env (a segfault) takes the server with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from envwire.errors import EnvError, EnvTimeoutError, EnvwireError
from envwire.registry import EnvSpec
from envwire.runtime.hosts import EnvHost, VectorHost, make_host
from envwire.watchdog import Watchdog

__all__ = ["WATCHDOG", "InlineSlice", "InlineWorker"]


#: The watchdog of every inline worker in this process.
WATCHDOG = Watchdog()


class InlineWorker:
    """The host in this process, called in the caller's thread."""

    def __init__(self, spec: EnvSpec, num_envs: int = 1, mode: str | None = None) -> None:
        self.spec = spec
        self.host = make_host(spec, num_envs, mode)
        #: A one-env host's env, which call_step steps itself while no monitor watches it
        self._env = self.host.env if isinstance(self.host, EnvHost) else None
        #: What call_step calls otherwise: a vector host's vector env's own step (all that
        #: ``VectorHost.step`` does), else the host's step
        self._step = self.host.vector.step if isinstance(self.host, VectorHost) else self.host.step
        self.on_hang: Callable[[EnvTimeoutError], None] | None = None
        self.hung = False
        self.deadline: float | None = None
        self._method = ""
        self._timeout: float | None = None
        WATCHDOG.watch(self)

    def call(self, method: str, *args: object, timeout: float | None) -> object:
        if self.hung:
            raise EnvTimeoutError(f"{self.spec.id}: the env hung earlier and was abandoned")
        self._method, self._timeout = method, timeout
        # No timeout, no deadline: the watchdog never finds the call overdue.
        self.deadline = None if timeout is None else time.monotonic() + timeout
        try:
            return self.host.call(method, args)
        finally:
            self.deadline = None

    def call_step(self, action: object, *, timeout: float | None) -> object:
        """``call("step", action, timeout=timeout)``, the host's step called directly rather
        than found by name: the one call a session makes on every step.

        Raises:
            EnvwireError: as :meth:`call`.
        """
        if self.hung:
            raise EnvTimeoutError(f"{self.spec.id}: the env hung earlier and was abandoned")
        self._method, self._timeout = "step", timeout
        self.deadline = None if timeout is None else time.monotonic() + timeout
        try:  # guarded(), inlined: the one call of every step
            env = self._env
            if env is not None and self.host.monitor_ is None:  # type: ignore[union-attr]
                # EnvHost.step, inlined
                obs, reward, terminated, truncated, info = env.step(action)
                return obs, float(reward), bool(terminated), bool(truncated), info
            return self._step(action)
        except EnvwireError:
            raise
        except Exception as exc:
            message = f"{self.spec.id}: step raised {type(exc).__name__}: {exc}"
            raise EnvError.wrapping(message, exc) from exc
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


class InlineSlice:
    """One slice of a :class:`~envwire.runtime.vector.VectorGroup` stepped in this process, in
    the caller's thread, while the group's worker processes step the others.

    :meth:`send` only keeps the call; :meth:`finish` makes it, with the caller's timeout watched
    as an :class:`InlineWorker`'s is. The group finishes its slices last to first and puts this
    one last, so the processes' calls are already under way while the caller's thread steps it:
    a group of K slices uses K cores with K - 1 processes, and one hand-off to a process less.
    """

    def __init__(self, spec: EnvSpec, num_envs: int, mode: str) -> None:
        self.worker = InlineWorker(spec, num_envs, mode)
        self._pending: tuple[str, tuple[object, ...]] | None = None

    def send(self, method: str, *args: object) -> None:
        self._pending = (method, args)

    def finish(self, method: str, timeout: float | None) -> object:
        """The result of the call :meth:`send` kept, made now.

        Raises:
            EnvwireError: as :meth:`InlineWorker.call`.
            RuntimeError: no call of ``method`` was sent (a bug of the group).
        """
        pending, self._pending = self._pending, None
        if pending is None or pending[0] != method:
            raise RuntimeError(f"finish({method!r}) without a send of it")
        return self.worker.call(method, *pending[1], timeout=timeout)

    def close(self) -> None:
        self.worker.close()
