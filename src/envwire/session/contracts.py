"""What a session needs from the rest of the server, as protocols: the worker its env lives
in (``envwire.runtime`` has them) and the factory that makes it, and the tap it tells of every
request (``envwire.observe`` has them). The observer that hands out taps is beside
:class:`~envwire.session.session.Session`, which it is handed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from envwire import messages as m
from envwire.errors import EnvTimeoutError, EnvwireError
from envwire.registry import EnvSpec

__all__ = ["SessionTap", "Worker", "WorkerFactory", "told_nothing"]


class Worker(Protocol):
    """What a session needs from wherever its env lives (``envwire.runtime`` has the workers)."""

    #: Called (from another thread) when an env call hangs past its timeout.
    on_hang: Callable[[EnvTimeoutError], None] | None

    def call(self, method: str, *args: object, timeout: float | None) -> Any:
        """Run ``host.method(*args)``; raise what the host raised, or a timeout/crash error.

        ``timeout`` is the seconds the call may take; None waits as long as the env takes
        (an env whose spec sets no deadline).

        Returns:
            What the host method returned (:class:`~envwire.runtime.EnvHost` has their
            types): its type depends on ``method``, so the session, which named the method,
            says what it expects where it takes the result.
        """
        ...

    def close(self) -> None:
        """Free the env (and the process, if any). Never raises."""
        ...

    # A worker may also offer ``call_step(action, *, timeout)``: ``call("step", action,
    # timeout=timeout)`` without the dispatch by name (the inline worker and a vector group
    # over worker processes do); the session then steps through it.


class WorkerFactory(Protocol):
    """Makes the worker of a session: ``num_envs`` copies of ``spec``; with an autoreset
    ``mode``, as a vector env, split over up to ``workers`` worker processes."""

    def __call__(
        self, spec: EnvSpec, num_envs: int = 1, mode: str | None = None, workers: int = 1
    ) -> Worker: ...


class SessionTap(Protocol):
    """What an observer attaches to one session: told of every request the session carries out.

    Calls come from the thread running the request, in order, while the session holds its
    lock; they must be quick and must not raise (the step path waits for them).
    """

    def handled(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
        """``request`` succeeded with ``reply`` after ``seconds``. (A tap may also have
        ``steady``: a callable of the same arguments that the session tells, in place of
        ``handled``, of each step that ends no episode, a one-env step or a batch; or None,
        and the tap is not told of those steps.)"""
        ...

    def failed(self, request: m.Request, error: EnvwireError, seconds: float) -> None:
        """``request`` raised ``error`` after ``seconds``."""
        ...

    def closed(self) -> None:
        """The session closed (called once)."""
        ...


def told_nothing(request: m.Request, reply: m.Reply, seconds: float) -> None:
    """A session's ``steady`` before it has a tap (never called: there is no tap to tell)."""
