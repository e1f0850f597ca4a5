"""gym-socket: one client stepping CartPole, beside a plain blocking echo of the same bytes.

Run: ``python benchmarks/bench_gymsocket.py [--seconds S] [--runs R] [--quick]``. The server
is a real ``envwire serve`` process; the echo server is the plain blocking Python loop of
:class:`harness.EchoServer` in another process; the client is this process. Both of envwire's
paths are measured, each beside an echo of its own request and reply sizes (taken from the
codec): the extended one (envwire's client: raw tensors) and the seed's (flags 0: JSON
observations and actions), in alternating rounds. Target: at least 0.4 of the echo.
"""

from __future__ import annotations

import argparse

from envwire.testing import ServerProcess
from harness import EchoServer, Settings, machine, print_table
from suite import bench_gym_socket


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a smoke run (0.3 s, 1 round)")
    args = parser.parse_args()
    settings = Settings(seconds=0.3, runs=1) if args.quick else Settings(args.seconds, args.runs)
    with (
        EchoServer() as echo,
        ServerProcess(["CartPole-v1", "process/CartPole-v1=CartPole-v1@process"]) as server,
    ):
        results = bench_gym_socket(settings, server, echo)
    print_table({"results": [vars(r) for r in results], "machine": machine()})


if __name__ == "__main__":
    main()
