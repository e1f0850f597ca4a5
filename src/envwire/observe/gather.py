"""``/metrics`` and the dashboard of a server of several workers (``--workers``): the worker a
request reaches asks every other worker for its own figures, over their Unix sockets
(:mod:`envwire.server.relay`), and answers with the sum, so that every count covers the whole
server exactly.

Prometheus samples of the same name and labels are added (counters, gauges, histograms' buckets,
sums and counts, the process collector's CPU seconds and memory); ``process_start_time_seconds``
is the earliest and ``process_max_fds`` the smallest. The dashboard's live table lists every
worker's sessions, its throughput adds the workers' rates, and its errors and crashes are the
newest of all. OpenEnv's ``/status`` counts are added the same way (:class:`Summed`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from envwire.observe.dashboard import ObserveWeb
from envwire.observe.live import RECENT
from envwire.observe.metrics import CONTENT_TYPE
from envwire.protocols.http.http11 import Request, Response
from envwire.server.http import Mount, OnHang, PlainMount
from envwire.server.relay import fetch

__all__ = ["GATHER_TIMEOUT", "Gathered", "Summed", "add_json", "merge_live", "merge_metrics"]

log = logging.getLogger("envwire.observe")

#: Seconds one worker may take to give its figures.
GATHER_TIMEOUT = 10.0

_EARLIEST = frozenset({"process_start_time_seconds"})
_SMALLEST = frozenset({"process_max_fds"})
_GATHERED = ("/metrics", "/dashboard/api/live")


class _Families:
    """Parsed metric families, to be rendered again (a collector of a registry)."""

    def __init__(self, families: Sequence[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterable[Metric]:
        return self.families


def merge_metrics(texts: Sequence[str]) -> bytes:
    """Prometheus text expositions of several workers, as one (see the module docstring)."""
    merged: dict[str, Metric] = {}
    values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    order: dict[str, list[tuple[str, tuple[tuple[str, str], ...]]]] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            if family.name not in merged:
                merged[family.name] = Metric(family.name, family.documentation, family.type)
                order[family.name] = []
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                if key not in values:
                    values[key] = sample.value
                    order[family.name].append(key)
                elif sample.name in _EARLIEST or sample.name in _SMALLEST:
                    values[key] = min(values[key], sample.value)
                else:
                    values[key] += sample.value
    for name, family in merged.items():
        for sample_name, labels in order[name]:
            family.add_sample(sample_name, dict(labels), values[(sample_name, labels)])
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(list(merged.values())))
    return generate_latest(registry)


def merge_live(snapshots: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Dashboard snapshots of several workers, as one."""
    merged: dict[str, Any] = {
        "time": max(s.get("time", 0.0) for s in snapshots),
        "sessions": [row for s in snapshots for row in s.get("sessions", [])],
        "recording": any(s.get("recording", False) for s in snapshots),
    }
    # each worker samples on its own clock: the k-th newest samples of all are added
    histories = [s.get("throughput", []) for s in snapshots]
    longest = max((len(h) for h in histories), default=0)
    throughput = []
    for back in range(longest, 0, -1):
        rates: dict[str, float] = {}
        times = []
        for history in histories:
            if len(history) >= back:
                entry = history[-back]
                times.append(entry["time"])
                for env, rate in entry["rates"].items():
                    rates[env] = rates.get(env, 0.0) + rate
        throughput.append({"time": max(times), "rates": rates})
    merged["throughput"] = throughput
    for key in ("errors", "crashes"):
        rows = [row for s in snapshots for row in s.get(key, [])]
        merged[key] = sorted(rows, key=lambda r: r.get("time", 0.0), reverse=True)[:RECENT]
    return merged


def _ask_peers(peers: Sequence[str], request: Request, timeout: float) -> list[bytes]:
    """The bodies of the other workers' 200 answers to ``request``; a worker that does not
    answer is logged and left out (its figures are missing, the rest are still summed)."""
    bodies = []
    for path in peers:
        try:
            theirs = fetch(path, request, timeout)
        except OSError as exc:
            log.warning("a worker gave no figures for %s: %s", request.path, exc)
            continue
        if theirs.status == 200:
            bodies.append(theirs.body)
    return bodies


class Gathered(PlainMount):
    """The ``/metrics`` and dashboard mount of one worker of several: ``local`` answers for
    this worker (and judges tokens), the other workers are asked at ``peers`` (their Unix
    sockets) for theirs."""

    def __init__(
        self, local: ObserveWeb, peers: Sequence[str], timeout: float = GATHER_TIMEOUT
    ) -> None:
        self.local = local
        self.peers = tuple(peers)
        self.timeout = timeout

    def check(self, head: Request) -> Response | bool | None:
        return self.local.check(head)

    def respond(self, request: Request, on_hang: OnHang) -> Response | None:
        own = self.local.respond(request, on_hang)
        if own is None or own.status != 200 or request.path not in _GATHERED:
            return own
        ask = Request("GET", request.path, headers={"host": "localhost"})
        answers = [own.body.decode()]
        answers += [body.decode() for body in _ask_peers(self.peers, ask, self.timeout)]
        if request.path == "/metrics":
            return Response(200, merge_metrics(answers), CONTENT_TYPE)
        merged = merge_live([json.loads(text) for text in answers])
        return Response(200, json.dumps(merged).encode(), own.content_type)


def add_json(values: Sequence[Any], keep: frozenset[str] = frozenset()) -> Any:
    """JSON values of several workers as one: numbers added, objects merged key by key (the
    keys in ``keep`` are the first worker's: a server-wide setting, not a count), anything
    else the first's."""
    first = values[0]
    if isinstance(first, dict):
        keys = dict.fromkeys(k for v in values if isinstance(v, dict) for k in v)
        return {
            key: (
                first.get(key)
                if key in keep and key in first
                else add_json([v[key] for v in values if isinstance(v, dict) and key in v], keep)
            )
            for key in keys
        }
    if isinstance(first, int | float) and not isinstance(first, bool):
        return sum(v for v in values if isinstance(v, int | float) and not isinstance(v, bool))
    return first


class Summed(PlainMount):
    """Placed before ``inner``, the mount that answers ``path`` (a JSON object of counts):
    that answer here, plus the other workers' at ``peers``, added (:func:`add_json`; the keys
    in ``keep`` are this worker's)."""

    def __init__(
        self,
        inner: Mount,
        peers: Sequence[str],
        path: str,
        keep: frozenset[str] = frozenset(),
        timeout: float = GATHER_TIMEOUT,
    ) -> None:
        self.inner = inner
        self.peers = tuple(peers)
        self.path = path
        self.keep = keep
        self.timeout = timeout

    def check(self, head: Request) -> Response | bool | None:
        return None  # the inner mount judges the head

    def respond(self, request: Request, on_hang: OnHang) -> Response | None:
        if request.path != self.path or request.method != "GET":
            return None
        own = self.inner.respond(request, on_hang)
        if own is None or own.status != 200:
            return own
        answers = [json.loads(own.body)]
        answers += [json.loads(body) for body in _ask_peers(self.peers, request, self.timeout)]
        merged = add_json(answers, self.keep)
        return Response(200, json.dumps(merged).encode(), own.content_type, own.headers)
