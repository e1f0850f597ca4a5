"""The suite's command line and its parallel cases' targets: cases picked by name (an unknown
one refused with the list), and the targets of ``make_vec(url, 8, workers=K)`` by K."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.benchmarks.conftest import BENCHMARKS


@pytest.mark.parametrize("script", ["suite.py", "bench_minimal.py"])
def test_an_unknown_case_is_refused_with_the_known_ones(script: str) -> None:
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--cases", "frames,nope"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=BENCHMARKS,
        check=False,
    )
    assert out.returncode != 0
    assert "no such case: nope" in out.stderr
    assert "frames" in out.stderr.split("no such case")[1]  # the cases it has, named


@pytest.mark.parametrize(
    ("workers", "of_sync", "of_async"), [(2, 1.3, 1.2), (8, None, 0.9), (4, None, None)]
)
def test_the_parallel_targets_follow_the_workers(
    workers: int, of_sync: float | None, of_async: float | None
) -> None:
    import suite

    values = {
        "sync": [1.0, 1.0, 1.0],
        "async": [2.0, 3.0, 2.5],
        "workers=1": [0.9, 1.0, 0.8],
        f"workers={workers}": [2.4, 2.7, 3.0],
    }
    results = suite._parallel_results(values, "Burn", 8, workers, targets=True)
    by_name = {result.name: result for result in results}
    ours = by_name[f"Burn: make_vec workers={workers}"]
    assert ours.baseline == "Burn: in-process SyncVectorEnv"
    assert ours.ratio == 2.7 and ours.target == of_sync
    beside_async = by_name["  the same, of AsyncVectorEnv"]
    assert beside_async.baseline == "Burn: Gymnasium AsyncVectorEnv (8 processes)"
    assert beside_async.ratio == pytest.approx(1.2) and beside_async.target == of_async
    assert by_name["Burn: make_vec workers=1"].target is None
    untargeted = suite._parallel_results(values, "Burn", 8, workers)
    assert all(result.target is None for result in untargeted)
