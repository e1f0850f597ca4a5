"""gym-socket: one client stepping CartPole, beside a raw TCP echo of the same payload size.

Run: ``python benchmarks/bench_gymsocket.py [--seconds S] [--quick]``. The server runs as a real
``envwire serve`` process; the echo server is a plain blocking Python TCP server in another
process; the client is this process. Target: at least 2/3 of the echo rate.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import envwire
from _common import EchoServer, echo_rate, median_of, rate, report
from envwire.protocols.gymsocket import Flags
from envwire.testing import ServerProcess

# Bytes on the wire for one CartPole step with the default (extended) flags: the request is
# type + action type + length + tensor (1+1+4+1+4+8); the reply is status + observation tensor
# (1+1+4+1+4+4+16) + reward + flags + empty-ish info (8+2+4+2).
REQUEST_BYTES, REPLY_BYTES = 19, 47


def step_rate(url: str, seconds: float, flags: Flags | None = None) -> float:
    kwargs = {} if flags is None else {"flags": flags}
    env = envwire.make(url, **kwargs)
    env.reset(seed=None if flags == Flags(0) else 0)
    action = env.action_space.sample()

    def one() -> None:
        _, _, terminated, truncated, _ = env.step(action)
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
    seconds, runs = (0.3, 1) if args.quick else (args.seconds, args.runs)
    with EchoServer() as echo, ServerProcess(["CartPole-v1"]) as server:
        url = server.url("gym-socket", "CartPole-v1")
        echo_rate_ = median_of(
            runs, lambda: echo_rate(echo.port, REQUEST_BYTES, REPLY_BYTES, seconds)
        )
        ours = median_of(runs, lambda: step_rate(url, seconds))
        seed = median_of(runs, lambda: step_rate(url, seconds, Flags(0)))
    report(
        [
            ("raw TCP echo (same payload)", echo_rate_, None),
            ("gym-socket CartPole (extended flags)", ours, ours / echo_rate_),
            ("gym-socket CartPole (seed flags 0)", seed, seed / echo_rate_),
        ]
    )


if __name__ == "__main__":
    main()
