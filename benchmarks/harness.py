"""What every benchmark shares: results and settings, a rate meter, alternating rounds, the
plain TCP loop baseline, the machine's description, the report table, and payload sizes taken
from the codecs.

Every figure a benchmark reports is a :class:`Result`, compared (``ratio``) to a baseline
measured in the same run: the machines these run on are shared and noisy.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import platform
import socket
import statistics
import struct
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import gymnasium

from envwire import messages as m
from envwire.client.gymsocket import DEFAULT_FLAGS
from envwire.protocols.gymsocket import ClientConnection, Flags, ServerConnection
from envwire.sockets import busy_poll

__all__ = [
    "ECHO_ENVS",
    "EchoServer",
    "Progress",
    "Result",
    "Settings",
    "alternate",
    "case_names",
    "checked_cases",
    "comma_list",
    "compare",
    "cpu_seconds",
    "descendants",
    "echo_rate",
    "gym_socket_step_bytes",
    "machine",
    "parse_settings",
    "median",
    "print_table",
    "rate",
    "read_exactly",
    "serve_forever",
    "spawned_server",
    "step_loop",
]


@dataclass
class Result:
    """One measured figure, with the baseline it is compared to."""

    name: str
    value: float
    unit: str = "steps/s"
    baseline: str | None = None
    ratio: float | None = None
    target: float | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    #: The lowest and highest of the rounds' ratios (or values, for a figure without a
    #: baseline), when the figure comes from :func:`alternate`.
    spread: tuple[float, float] | None = None


def rate(call: Callable[[], Any], seconds: float, warmup: int = 50) -> float:
    """Calls per second of ``call`` over about ``seconds``, after ``warmup`` calls."""
    for _ in range(warmup):
        call()
    count, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        call()
        count += 1
        now = time.perf_counter()
        if now >= deadline:
            return count / (now - start)


_SIZES = struct.Struct("<III")

#: The envs an echo connection may step once per request (``echo_rate(env=...)``), by name;
#: the opening sends the index.
ECHO_ENVS: tuple[str, ...] = ("", "CartPole-v1", "bench/Frames-v0")


def _echo_stepper(name: str) -> Callable[[], None]:
    """:func:`step_loop` on a fresh ``name`` (one of :data:`ECHO_ENVS` but ""): the env's own
    work per message."""
    if name == "bench/Frames-v0":
        from envwire.testing.envs import FramesEnv

        env: Any = FramesEnv()
    else:
        env = gymnasium.make(name)
    env.reset(seed=0)
    return step_loop(env)


def step_loop(env: Any) -> Callable[[], None]:
    """A call that steps ``env`` once with one fixed sampled action, resetting when its
    episode ends."""
    action = env.action_space.sample()

    def step() -> None:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset()

    return step


def read_exactly(sock: socket.socket, view: memoryview) -> bool:
    """Fill ``view`` from ``sock``; False at EOF."""
    got, size = 0, len(view)
    while got < size:
        n = sock.recv_into(view[got:])
        if not n:
            return False
        got += n
    return True


def _polling_reader(poll: float) -> Callable[[socket.socket, memoryview], bool]:
    """:func:`read_exactly`, each read first polling the socket without sleeping for ``poll``
    seconds (:func:`envwire.sockets.busy_poll`); the plain one when ``poll`` is 0."""
    if not poll:
        return read_exactly

    def read(sock: socket.socket, view: memoryview) -> bool:
        got, size = 0, len(view)
        while got < size:
            part = view[got:]

            def receive(flags: int, part: memoryview = part) -> int:
                return sock.recv_into(part, 0, flags)

            polled = busy_poll(receive, poll)
            n = sock.recv_into(part) if polled is None else polled
            if not n:
                return False
            got += n
        return True

    return read


def _echo_main(conn: Any, poll: float = 0.0) -> None:
    """The echo process: per connection, a 12-byte opening (request size, reply size, env),
    then for each request of that size one reply of that size, after stepping the env once
    when the opening named one."""
    listener = socket.create_server(("127.0.0.1", 0))
    conn.send(listener.getsockname()[1])
    while True:
        client, _ = listener.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        opening = bytearray(_SIZES.size)
        if read_exactly(client, memoryview(opening)):
            request, reply, env = _SIZES.unpack(opening)
            answer = b"x" * reply
            buffer = memoryview(bytearray(max(request, 1)))[:request]
            read = _polling_reader(poll)
            if env:
                step = _echo_stepper(ECHO_ENVS[env])
                while read(client, buffer):
                    step()
                    client.sendall(answer)
            else:
                while read(client, buffer):
                    client.sendall(answer)
        client.close()


class EchoServer:
    """The physical baseline: the fastest plain blocking Python loop that answers a request
    of one size with a reply of another (``recv_into`` a preallocated buffer, one ``sendall``
    of a prebuilt reply), in its own process, one connection at a time. ``busy_poll_us``: it
    polls for each request that long before it sleeps (the floor for a polling server)."""

    def __init__(self, busy_poll_us: float = 0) -> None:
        self.poll = busy_poll_us / 1e6

    def __enter__(self) -> EchoServer:
        parent, child = multiprocessing.Pipe()
        ctx = multiprocessing.get_context("spawn")
        self.process = ctx.Process(target=_echo_main, args=(child, self.poll), daemon=True)
        self.process.start()
        if not parent.poll(30):
            raise RuntimeError("the echo server did not start")
        self.port = int(parent.recv())
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.kill()
        self.process.join(5)


def echo_rate(
    port: int,
    request_bytes: int,
    reply_bytes: int,
    seconds: float,
    *,
    busy_poll_us: float = 0,
    env: str = "",
) -> float:
    """Round trips/s of a plain blocking client against :class:`EchoServer`: each sends
    ``request_bytes`` (one ``sendall``) and reads ``reply_bytes`` back (``recv_into`` a
    preallocated buffer, once when the reply arrives whole; first polled for ``busy_poll_us``
    when given). With ``env`` (one of :data:`ECHO_ENVS`), the echo server steps that env once
    per request before it answers: the floor for any Python server of that env, since it does
    the env's own work and nothing else."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(_SIZES.pack(request_bytes, reply_bytes, ECHO_ENVS.index(env)))
    payload = b"x" * request_bytes
    buffer = memoryview(bytearray(reply_bytes))
    read = _polling_reader(busy_poll_us / 1e6)

    def once() -> None:
        sock.sendall(payload)
        if not read(sock, buffer):
            raise ConnectionError("the echo server closed the connection")

    try:
        return rate(once, seconds)
    finally:
        sock.close()


@dataclass
class Settings:
    """How long and how big the suite runs."""

    seconds: float = 2.0
    runs: int = 5
    sizes: Sequence[int] = (1, 8, 16, 64, 256, 1024)
    idle_sessions: int = 2000
    #: K of the suite's ``make_vec(url, N, workers=K)`` cases
    workers: int = 2


def comma_list(text: str) -> tuple[str, ...]:
    """The comma-separated names in ``text`` (blanks dropped)."""
    return tuple(name.strip() for name in text.split(",") if name.strip())


def checked_cases(names: Sequence[str], known: Sequence[str]) -> tuple[str, ...]:
    """``names``, each one of the ``known`` cases of a benchmark.

    Raises:
        ValueError: an unknown name (the message names the known ones).
    """
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ValueError(f"no such case: {', '.join(unknown)} (the cases: {', '.join(known)})")
    return tuple(names)


def case_names(known: Sequence[str]) -> Callable[[str], tuple[str, ...]]:
    """An argparse type for ``--cases``: comma-separated names of ``known`` cases."""

    def parse(text: str) -> tuple[str, ...]:
        try:
            return checked_cases(comma_list(text), known)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def parse_settings(
    description: str,
    quick: str = "a smoke run (0.3 s, 1 run)",
    extra: Sequence[tuple[str, Callable[[str], Any], Any]] = (),
) -> tuple[argparse.Namespace, Settings]:
    """A benchmark's command line (``--seconds``, ``--runs``, ``--quick``, and ``extra``
    options as (flag, type, default)): the parsed arguments and the settings they give
    (``--quick``: 0.3 s, 1 run)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help=quick)
    for flag, kind, default in extra:
        parser.add_argument(flag, type=kind, default=default)
    args = parser.parse_args()
    settings = Settings(seconds=0.3, runs=1) if args.quick else Settings(args.seconds, args.runs)
    return args, settings


def median(settings: Settings, measure: Callable[[], float]) -> float:
    """The median of ``settings.runs`` measurements."""
    return statistics.median(measure() for _ in range(settings.runs))


_M = TypeVar("_M")


def alternate(
    cases: Mapping[str, Callable[[], _M]], rounds: int, *, rotate: bool = True
) -> dict[str, list[_M]]:
    """Each case's measurements over ``rounds`` rounds, every round measuring every case once
    in turn, so that a figure and its baseline are always measured minutes apart at most.

    Every round begins with the first case (the baseline, by convention) and the others follow
    it in an order that rotates from round to round, so that each follows the baseline in as
    many rounds as the next: on these shared cores the case measured right after a CPU-bound
    one (an in-process baseline) runs about a tenth slower, and in a fixed order one case
    would always pay for its place in the order rather than for what it does. With ``rotate``
    False every round keeps the cases' own order (for cases laid out in pairs, each right
    after its own baseline)."""
    values: dict[str, list[_M]] = {name: [] for name in cases}
    if not values:
        return values
    first, *rest = list(cases)
    for turn in range(rounds):
        start = turn % len(rest) if rest and rotate else 0
        for name in [first, *rest[start:], *rest[:start]]:
            values[name].append(cases[name]())
    return values


def compare(
    values: dict[str, list[float]],
    name: str,
    baseline: str | None = None,
    *,
    unit: str = "steps/s",
    target: float | None = None,
    notes: dict[str, Any] | None = None,
    label: str | None = None,
) -> Result:
    """A figure from :func:`alternate`'s rounds: the median over the rounds; beside a
    baseline, the ratio is the median of the rounds' own ratios, and the spread their range.
    ``label`` names the result when ``name`` is compared to a second baseline."""
    mine = values[name]
    if baseline is None:
        return Result(name, statistics.median(mine), unit, spread=(min(mine), max(mine)))
    ratios = [a / b for a, b in zip(mine, values[baseline], strict=True)]
    return Result(
        label or name,
        statistics.median(mine),
        unit,
        baseline=baseline,
        ratio=statistics.median(ratios),
        target=target,
        notes=(notes or {}) | {"rounds": mine, "baseline_rounds": values[baseline]},
        spread=(min(ratios), max(ratios)),
    )


class Progress:
    """A one-line progress bar on stderr."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        self.total, self.done, self.enabled = total, 0, enabled

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        bar = "#" * filled + "-" * (width - filled)
        sys.stderr.write(f"\r[{bar}] {self.done}/{self.total} {label[:40]:<40}")
        sys.stderr.flush()
        if self.done >= self.total:
            sys.stderr.write("\n")


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }


def print_table(report: dict[str, Any]) -> None:
    """The report as a table on stdout."""
    rows = report["results"]
    width = max(len(r["name"]) for r in rows)
    print(f"{'case':<{width}}  {'value':>14}  {'ratio':>6}  {'spread':>11}  {'target':>6}")
    for r in rows:
        ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else ""
        low, high = r.get("spread") or (None, None)
        spread = f"{low:.2f}-{high:.2f}" if r["ratio"] is not None and low is not None else ""
        target = f">={r['target']:.2f}" if r["target"] is not None else ""
        if r["unit"] in ("KiB", "us"):
            value = f"{r['value']:,.1f} {r['unit']}"
        elif r["unit"] == "share":
            value = f"{r['value']:.3f}"
        else:
            value = f"{r['value']:,.0f}/s"
        print(f"{r['name']:<{width}}  {value:>14}  {ratio:>6}  {spread:>11}  {target:>6}")
    machine = report["machine"]
    print(f"machine: {machine['cpus']} cores, {machine['processor']}, Python {machine['python']}")


def gym_socket_step_bytes(
    env: gymnasium.Env[Any, Any], flags: Flags = DEFAULT_FLAGS
) -> tuple[int, int]:
    """(request, reply) bytes of one gym-socket step of ``env``, as envwire's client (with
    ``flags``) and server encode it: the payload an echo baseline must carry to compare."""
    obs, _ = env.reset(seed=0)
    action = env.action_space.sample()
    client, server = ClientConnection(flags), ServerConnection()
    server.receive_data(client.send_handshake("bench"))
    server.next_event()
    client.receive_data(server.send_handshake_reply(""))
    client.next_event()
    for end in (client, server):
        end.set_spaces(env.action_space, env.observation_space)
    request = client.send_request(m.Step(action))
    server.receive_data(request)
    server.next_event()
    obs, reward, terminated, truncated, info = env.step(action)
    reply = server.send_reply(m.StepReply(obs, float(reward), terminated, truncated, info))
    return len(request), len(reply)


# --- processes of a benchmark's own: the minimal servers, and what they cost ----------------


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time so far, in seconds (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (the children each of its threads started, and theirs)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as listing:
                for child in listing.read().split():
                    found += [int(child), *descendants(int(child))]
    return found


def serve_forever(conn: Any, serve: Callable[[socket.socket], None]) -> None:
    """Listen on a free local port, send it on ``conn``, then ``serve`` each connection in
    turn (Nagle off), for ever: the body of a minimal server's process."""
    listener = socket.create_server(("127.0.0.1", 0))
    conn.send(listener.getsockname()[1])
    while True:
        client, _ = listener.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with client:
            serve(client)


@contextlib.contextmanager
def spawned_server(
    target: Callable[..., None], args: tuple[Any, ...], what: str, *, daemon: bool = True
) -> Iterator[tuple[int, int]]:
    """``target(conn, *args)`` in a process of its own, which sends its listening port on
    ``conn``: yields (port, pid); at the end the process and every one below it are killed.
    ``daemon`` False for a server that starts processes of its own."""
    parent, child = multiprocessing.Pipe()
    process = multiprocessing.get_context("spawn").Process(
        target=target, args=(child, *args), daemon=daemon
    )
    process.start()
    try:
        if not parent.poll(60):
            raise RuntimeError(f"the {what} did not start")
        assert process.pid is not None
        yield int(parent.recv()), process.pid
    finally:
        for pid in descendants(process.pid or 0):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        process.kill()
        process.join(5)
