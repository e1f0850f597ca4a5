"""Inline workers: the env host in the server process, called in the caller's thread.

No IPC: the fastest path, for trusted cheap envs. A call that overruns its timeout is reported
by the :class:`~envwire.watchdog.Watchdog` through the worker's ``on_hang`` callback (the front
end answers the client and drops the connection; the stuck thread is abandoned), so it stalls
only its own connection. A crash of the env (a segfault) takes the server with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from envwire.errors import EnvTimeoutError
from envwire.registry import EnvSpec
from envwire.runtime.hosts import guarded, make_host
from envwire.watchdog import Watchdog

__all__ = ["WATCHDOG", "InlineWorker"]


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
        try:
            return guarded(self.spec.id, "step", self.host.step, action)
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
