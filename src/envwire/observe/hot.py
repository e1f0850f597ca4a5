"""The step path's metrics, counted in plain attributes and handed to prometheus-client at
scrape time.

A step would otherwise pay for three locked counter increments and a locked histogram
observation. Instead each session's tap keeps its own counts (a session carries out one request
at a time, so they need no lock), and :class:`HotCollector`, a prometheus-client custom
collector, sums the open sessions' counts and those of closed sessions when Prometheus scrapes.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

__all__ = ["BUCKETS", "HotCollector", "KindCounts", "SessionCounts"]

#: Request-duration buckets, in seconds: an inline step takes microseconds, a worker process
#: round trip a fraction of a millisecond, a slow env seconds.
BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


class KindCounts:
    """Requests of one kind: how many, their total seconds, and a count per bucket (the last
    one is +Inf)."""

    __slots__ = ("buckets", "count", "seconds")

    def __init__(self) -> None:
        self.count = 0
        self.seconds = 0.0
        self.buckets = [0] * (len(BUCKETS) + 1)

    def observe(self, seconds: float) -> None:
        """Count one request that took ``seconds``."""
        self.count += 1
        self.seconds += seconds
        self.buckets[bisect_left(BUCKETS, seconds)] += 1

    def add(self, other: KindCounts) -> None:
        """Add ``other``'s counts to these."""
        self.count += other.count
        self.seconds += other.seconds
        for i, n in enumerate(other.buckets):
            self.buckets[i] += n


class SessionCounts:
    """One session's counts, with its labels."""

    __slots__ = ("env", "episodes", "front_end", "kinds", "steps")

    def __init__(self, front_end: str, env: str) -> None:
        self.front_end = front_end
        self.env = env
        self.steps = 0
        self.episodes = 0
        self.kinds: dict[str, KindCounts] = {}

    def kind(self, kind: str) -> KindCounts:
        """The counts of one request kind."""
        counts = self.kinds.get(kind)
        if counts is None:
            counts = self.kinds[kind] = KindCounts()
        return counts


class HotCollector(Collector):
    """``envwire_steps_total``, ``envwire_episodes_total``, ``envwire_requests_total`` and
    ``envwire_request_seconds`` from the sessions' counts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._live: set[SessionCounts] = set()
        self._closed: dict[tuple[str, str], SessionCounts] = {}  # per (front end, env)

    def add(self, counts: SessionCounts) -> None:
        """Start reporting a session's counts."""
        with self._lock:
            self._live.add(counts)

    def retire(self, counts: SessionCounts) -> None:
        """A session closed: fold its counts into its labels' totals."""
        with self._lock:
            self._live.discard(counts)
            key = (counts.front_end, counts.env)
            total = self._closed.get(key)
            if total is None:
                total = self._closed[key] = SessionCounts(*key)
            total.steps += counts.steps
            total.episodes += counts.episodes
            for kind, kind_counts in list(counts.kinds.items()):
                total.kind(kind).add(kind_counts)

    def collect(self) -> Iterator[Any]:
        """The four metric families, summed over open and closed sessions."""
        with self._lock:
            every = [*self._closed.values(), *self._live]
        steps: dict[tuple[str, str], int] = {}
        episodes: dict[str, int] = {}
        kinds: dict[tuple[str, str], KindCounts] = {}
        for counts in every:
            key = (counts.front_end, counts.env)
            steps[key] = steps.get(key, 0) + counts.steps
            episodes[counts.env] = episodes.get(counts.env, 0) + counts.episodes
            for kind, kind_counts in list(counts.kinds.items()):
                total = kinds.get((counts.front_end, kind))
                if total is None:
                    total = kinds[(counts.front_end, kind)] = KindCounts()
                total.add(kind_counts)
        family = CounterMetricFamily(
            "envwire_steps",
            "Env steps (a vector step of N copies counts N).",
            labels=["front_end", "env"],
        )
        for labels, n in steps.items():
            family.add_metric(list(labels), n)
        yield family
        family = CounterMetricFamily("envwire_episodes", "Episodes ended.", labels=["env"])
        for env, n in episodes.items():
            family.add_metric([env], n)
        yield family
        requests = CounterMetricFamily(
            "envwire_requests", "Session requests carried out.", labels=["front_end", "kind"]
        )
        seconds = HistogramMetricFamily(
            "envwire_request_seconds",
            "Seconds a session request took, env call included.",
            labels=["front_end", "kind"],
        )
        for labels, kind_total in kinds.items():
            requests.add_metric(list(labels), kind_total.count)
            cumulative, buckets = 0, []
            for bound, n in zip([*map(str, BUCKETS), "+Inf"], kind_total.buckets, strict=True):
                cumulative += n
                buckets.append((bound, cumulative))
            seconds.add_metric(list(labels), buckets, kind_total.seconds)
        yield requests
        yield seconds
