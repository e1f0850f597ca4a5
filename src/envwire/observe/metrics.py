"""Prometheus metrics of one server, kept by ``prometheus-client``.

Every metric's labels are bounded: front end names, env ids of the catalog, request kinds,
error codes and crash reasons; never session ids, peers or the env names clients send. The
step path's metrics (steps, episodes, requests and their durations) are counted per session in
plain attributes and summed at scrape time (:mod:`envwire.observe.hot`).
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, ProcessCollector, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from envwire import messages as m
from envwire.errors import EnvCrashedError, EnvError, EnvTimeoutError, EnvwireError
from envwire.observe.hot import BUCKETS, HotCollector, SessionCounts
from envwire.session import Session
from envwire.tensor import NDARRAY

__all__ = ["CONTENT_TYPE", "Metrics", "crash_reason", "ended_copies", "request_kind"]

#: The ``Content-Type`` of :meth:`Metrics.render`'s text.
CONTENT_TYPE = CONTENT_TYPE_LATEST

_KINDS: dict[type, str] = {
    m.Reset: "reset",
    m.Step: "step",
    m.GetSpace: "get_space",
    m.SampleAction: "sample_action",
    m.Render: "render",
    m.Monitor: "monitor",
    m.Close: "close",
}


def request_kind(request: m.Request) -> str:
    """The ``kind`` label of a request ('step', 'reset', ...)."""
    return _KINDS.get(type(request), "other")


def crash_reason(error: EnvwireError) -> str | None:
    """The ``reason`` label of an env failure ('exception', 'timeout', 'crash'), or None when
    the error is not the env's (a bad action, a request out of turn)."""
    if isinstance(error, EnvCrashedError):
        return "crash"
    if isinstance(error, EnvTimeoutError):
        return "timeout"
    if isinstance(error, EnvError):
        return "exception"
    return None


_BOOL = np.dtype(np.bool_)


def _any_ended(reply: m.VectorStepReply) -> bool:
    """Whether a vector step ends any episode.

    Nearly every batch ends none, and this is asked on every one: boolean arrays are read as
    their bytes (one C call each, where ``logical_or`` and ``any`` cost a ufunc each).
    """
    ends, cuts = reply.terminations, reply.truncations
    if type(ends) is NDARRAY and type(cuts) is NDARRAY and ends.dtype == cuts.dtype == _BOOL:
        return bool(ends.tobytes().strip(b"\0") or cuts.tobytes().strip(b"\0"))
    return bool(np.any(ends) or np.any(cuts))


def ended_copies(reply: m.VectorStepReply) -> list[int]:
    """The copies whose episodes a vector step ends, in copy order (nearly always none: then
    :func:`_any_ended`'s bytes tell it without a ufunc)."""
    if not _any_ended(reply):
        return []
    # (the array's own nonzero() and tolist(): np.flatnonzero is a Python function)
    done = np.logical_or(reply.terminations, reply.truncations).ravel()
    ended: list[int] = done.nonzero()[0].tolist()
    return ended


class Metrics:
    """The server's metrics in a registry of their own (several servers can share a process).

    It is a :class:`~envwire.session.SessionObserver`: give it (or an observer that forwards to
    it) to the session table and the arena.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        self.hot = HotCollector()
        self.registry.register(self.hot)
        r = self.registry
        fe_env = ["front_end", "env"]
        self.sessions = Gauge("envwire_sessions", "Sessions open now.", fe_env, registry=r)
        self.opened_total = Counter(
            "envwire_sessions_opened", "Sessions opened.", fe_env, registry=r
        )
        self.errors = Counter(
            "envwire_errors", "Errors answered to clients.", ["front_end", "code"], registry=r
        )
        self.crashes = Counter(
            "envwire_env_crashes",
            "Env failures: the env raised (exception), hung (timeout) or its worker died (crash).",
            ["env", "reason"],
            registry=r,
        )
        self.arena_actions = Counter(
            "envwire_arena_actions", "Actions agents sent to the arena.", ["env"], registry=r
        )
        self.recorded = Counter(
            "envwire_recorded_episodes", "Episodes written to datasets.", ["env"], registry=r
        )
        self.dropped = Counter(
            "envwire_recording_dropped_episodes",
            "Episodes not recorded: the writer's queue was full (queue_full) or made no room in "
            "time (wait_timeout), the disk budget "
            "was spent (disk_full), the episode was too long (too_long), its env failed "
            "(env_failed), Minari cannot store its spaces (unsupported), or writing failed "
            "(error).",
            ["env", "reason"],
            registry=r,
        )

    # -- SessionObserver ---------------------------------------------------------------------

    def opened(self, session: Session) -> _MetricsTap:
        """Count the session open; its tap counts its requests."""
        return _MetricsTap(self, session)

    def refused(self, front_end: str, env_id: str, error: EnvwireError) -> None:
        """Count a session the server could not open (the env id is a label only when the env
        itself failed, which means it is in the catalog)."""
        self.error(front_end, error)
        reason = crash_reason(error)
        if reason is not None:
            self.crashes.labels(env_id, reason).inc()

    # -- what front ends report ----------------------------------------------------------------

    def error(self, front_end: str, error: EnvwireError) -> None:
        """Count an error a front end answered, unless it was counted already (an error a
        session raised is counted by its tap)."""
        if not error.observed:
            error.observed = True
            self.errors.labels(front_end, error.code).inc()

    def arena_acted(self, env: str, actions: int) -> None:
        """Count actions sent to an arena env."""
        self.arena_actions.labels(env).inc(actions)

    def recorded_one(self, env: str) -> None:
        """Count an episode written to a dataset."""
        self.recorded.labels(env).inc()

    def dropped_one(self, env: str, reason: str) -> None:
        """Count an episode the recorder dropped."""
        self.dropped.labels(env, reason).inc()

    def render(self) -> bytes:
        """Every metric in Prometheus' text exposition format."""
        return generate_latest(self.registry)


class _MetricsTap:
    """One session's counts (see :mod:`envwire.observe.hot`)."""

    __slots__ = ("counts", "metrics", "num_envs", "open_gauge", "step")

    def __init__(self, metrics: Metrics, session: Session) -> None:
        self.metrics = metrics
        self.counts = SessionCounts(session.front_end, session.env_id)
        self.step = self.counts.kind("step")
        self.num_envs = session.num_envs
        self.open_gauge = metrics.sessions.labels(session.front_end, session.env_id)
        self.open_gauge.inc()
        metrics.opened_total.labels(session.front_end, session.env_id).inc()
        metrics.hot.add(self.counts)

    def handled(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
        if type(reply) is m.StepReply or type(reply) is m.VectorStepReply:  # the hot path, inlined
            step = self.step
            step.count += 1
            step.seconds += seconds
            step.buckets[bisect_left(BUCKETS, seconds)] += 1
            counts = self.counts
            if isinstance(reply, m.StepReply):
                counts.steps += 1
                if reply.terminated or reply.truncated:
                    counts.episodes += 1
            else:
                counts.steps += self.num_envs
                counts.episodes += len(ended_copies(reply))
            return
        self.counts.kind(request_kind(request)).observe(seconds)

    def steady(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
        """A step that ends no episode (see ``SessionTap``): ``handled``'s counts without
        asking whether it ended one."""
        step = self.step
        step.count += 1
        step.seconds += seconds
        step.buckets[bisect_left(BUCKETS, seconds)] += 1
        self.counts.steps += self.num_envs  # (a one-env session's is 1)

    def bulk_steady(self, seconds: list[float]) -> None:
        """Steps that ended no episode, told at once (see ``SessionTap``): ``steady``'s
        counts of each."""
        step, buckets = self.step, self.step.buckets
        step.count += len(seconds)
        for each in seconds:
            step.seconds += each
            buckets[bisect_left(BUCKETS, each)] += 1
        self.counts.steps += self.num_envs * len(seconds)

    def bulk_batches(
        self, seconds: list[float], rewards: object, ended: list[tuple[int, int]]
    ) -> None:
        """Batches told at once (see ``SessionTap``): ``steady``'s counts of each, and the
        episodes they ended."""
        self.bulk_steady(seconds)
        self.counts.episodes += len(ended)

    def ended(self, request: m.Request, reply: m.Reply, seconds: float, copies: list[int]) -> None:
        """A batch that ended the episodes of ``copies`` (see ``SessionTap``)."""
        self.steady(request, reply, seconds)
        self.counts.episodes += len(copies)

    def failed(self, request: m.Request, error: EnvwireError, seconds: float) -> None:
        self.counts.kind(request_kind(request)).observe(seconds)
        metrics = self.metrics
        metrics.error(self.counts.front_end, error)
        reason = crash_reason(error)
        if reason is not None:
            metrics.crashes.labels(self.counts.env, reason).inc()

    def closed(self) -> None:
        self.open_gauge.dec()
        self.metrics.hot.retire(self.counts)
