"""The cost of observing: the one-step path with metrics and recording on, against off.

Run: ``python benchmarks/bench_observe.py [--seconds S] [--runs R] [--quick]``.

Two measurements, each against a baseline measured in the same run, with the variants
interleaved run by run (the machines are shared and noisy; medians of alternating runs):

- the session core: ``Session.handle(Step)`` on an inline CartPole in this process, with no
  observer, with the server's observer (metrics and the live activity), and with recording too;
- end to end: a gym-socket client stepping CartPole on an in-process server, observed or not.

Target: metrics cost the one-step path at most 3% (a ratio of at least 0.97 end to end).
Recording copies every step into the episode buffer and needs the ``minari`` extra; without it
those rows are skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
from collections.abc import Callable
from typing import Any

import envwire
from envwire import messages as m
from envwire.observe import Observability
from envwire.observe.hub import RecordSettings
from envwire.registry import Catalog, parse_env_arg
from envwire.runtime import make_worker
from envwire.server.app import Server, ServerConfig
from envwire.session import Session
from harness import Result, Settings, machine, print_table, rate

CART = "CartPole-v1"
RECORDING = importlib.util.find_spec("minari") is not None


def _core_step(observer: Any) -> Callable[[], None]:
    session = Session(parse_env_arg(CART), worker_factory=make_worker, observer=observer)
    session.handle(m.Reset(seed=0))
    step = m.Step(0)

    def one() -> None:
        reply = session.handle(step)
        assert isinstance(reply, m.StepReply)
        if reply.terminated or reply.truncated:
            session.handle(m.Reset())

    return one


def _server(observed: bool, record: RecordSettings | None) -> Server:
    server = Server(
        Catalog([parse_env_arg(CART)]),
        ServerConfig(ports={"gym-socket": 0, "http": None, "grpc": None}, record=record),
    )
    if not observed:  # the baseline: a session table that tells no one
        server.sessions.observer = None
    server.start()
    return server


def _wire_rate(server: Server, seconds: float) -> float:
    host, port = server.addresses["gym-socket"]
    env = envwire.make(f"gym-socket://{host}:{port}/{CART}")
    env.reset(seed=0)

    def one() -> None:
        _, _, terminated, truncated, _ = env.step(0)
        if terminated or truncated:
            env.reset()

    try:
        return rate(one, seconds)
    finally:
        env.close()


def _interleaved(settings: Settings, variants: dict[str, Callable[[], float]]) -> dict[str, float]:
    """Median rate of each variant over ``settings.runs`` rounds, the variants alternating."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(settings.runs):
        for name, measure in variants.items():
            samples[name].append(measure())
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a smoke run (0.3 s, 1 run)")
    args = parser.parse_args()
    settings = Settings(seconds=0.3, runs=1) if args.quick else Settings(args.seconds, args.runs)
    with tempfile.TemporaryDirectory() as scratch:
        record = RecordSettings(root=scratch)
        hubs: dict[str, Any] = {"off": None, "metrics": Observability()}
        if RECORDING:
            hubs["metrics + recording"] = Observability(record)
        core = _interleaved(
            settings,
            {name: (lambda o=o: rate(_core_step(o), settings.seconds)) for name, o in hubs.items()},
        )
        servers = {"off": _server(False, None), "metrics": _server(True, None)}
        if RECORDING:
            servers["metrics + recording"] = _server(True, RecordSettings(root=scratch + "/w"))
        try:
            wire = _interleaved(
                settings,
                {name: (lambda s=s: _wire_rate(s, settings.seconds)) for name, s in servers.items()},
            )
        finally:
            for server in servers.values():
                server.shutdown()
            for hub in hubs.values():
                if hub is not None:
                    hub.close()
    results = []
    for label, figures in (("Session.handle(Step), inline CartPole", core),
                           ("gym-socket: CartPole, one step at a time", wire)):  # fmt: skip
        base = f"{label}, not observed"
        results.append(Result(base, figures["off"]))
        for name in ("metrics", "metrics + recording"):
            if name in figures:
                results.append(Result(
                    f"{label}, {name}", figures[name], baseline=base,
                    ratio=figures[name] / figures["off"],
                    target=0.97 if name == "metrics" and label.startswith("gym") else None,
                ))  # fmt: skip
    print_table({"results": [vars(r) for r in results], "machine": machine()})


if __name__ == "__main__":
    main()
