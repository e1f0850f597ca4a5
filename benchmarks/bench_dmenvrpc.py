"""dm_env_rpc: envwire's gRPC front end beside a minimal reference servicer, in the same run.

Run: ``python benchmarks/bench_dmenvrpc.py [--seconds S] [--runs R] [--window W] [--quick]
[--json FILE]``.

The cases ``envwire bench`` runs (:func:`envwire.client.dmenvrpc_bench.bench_grpc_cases`: the
official ``Connection`` against the reference servicer and against envwire, envwire's client one
step at a time and pipelined, a vector world of 256 CartPoles against an in-process
``SyncVectorEnv``), and beside them the official ``DmEnvAdaptor`` (a ``dm_env.Environment``)
against each server. Every figure is the median of ``--runs`` measurements of ``--seconds``.
"""

from __future__ import annotations

import argparse
import json

import grpc
from dm_env_rpc.v1 import connection, dm_env_adaptor

from envwire.bench import Result, Settings, _median, machine, print_table, rate
from envwire.client.dmenvrpc_bench import ENV, ReferenceProcess, bench_grpc_cases
from envwire.testing import ServerProcess


def adaptor_rate(address: str, seconds: float) -> float:
    """Steps/s of the official ``DmEnvAdaptor`` (a dm_env.Environment)."""
    channel = grpc.insecure_channel(address)
    conn = connection.Connection(channel)
    try:
        env, _ = dm_env_adaptor.create_and_join_world(conn, {"env": ENV}, {})
        env.reset()
        return rate(lambda: env.step({"action": 0}), seconds)
    finally:
        conn.close()
        channel.close()


def bench_adaptors(settings: Settings) -> list[Result]:
    """``DmEnvAdaptor`` against the reference servicer and against envwire."""
    with ReferenceProcess() as port, ServerProcess([ENV], front_ends=("grpc",)) as server:
        reference = _median(settings, lambda: adaptor_rate(f"127.0.0.1:{port}", settings.seconds))
        ours = _median(
            settings,
            lambda: adaptor_rate(f"{server.host}:{server.ports['grpc']}", settings.seconds),
        )
    name = "dm_env_rpc: DmEnvAdaptor -> reference servicer"
    return [
        Result(name, reference),
        Result("dm_env_rpc: DmEnvAdaptor -> envwire", ours, baseline=name, ratio=ours / reference),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--window", type=int, default=16, help="pipelined steps in flight")
    parser.add_argument("--quick", action="store_true", help="a smoke run (0.3 s, 1 run)")
    parser.add_argument("--json", help="also write the report here")
    args = parser.parse_args()
    settings = Settings(seconds=0.3, runs=1) if args.quick else Settings(args.seconds, args.runs)
    results = bench_grpc_cases(settings, window=args.window) + bench_adaptors(settings)
    report = {"machine": machine(), "results": [vars(r) for r in results]}
    print_table(report)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)


if __name__ == "__main__":
    main()
