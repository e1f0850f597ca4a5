"""What a session needs from the rest of the server, as protocols: the worker its env lives
in (``envwire.runtime`` has them) and the factory that makes it, and the tap it tells of every
request (``envwire.observe`` has them). The observer that hands out taps is beside
:class:`~envwire.session.session.Session`, which it is handed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from envwire import messages as m
from envwire.errors import EnvTimeoutError, EnvwireError
from envwire.registry import EnvSpec
from envwire.tensor import NDARRAY

__all__ = ["BULK", "SessionTap", "TapCalls", "Worker", "WorkerFactory"]

log = logging.getLogger("envwire.session")


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

    Calls come in order, while the session holds its lock, from the thread running the
    request; they must be quick and must not raise (the step path waits for them). A front end
    may have a step told once its reply is sent (``Session.step``'s ``tell``): then from the
    thread that calls ``Session.tell``, or the next request's, or a reader of the counts
    (``Observability.tell_kept``), always before the session's next request.
    """

    def handled(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
        """``request`` succeeded with ``reply`` after ``seconds``.

        A tap may also have ``steady``: a callable of the same arguments that the session
        tells, in place of ``handled``, of each step that ends no episode, a one-env step or a
        batch; or None, and the tap is not told of those steps. A tap whose ``steady`` counts
        the steps and their seconds only may also have ``bulk_steady``: a callable of a list
        of seconds (the tap's during the call only), one for each step that ``steady`` would
        hear, told of up to :data:`BULK` of them at once, after their replies, in place of
        ``steady``, and before what the tap counts is read (``Observability.tell_kept``).
        And ``ended``: a callable of the same arguments and ``copies``, the copies whose
        episodes a batch of boolean flags ended (their indices, in order), that the session
        tells of such a batch in place of ``handled``, so that it asks the flags once for
        every tap. A tap whose ``steady`` and ``ended`` count the batches, their seconds,
        rewards and ended copies only may also have ``bulk_batches``: a callable of a list of
        seconds, the batches' float64 rewards (an array of a row per batch) and the copies
        they ended (``(row, copy)`` pairs, in order), told of up to :data:`BULK` batches of
        float64 rewards and boolean flags of one value per copy at once, as ``bulk_steady``
        is told of steady steps, in place of ``steady`` and ``ended``."""
        ...

    def failed(self, request: m.Request, error: EnvwireError, seconds: float) -> None:
        """``request`` raised ``error`` after ``seconds``."""
        ...

    def closed(self) -> None:
        """The session closed (called once)."""
        ...


def _told_nothing(request: m.Request, reply: m.Reply, seconds: float) -> None:
    """The ``steady`` of a tap that hears no steady step (and of no tap: never called)."""


_logical_or = np.logical_or
_BOOL = np.dtype(np.bool_)
_F8 = np.dtype(np.float64)
#: The most steady steps a session keeps for its tap's ``bulk_steady`` (see SessionTap).
BULK = 64


def _due(request: m.Request, reply: m.Reply, seconds: float) -> None:
    """The kept call of a session whose bulk of steady steps is full: told before it."""


_DUE: Any = (_due, None, None, 0.0)


class TapCalls:
    """What a session calls on its tap (None: no tap) on the step path, looked up once (see
    :class:`SessionTap`): ``steady``, ``ended`` (None: ``handled`` hears those batches) and
    ``batch``, for a session of ``num_envs`` copies (a ``vector`` session's batches)."""

    __slots__ = (
        "batch",
        "bulk",
        "bulk_batches",
        "cuts",
        "ended",
        "ends",
        "keep",
        "kept",
        "no_ends",
        "rewards",
        "seconds",
        "shape",
        "steady",
        "tap",
    )

    def __init__(self, tap: SessionTap | None, num_envs: int, *, vector: bool = False) -> None:
        self.tap = tap
        steady = None if tap is None else getattr(tap, "steady", tap.handled)
        self.steady: Callable[[m.Request, m.Reply, float], None] = steady or _told_nothing
        self.ended: Callable[[m.Request, m.Reply, float, list[int]], None] | None = getattr(
            tap, "ended", None
        )
        self.no_ends = bytes(num_envs)  # a batch's flags, as bytes, when none is set
        #: A step kept to be told later (see tell_kept): the call, request, reply, seconds.
        self.kept: tuple[Callable[..., None], m.Request, m.Reply, float] | None = None
        #: The tap's ``bulk_steady`` (None: the tap has none, and ``steady`` hears each step),
        #: and the seconds of the steady steps kept for it.
        self.bulk: Callable[[list[float]], None] | None = getattr(tap, "bulk_steady", None)
        self.seconds: list[float] = []
        #: The ``steady`` of a tap with ``bulk_steady`` (None for any other): it keeps the
        #: step's seconds, told at the next :meth:`tell_kept` once :data:`BULK` are kept; in a
        #: vector session whose tap has ``bulk_batches``, the ``batch`` that keeps batches.
        self.keep: Callable[..., None] | None = None
        #: How the session tells the tap of a batch: :meth:`_batch`, or where the tap has
        #: ``bulk_batches``, :meth:`_keep_batch` (then the ``keep``), with the rows kept for it.
        self.batch: Callable[[m.Step, m.VectorStepReply, float], None] = self._batch
        self.bulk_batches: Callable[[list[float], Any, list[tuple[int, int]]], None] | None = (
            getattr(tap, "bulk_batches", None) if vector else None
        )
        self.shape = (num_envs,)
        self.rewards: list[bytes] = []
        self.ends: list[bytes] = []
        self.cuts: list[bytes] = []
        if self.bulk_batches is not None:  # (a batch it cannot keep is told at once, in full)
            self.batch = self.keep = self._keep_batch
        elif self.bulk is not None:
            self.steady = self.keep = self._keep  # (one bound method: the session asks for it)

    def _keep(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
        kept = self.seconds
        kept.append(seconds)
        if len(kept) >= BULK:
            self.kept = _DUE

    def _keep_batch(self, request: m.Step, reply: m.VectorStepReply, seconds: float) -> None:
        """Keep a batch of float64 rewards and boolean flags, one value per copy, for the
        tap's ``bulk_batches``, as their bytes (the arrays may be the env's, reused), and its
        seconds as :meth:`_keep` keeps a step's; any other batch is told at once, after those
        kept."""
        rewards, ends, cuts = reply.rewards, reply.terminations, reply.truncations
        shape = self.shape
        if (
            type(rewards) is NDARRAY
            and type(ends) is NDARRAY
            and type(cuts) is NDARRAY
            and rewards.dtype is _F8
            and ends.dtype is _BOOL
            and cuts.dtype is _BOOL
            and rewards.shape == shape
            and ends.shape == shape
            and cuts.shape == shape
        ):
            self.rewards.append(rewards.tobytes())
            self.ends.append(ends.tobytes())
            self.cuts.append(cuts.tobytes())
            kept = self.seconds  # (_keep's, inlined: every batch)
            kept.append(seconds)
            if len(kept) >= BULK:
                self.kept = _DUE
            return
        self.tell_kept()
        self._batch(request, reply, seconds)

    def _tell_batches(self) -> None:
        """Tell ``bulk_batches`` of the batches kept: their rewards as one array, and the
        copies they ended."""
        assert self.bulk_batches is not None  # (batches are kept only for it)
        count = len(self.rewards)
        rewards = np.frombuffer(b"".join(self.rewards), _F8).reshape(count, -1)
        ends = np.frombuffer(b"".join(self.ends), _BOOL)
        cuts = np.frombuffer(b"".join(self.cuts), _BOOL)
        self.rewards.clear()
        self.ends.clear()
        self.cuts.clear()
        rows, copies = _logical_or(ends, cuts).reshape(count, -1).nonzero()
        ended = list(zip(rows.tolist(), copies.tolist(), strict=True))
        self.bulk_batches(self.seconds, rewards, ended)

    def _batch(self, request: m.Step, reply: m.VectorStepReply, seconds: float) -> None:
        """Tell the tap of a batch: by ``steady`` when no episode ended (the flags' bytes all
        zeros), by ``ended`` with the copies that ended when the flags are boolean arrays,
        else by ``handled``."""
        tap = self.tap
        assert tap is not None  # (the session tells only a tap)
        ends, cuts = reply.terminations, reply.truncations
        if type(ends) is NDARRAY and type(cuts) is NDARRAY:
            if ends.tobytes() == self.no_ends == cuts.tobytes():
                self.steady(request, reply, seconds)
                return
            ended = self.ended
            if (
                ended is not None
                and ends.dtype == _BOOL == cuts.dtype
                and ends.ndim == 1
                and ends.shape == cuts.shape
            ):
                # (the array's own nonzero and tolist: np.flatnonzero is a Python function)
                ended(request, reply, seconds, _logical_or(ends, cuts).nonzero()[0].tolist())
                return
        tap.handled(request, reply, seconds)

    def tell_kept(self) -> None:
        """Tell the tap of the steps kept for it, if any: the steady ones in bulk first. They
        are past their replies: a tap that raises is logged (``envwire.session``), and the
        session goes on."""
        kept, self.kept = self.kept, None
        if self.seconds:
            try:
                if self.rewards:
                    self._tell_batches()
                else:
                    self.bulk(self.seconds)  # type: ignore[misc]
            except Exception:
                log.exception("a session's observer failed on steps")
            self.seconds.clear()
        if kept is not None:
            told, request, reply, seconds = kept
            try:
                told(request, reply, seconds)
            except Exception:
                log.exception("a session's observer failed on a step")
