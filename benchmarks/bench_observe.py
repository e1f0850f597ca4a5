"""The cost of observing: the one-step path with metrics and recording on, against off.

Run: ``python benchmarks/bench_observe.py [--seconds S] [--runs R] [--quick]``.

Two measurements, each against a baseline measured in the same run, with the variants
interleaved run by run (the machines are shared and noisy; medians of alternating runs). Rates
are steps per second of this process's CPU time (client and in-process server together), not
of wall time: on a loaded machine wall time mostly measures the other processes, while the
observer's cost is CPU the step path spends.

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
import time
from collections.abc import Callable
from typing import Any

import gymnasium

import envwire
from envwire import messages as m
from envwire.app import Server
from envwire.observe import Observability
from envwire.observe.hub import RecordSettings
from envwire.registry import Catalog, parse_env_arg
from envwire.runtime import make_worker
from envwire.session import Session
from harness import Result, Settings, machine, print_table

CART = "CartPole-v1"
RECORDING = importlib.util.find_spec("minari") is not None


def cpu_rate(call: Callable[[], Any], seconds: float, warmup: int = 50) -> float:
    """Calls per second of this process's CPU time, over about ``seconds`` of wall time."""
    for _ in range(warmup):
        call()
    count, deadline = 0, time.perf_counter() + seconds
    start = time.process_time()
    while time.perf_counter() < deadline:
        call()
        count += 1
    return count / max(time.process_time() - start, 1e-9)


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


def _server(observed: bool, record: str | None) -> Server:
    keys = {} if record is None else {"record": record}
    server = Server(
        Catalog([parse_env_arg(CART)]),
        envwire.settings.Settings.of(gym_socket=0, http=None, grpc=None, **keys),
    )
    if not observed:  # the baseline: a session table that tells no one
        server.sessions.observer = None
    server.start()
    return server


def _wire_rate(server: Server, seconds: float) -> float:
    host, port = server.addresses["gym-socket"]
    env = envwire.make(f"gym-socket://{host}:{port}/{CART}")
    assert isinstance(env, gymnasium.Env)  # not a TypedClient: that is OpenEnv only
    env.reset(seed=0)

    def one() -> None:
        _, _, terminated, truncated, _ = env.step(0)
        if terminated or truncated:
            env.reset()

    try:
        return cpu_rate(one, seconds)
    finally:
        env.close()


def _interleaved(
    settings: Settings, variants: dict[str, Callable[[], float]]
) -> tuple[dict[str, float], dict[str, float]]:
    """Each variant's median rate over ``settings.runs`` rounds, and the median over rounds of
    its ratio to the first variant's rate in the same round (the order alternates round by
    round, so that drift in the machine's load falls on every variant alike)."""
    names = list(variants)
    samples: dict[str, list[float]] = {name: [] for name in names}
    ratios: dict[str, list[float]] = {name: [] for name in names}
    for round_no in range(settings.runs):
        order = names if round_no % 2 == 0 else names[::-1]
        measured = {name: variants[name]() for name in order}
        for name in names:
            samples[name].append(measured[name])
            ratios[name].append(measured[name] / measured[names[0]])
    medians = {name: statistics.median(values) for name, values in samples.items()}
    return medians, {name: statistics.median(values) for name, values in ratios.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a smoke run (0.3 s, 1 run)")
    args = parser.parse_args()
    settings = Settings(seconds=0.3, runs=1) if args.quick else Settings(args.seconds, args.runs)

    def core_rate(hub: Observability | None) -> Callable[[], float]:
        return lambda: cpu_rate(_core_step(hub), settings.seconds)

    def wire_rate(server: Server) -> Callable[[], float]:
        return lambda: _wire_rate(server, settings.seconds)

    with tempfile.TemporaryDirectory() as scratch:
        record = RecordSettings(root=scratch)  # the observer alone, no server
        hubs: dict[str, Any] = {"off": None, "metrics": Observability()}
        if RECORDING:
            hubs["metrics + recording"] = Observability(record)
        core, core_ratios = _interleaved(
            settings, {name: core_rate(hub) for name, hub in hubs.items()}
        )
        servers = {"off": _server(False, None), "metrics": _server(True, None)}
        if RECORDING:
            servers["metrics + recording"] = _server(True, scratch + "/w")
        try:
            measures = {name: wire_rate(server) for name, server in servers.items()}
            wire, wire_ratios = _interleaved(settings, measures)
        finally:
            for server in servers.values():
                server.shutdown()
            for hub in hubs.values():
                if hub is not None:
                    hub.close()
    results = []
    for label, figures, ratios in (
        ("Session.handle(Step), inline CartPole", core, core_ratios),
        ("gym-socket: CartPole, one step at a time", wire, wire_ratios),
    ):
        base = f"{label}, not observed"
        results.append(Result(base, figures["off"], unit="steps/CPU-s"))
        for name in ("metrics", "metrics + recording"):
            if name in figures:
                results.append(Result(
                    f"{label}, {name}", figures[name], unit="steps/CPU-s", baseline=base,
                    ratio=ratios[name],
                    target=0.97 if name == "metrics" and label.startswith("gym") else None,
                ))  # fmt: skip
    print_table({"results": [vars(r) for r in results], "machine": machine()})


if __name__ == "__main__":
    main()
