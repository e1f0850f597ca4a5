"""Where one gym-socket step's time goes, counted rather than timed.

Run ``python benchmarks/bench_profile.py [--steps N] [--quick]``. Both ends of a CartPole
session run in this process with no sockets (the client codec, the server codec, the session,
its inline worker and the env), on the extended path and on the seed's JSON path. For each it
prints the Python function calls per step by function (``cProfile``'s call counts: exact and
the same on a busy machine as on a quiet one), and the time per step of each stage (the best of
several repeats, so the least disturbed by other load). System calls and wake-ups per step are
outside this process's reach: ``benchmarks/README.md`` says how they were counted
(``strace -c -f``).
"""

from __future__ import annotations

import argparse
import cProfile
import time
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np

from envwire import messages as m
from envwire.client.gymsocket import DEFAULT_FLAGS
from envwire.protocols.gymsocket import ClientConnection, Flags, ServerConnection
from envwire.registry import default_catalog
from envwire.runtime import make_worker
from envwire.session import Session

__all__ = ["Pair", "main"]


class Pair:
    """A client codec, a server codec and a session, joined without sockets."""

    def __init__(self, flags: Flags) -> None:
        self.session = Session(default_catalog()["CartPole-v1"], worker_factory=make_worker)
        self.client, self.server = ClientConnection(flags), ServerConnection()
        self.server.receive_data(self.client.send_handshake("CartPole-v1"))
        self.server.next_event()
        self.client.receive_data(self.server.send_handshake_reply(""))
        self.client.next_event()
        for end in (self.client, self.server):
            end.set_spaces(self.session.action_space, self.session.observation_space)
        self.session.handle(m.Reset(seed=0))
        self.action = 0
        self.request = self.client.send_request(m.Step(np.int64(0)))
        self.reply = b""

    def server_side(self) -> None:
        """Parse the request, step the session, encode the reply."""
        self.server.receive_data(self.request)
        event = self.server.next_event()
        assert isinstance(event, m.Step)
        reply = self.session.handle(event)
        self.reply = self.server.send_reply(reply)
        assert isinstance(reply, m.StepReply)
        if reply.terminated or reply.truncated:
            self.session.handle(m.Reset())

    def client_side(self) -> None:
        """Parse the reply, encode the next request."""
        self.client.receive_data(self.reply)
        assert isinstance(self.client.next_event(), m.StepReply)
        self.action ^= 1
        self.request = self.client.send_request(m.Step(np.int64(self.action)))

    def step(self) -> None:
        self.server_side()
        self.client_side()


def _best_us(call: Callable[[], Any], steps: int, repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            call()
        best = min(best, (time.perf_counter() - start) / steps * 1e6)
    return best


def _calls(pair: Pair, steps: int) -> list[tuple[float, str]]:
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(steps):
        pair.step()
    profile.disable()
    profile.create_stats()  # what pstats.Stats(profile) would read: by (file, line, function)
    stats = profile.stats
    rows = []
    for (path, line, name), (_, calls, *_rest) in stats.items():
        where = f"{path.rsplit('/', 1)[-1]}:{line}" if path != "~" else "builtin"
        rows.append((calls / steps, f"{where} {name}"))
    return sorted(rows, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20000, help="steps per timing repeat")
    parser.add_argument("--top", type=int, default=60, help="functions listed per path")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args()
    steps = 200 if args.quick else args.steps
    env = gymnasium.make("CartPole-v1")
    env.reset(seed=0)

    def env_step() -> None:
        if any(env.step(0)[2:4]):
            env.reset()

    print(f"CartPole env.step alone: {_best_us(env_step, steps):.2f} us")
    for name, flags in (("extended", DEFAULT_FLAGS), ("seed JSON (flags 0)", Flags(0))):
        pair = Pair(flags)
        pair.step()
        print(f"\n== {name}: request {len(pair.request)} B, reply {len(pair.reply)} B")
        print(f"server (parse, session, env, encode): {_best_us(pair.server_side, steps):6.2f} us")
        print(f"client (parse reply, encode request): {_best_us(pair.client_side, steps):6.2f} us")
        rows = _calls(pair, min(steps, 2000))
        print(f"Python calls per step, both ends: {sum(c for c, _ in rows) - 1:.1f}")
        for count, where in rows[: args.top]:
            if count >= 0.5:
                print(f"  {count:5.2f}  {where}")


if __name__ == "__main__":
    main()
