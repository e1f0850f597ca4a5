"""``envwire bench``'s dm_env_rpc cases run, and report every figure beside its baseline."""

from __future__ import annotations

from envwire.bench import Settings
from envwire.client.dmenvrpc_bench import bench_grpc_cases


def test_the_grpc_bench_cases_run_and_report_ratios() -> None:
    results = bench_grpc_cases(Settings(seconds=0.05, runs=1), window=4, n=8)
    names = [r.name for r in results]
    assert len(names) == len(set(names)) == 7
    for result in results:
        assert result.value > 0, result
        if result.baseline is not None:
            assert result.baseline in names and result.ratio is not None and result.ratio > 0
    targets = {r.name: r.target for r in results if r.target is not None}
    assert targets == {
        "dm_env_rpc: envwire client, 4 in flight": 2.0,
        "dm_env_rpc: batched N=8": 0.9,
    }
