"""gym-socket: one client stepping CartPole, beside a raw TCP echo of the same payload size.

Run: ``python benchmarks/bench_gymsocket.py [--seconds S] [--runs R] [--quick]``. The server
is a real ``envwire serve`` process; the echo server is a plain blocking Python TCP server in
another process; the client is this process. Target: at least 2/3 of the echo rate. Also
reported: the seed's flags-0 path (JSON observations), for comparison.
"""

from __future__ import annotations

import argparse

import envwire
from envwire.protocols.gymsocket import Flags
from envwire.testing import ServerProcess
from harness import EchoServer, Result, Settings, machine, print_table, rate
from suite import bench_gym_socket


def seed_flags_rate(url: str, seconds: float) -> float:
    """Steps/s of a client that speaks the seed's protocol only (flags 0)."""
    env = envwire.make(url, flags=Flags(0))
    env.reset()

    def one() -> None:
        _, _, terminated, truncated, _ = env.step(0)
        if terminated or truncated:
            env.reset()

    try:
        return rate(one, seconds)
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a smoke run (0.3 s, 1 run)")
    args = parser.parse_args()
    settings = Settings(seconds=0.3, runs=1) if args.quick else Settings(args.seconds, args.runs)
    with (
        EchoServer() as echo,
        ServerProcess(["CartPole-v1", "process/CartPole-v1=CartPole-v1@process"]) as server,
    ):
        results = bench_gym_socket(settings, server, echo)
        baseline = results[0].value
        seed = seed_flags_rate(server.url("gym-socket", "CartPole-v1"), settings.seconds)
    results.append(Result("gym-socket: CartPole, seed flags 0 (JSON)", seed, ratio=seed / baseline))
    print_table({"results": [vars(r) for r in results], "machine": machine()})


if __name__ == "__main__":
    main()
