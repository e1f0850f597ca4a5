"""gym-socket with busy polling on both ends, beside the default and beside the echo floors.

Run: ``python benchmarks/bench_busypoll.py [--seconds S] [--runs R] [--us US] [--quick]``. Two
real ``envwire serve`` processes serve CartPole-v1, one by default and one with
``--busy-poll-us US`` (default 200); the client steps each, the polling one with
``busy_poll_us=US``. Beside them: the plain blocking echo of the same bytes (the suite's
baseline) and the same echo with both of its ends polling (the floor for polling). All four in
alternating rounds; the ratios are medians of the rounds' own ratios. Also printed: the CPU
time per step of each server process, since polling spends CPU to save latency.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import gymnasium

import envwire
from envwire.testing import ServerProcess
from harness import (
    EchoServer,
    Result,
    alternate,
    compare,
    cpu_seconds,
    echo_rate,
    gym_socket_step_bytes,
    machine,
    parse_settings,
    print_table,
    rate,
)

ENV = "CartPole-v1"


def _stepping(env: Any, seconds: float, pid: int, cpu: list[float]) -> Callable[[], float]:
    """Steps/s of ``env`` over ``seconds``; appends the server's CPU µs per step to ``cpu``."""

    def one() -> None:
        _, _, terminated, truncated, _ = env.step(0)
        if terminated or truncated:
            env.reset()

    def measure() -> float:
        began, used = time.perf_counter(), cpu_seconds(pid)
        steps = rate(one, seconds)
        elapsed = time.perf_counter() - began
        cpu.append(1e6 * (cpu_seconds(pid) - used) / (steps * elapsed))
        return steps

    return measure


def main() -> None:
    args, settings = parse_settings(__doc__ or "", extra=[("--us", float, 200.0)])
    us: float = args.us
    sizes = gym_socket_step_bytes(gymnasium.make(ENV))
    names = {
        "echo": "echo: CartPole step bytes, blocking",
        "echo_poll": f"echo: CartPole step bytes, both ends polling {us:g} us",
        "default": "gym-socket: CartPole one step, default",
        "poll": f"gym-socket: CartPole one step, both ends polling {us:g} us",
    }
    cpu: dict[str, list[float]] = {"default": [], "poll": []}
    s = settings.seconds
    with (
        EchoServer() as echo,
        EchoServer(busy_poll_us=us) as polling_echo,
        ServerProcess([ENV], front_ends=("gym-socket",)) as plain,
        ServerProcess([ENV], ("--busy-poll-us", f"{us:g}"), front_ends=("gym-socket",)) as fast,
    ):
        assert plain.process is not None and fast.process is not None
        envs = {
            "default": envwire.make(plain.url("gym-socket", ENV)),
            "poll": envwire.make(fast.url("gym-socket", ENV), busy_poll_us=us),
        }
        for env in envs.values():
            env.reset(seed=0)
        pids = {"default": plain.process.pid, "poll": fast.process.pid}
        cases = {
            names["echo"]: lambda: echo_rate(echo.port, *sizes, s),
            names["echo_poll"]: lambda: echo_rate(polling_echo.port, *sizes, s, busy_poll_us=us),
            **{names[k]: _stepping(envs[k], s, pids[k], cpu[k]) for k in ("default", "poll")},
        }
        try:
            values = alternate(cases, settings.runs)
        finally:
            for env in envs.values():
                env.close()
    notes = {"request_bytes": sizes[0], "reply_bytes": sizes[1]}
    results: list[Result] = [
        compare(values, names["echo"], unit="round trips/s", notes=notes),
        compare(values, names["echo_poll"], names["echo"], unit="round trips/s"),
        compare(values, names["default"], names["echo"], target=0.4),
        compare(values, names["poll"], names["echo"], target=0.4),
        compare(values, names["poll"], names["echo_poll"]),
        compare(values, names["poll"], names["default"]),
    ]
    # The table shows names only: say what the last two are compared with.
    results[-2].name = f"{names['poll']}, over the polling echo"
    results[-1].name = f"{names['poll']}, over the default"
    for key in ("default", "poll"):
        median_cpu = sorted(cpu[key])[len(cpu[key]) // 2]
        results.append(Result(f"server CPU per step, {names[key]}", median_cpu, "us"))
    print_table({"results": [vars(r) for r in results], "machine": machine()})


if __name__ == "__main__":
    main()
