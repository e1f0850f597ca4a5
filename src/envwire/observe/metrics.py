"""Prometheus metrics of one server, kept by ``prometheus-client``.

Every metric's labels are bounded: front end names, env ids of the catalog, request kinds,
error codes and crash reasons; never session ids, peers or the env names clients send. A
session binds its label children once when it opens, so a step costs a few counter increments
and one histogram observation, not label lookups.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from envwire import messages as m
from envwire.errors import EnvCrashedError, EnvError, EnvTimeoutError, EnvwireError
from envwire.session import Session

__all__ = ["CONTENT_TYPE", "Metrics", "crash_reason", "request_kind"]

#: The ``Content-Type`` of :meth:`Metrics.render`'s text.
CONTENT_TYPE = CONTENT_TYPE_LATEST

#: Request-duration buckets, in seconds: an inline step takes microseconds, a worker process
#: round trip a fraction of a millisecond, a slow env seconds.
_BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0, 30.0,
)  # fmt: skip

_KINDS: dict[type, str] = {
    m.Reset: "reset",
    m.Step: "step",
    m.GetSpace: "get_space",
    m.SampleAction: "sample_action",
    m.Render: "render",
    m.Monitor: "monitor",
    m.Upload: "upload",
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


def episodes_ended(reply: m.Reply) -> int:
    """How many episodes a step reply ends (a vector step may end several)."""
    if isinstance(reply, m.StepReply):
        return int(bool(reply.terminated or reply.truncated))
    if isinstance(reply, m.VectorStepReply):
        return int(np.count_nonzero(np.logical_or(reply.terminations, reply.truncations)))
    return 0


class Metrics:
    """The server's metrics in a registry of their own (several servers can share a process).

    It is a :class:`~envwire.session.SessionObserver`: give it (or an observer that forwards to
    it) to the session table and the arena.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        r = self.registry
        fe_env = ["front_end", "env"]
        self.sessions = Gauge("envwire_sessions", "Sessions open now.", fe_env, registry=r)
        self.opened_total = Counter(
            "envwire_sessions_opened", "Sessions opened.", fe_env, registry=r
        )
        self.steps = Counter(
            "envwire_steps", "Env steps (a vector step of N copies counts N).", fe_env, registry=r
        )
        self.requests = Counter(
            "envwire_requests", "Session requests carried out.", ["front_end", "kind"], registry=r
        )
        self.request_seconds = Histogram(
            "envwire_request_seconds",
            "Seconds a session request took, env call included.",
            ["front_end", "kind"],
            buckets=_BUCKETS,
            registry=r,
        )
        self.episodes = Counter("envwire_episodes", "Episodes ended.", ["env"], registry=r)
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
            "Episodes not recorded: the writer's queue was full (queue_full), the disk budget "
            "was spent (disk_full), or writing failed (error).",
            ["env", "reason"],
            registry=r,
        )
        self._lock = threading.Lock()

    # -- SessionObserver ---------------------------------------------------------------------

    def opened(self, session: Session) -> _MetricsTap:
        """Count the session open; its tap counts its requests."""
        return _MetricsTap(self, session)

    def refused(self, front_end: str, env_id: str, error: EnvwireError) -> None:
        """Count a session the server could not open (``env_id`` is not a label: clients
        choose it)."""
        self.error(front_end, error.code)
        reason = crash_reason(error)
        if reason is not None:
            self.crashes.labels("", reason).inc()

    # -- what front ends report ----------------------------------------------------------------

    def error(self, front_end: str, code: str) -> None:
        """Count an error a front end answered outside any session's requests."""
        self.errors.labels(front_end, code).inc()

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
    """One session's bound label children."""

    __slots__ = (
        "env",
        "episodes",
        "front_end",
        "metrics",
        "num_envs",
        "open_gauge",
        "step_requests",
        "step_seconds",
        "steps",
    )

    def __init__(self, metrics: Metrics, session: Session) -> None:
        self.metrics = metrics
        self.front_end = front_end = session.front_end
        self.env = env = session.env_id
        self.num_envs = session.num_envs
        self.steps = metrics.steps.labels(front_end, env)
        self.step_requests = metrics.requests.labels(front_end, "step")
        self.step_seconds = metrics.request_seconds.labels(front_end, "step")
        self.episodes = metrics.episodes.labels(env)
        self.open_gauge: Any = metrics.sessions.labels(front_end, env)
        self.open_gauge.inc()
        metrics.opened_total.labels(front_end, env).inc()

    def handled(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
        if type(request) is m.Step:
            self.step_requests.inc()
            self.step_seconds.observe(seconds)
            if type(reply) is m.StepReply:
                self.steps.inc()
                if reply.terminated or reply.truncated:
                    self.episodes.inc()
                return
            self.steps.inc(self.num_envs)
            ended = episodes_ended(reply)
            if ended:
                self.episodes.inc(ended)
            return
        kind = request_kind(request)
        self.metrics.requests.labels(self.front_end, kind).inc()
        self.metrics.request_seconds.labels(self.front_end, kind).observe(seconds)

    def failed(self, request: m.Request, error: EnvwireError, seconds: float) -> None:
        kind = request_kind(request)
        self.metrics.requests.labels(self.front_end, kind).inc()
        self.metrics.request_seconds.labels(self.front_end, kind).observe(seconds)
        self.metrics.errors.labels(self.front_end, error.code).inc()
        reason = crash_reason(error)
        if reason is not None:
            self.metrics.crashes.labels(self.env, reason).inc()

    def closed(self) -> None:
        self.open_gauge.dec()
