"""Summing the figures of a server's workers (``--workers``): every count exact."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from envwire.observe.gather import add_json, merge_live, merge_metrics

WORKER_0 = """\
# HELP envwire_steps_total Steps taken.
# TYPE envwire_steps_total counter
envwire_steps_total{env="CartPole-v1",front_end="gym-socket"} 1500.0
# HELP envwire_request_seconds Request time.
# TYPE envwire_request_seconds histogram
envwire_request_seconds_bucket{front_end="gym-socket",kind="step",le="0.001"} 10.0
envwire_request_seconds_bucket{front_end="gym-socket",kind="step",le="+Inf"} 12.0
envwire_request_seconds_sum{front_end="gym-socket",kind="step"} 0.5
envwire_request_seconds_count{front_end="gym-socket",kind="step"} 12.0
# HELP process_start_time_seconds Start time of the process.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 200.0
"""

WORKER_1 = """\
# HELP envwire_steps_total Steps taken.
# TYPE envwire_steps_total counter
envwire_steps_total{env="CartPole-v1",front_end="gym-socket"} 2500.0
envwire_steps_total{env="Catch-v0",front_end="http"} 7.0
# HELP envwire_request_seconds Request time.
# TYPE envwire_request_seconds histogram
envwire_request_seconds_bucket{front_end="gym-socket",kind="step",le="0.001"} 1.0
envwire_request_seconds_bucket{front_end="gym-socket",kind="step",le="+Inf"} 3.0
envwire_request_seconds_sum{front_end="gym-socket",kind="step"} 0.25
envwire_request_seconds_count{front_end="gym-socket",kind="step"} 3.0
# HELP process_start_time_seconds Start time of the process.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 100.0
"""


def _samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }


def test_samples_of_one_name_and_labels_are_added() -> None:
    merged = _samples(merge_metrics([WORKER_0, WORKER_1]))
    cart = (("env", "CartPole-v1"), ("front_end", "gym-socket"))
    assert merged[("envwire_steps_total", cart)] == 4000
    assert merged[("envwire_steps_total", (("env", "Catch-v0"), ("front_end", "http")))] == 7
    step = (("front_end", "gym-socket"), ("kind", "step"))
    assert merged[("envwire_request_seconds_bucket", (*step[:1], step[1], ("le", "+Inf")))] == 15
    assert merged[("envwire_request_seconds_count", step)] == 15
    assert merged[("envwire_request_seconds_sum", step)] == 0.75
    assert merged[("process_start_time_seconds", ())] == 100  # the earliest, not a sum


def test_live_tables_are_joined_and_rates_added() -> None:
    a = {
        "time": 10.0,
        "sessions": [{"id": "a"}],
        "throughput": [{"time": 8.0, "rates": {"X": 1.0}}, {"time": 10.0, "rates": {"X": 2.0}}],
        "errors": [{"time": 5.0, "code": "a"}],
        "crashes": [],
        "recording": False,
    }
    b = {
        "time": 11.0,
        "sessions": [{"id": "b"}, {"id": "c"}],
        "throughput": [{"time": 11.0, "rates": {"X": 3.0, "Y": 1.0}}],
        "errors": [{"time": 6.0, "code": "b"}],
        "crashes": [],
        "recording": True,
    }
    merged = merge_live([a, b])
    assert [row["id"] for row in merged["sessions"]] == ["a", "b", "c"]
    assert merged["throughput"][-1] == {"time": 11.0, "rates": {"X": 5.0, "Y": 1.0}}
    assert merged["throughput"][0] == {"time": 8.0, "rates": {"X": 1.0}}
    assert [e["code"] for e in merged["errors"]] == ["b", "a"]
    assert merged["recording"] is True


def test_status_counts_are_added_and_settings_kept() -> None:
    a = {"sessions": 2, "capacity": 24, "openenv": {"websocket": 1, "http": 1}, "ok": True}
    b = {"sessions": 3, "capacity": 24, "openenv": {"websocket": 0, "http": 2, "mcp": 1}}
    assert add_json([a, b], frozenset({"capacity"})) == {
        "sessions": 5,
        "capacity": 24,
        "openenv": {"websocket": 1, "http": 3, "mcp": 1},
        "ok": True,
    }
