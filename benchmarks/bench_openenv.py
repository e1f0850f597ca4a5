"""envwire's OpenEnv front end beside openenv-core's own server, driven by the same clients.

Both servers host the same echo env (OpenEnv's guide: message in, message and its length out,
reward = length / 10) in their own process; this process drives them alternately, in rounds:

- WebSocket: openenv-core's ``GenericEnvClient(...).sync()``, one step per round trip;
- HTTP: one ``httpx.Client`` (keep-alive) posting ``/step`` (``http``), and the same with the
  standard library's ``http.client`` (``http-raw``), the cheapest client, where the servers' own
  cost shows most. openenv-core's HTTP makes a fresh env per request; envwire's keeps the
  session (httpx holds its cookie; http.client sends the ``Envwire-Session`` header).

With ``--openenv-checkout PATH`` (a checkout of OpenEnv's repository) it also serves that
repository's own echo and connect4 envs, unmodified, both ways (``openenv_repo.py``).

Run ``python benchmarks/bench_openenv.py`` (``--steps``, ``--rounds``, ``--pin``, ``--json``,
``--quick``, ``--openenv-checkout``); the suite (``benchmarks/suite.py``) runs it briefly, through
:func:`bench_openenv_cases`.
It prints median steps per second per server and transport, envwire's ratio to openenv-core,
and the client's own ceiling (a WebSocket server that answers a canned reply and does no work),
for each placement: ``none`` (the scheduler's choice) and ``split`` (each server
pinned to CPU 1, this driving process to CPU 0). On small VMs, where a wake-up on another CPU is
expensive, the scheduler's choices make single runs vary by up to 40 %; pinning removes that.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from envwire.ports import FRONT_ENDS
from envwire.protocols.http.http11 import Request, RequestParser
from envwire.protocols.http.websocket import FrameReader, accept_bytes, text_frame
from harness import Result, Settings

__all__ = ["bench_openenv_cases", "main"]

MESSAGE = {"message": "hello"}


# --- openenv-core's server (run in a child process: ``--serve-openenv PORT``) ----------------


def serve_openenv(port: int) -> None:
    """openenv-core's ``create_app`` with an echo env, on uvicorn."""
    import uvicorn
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import Action, Observation, State

    class EchoAction(Action):  # type: ignore[misc]
        message: str

    class EchoObservation(Observation):  # type: ignore[misc]
        echoed_message: str
        message_length: int = 0

    class EchoEnvironment(Environment[EchoAction, EchoObservation, State]):  # type: ignore[misc]
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self._state = State(episode_id=None, step_count=0)

        def reset(self, seed: Any = None, episode_id: Any = None, **kw: Any) -> EchoObservation:
            self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
            return EchoObservation(echoed_message="Echo environment ready!", reward=0.0)

        def step(self, action: EchoAction, timeout_s: Any = None, **kw: Any) -> EchoObservation:
            self._state.step_count += 1
            length = len(action.message)
            return EchoObservation(
                echoed_message=action.message, message_length=length, reward=length / 10
            )

        @property
        def state(self) -> State:
            return self._state

    app = create_app(EchoEnvironment, EchoAction, EchoObservation, max_concurrent_envs=4)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_healthy(base: str, process: subprocess.Popen[bytes], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server {base} exited with {process.returncode}")
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"server {base} did not become healthy")


def start_openenv() -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    env = dict(os.environ, ENABLE_WEB_INTERFACE="false")
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve-openenv", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,  # uvicorn logs every client that disconnects
    )
    base = f"http://127.0.0.1:{port}"
    wait_healthy(base, process)
    return base, process


def start_ceiling() -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    process = subprocess.Popen([sys.executable, __file__, "--serve-ceiling", str(port)])
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("the ceiling server did not start") from None
            time.sleep(0.1)
    return f"http://127.0.0.1:{port}", process


def start_envwire() -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    command = [sys.executable, "-m", "envwire", "serve", "envwire/Echo-v0", "--http", str(port)]
    command += ["--workers", "1"]  # one process, as the peer's server is
    for row in FRONT_ENDS:
        if row.name != "http":
            command += [row.flag, "off"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    wait_healthy(base, process)
    return base, process


def serve_ceiling(port: int) -> None:
    """A WebSocket server that does no work: a canned observation for every message. The
    client's rate against it is the most any server can reach with that client."""
    reply = text_frame(
        b'{"type":"observation","data":{"observation":{"echoed_message":"hello",'
        b'"message_length":5},"reward":0.5,"done":false}}'
    )

    def connection(sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        parser = RequestParser()
        request = parser.next_request()
        while not isinstance(request, Request):
            parser.receive_data(sock.recv(65536))
            request = parser.next_request()
        sock.sendall(accept_bytes(request))
        rest = bytes(parser.buffer)
        reader = FrameReader()
        while True:
            for event in reader.feed(rest):
                if event[0] != "text":
                    sock.close()
                    return
                sock.sendall(reply)
            rest = sock.recv(65536)
            if not rest:
                sock.close()
                return

    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(16)
    while True:
        sock, _ = listener.accept()
        threading.Thread(target=connection, args=(sock,), daemon=True).start()


# --- drivers ------------------------------------------------------------------------------


def drive_ws(base: str, steps: int) -> float:
    """Steps per second of openenv-core's sync GenericEnvClient."""
    from openenv.core.generic_client import GenericEnvClient

    with GenericEnvClient(base_url=base).sync() as env:
        env.reset()
        for _ in range(min(200, steps)):
            env.step(MESSAGE)
        start = time.perf_counter()
        for _ in range(steps):
            result = env.step(MESSAGE)
        elapsed = time.perf_counter() - start
    assert result.observation["echoed_message"] == "hello", result
    return steps / elapsed


def drive_http(base: str, steps: int) -> float:
    """Steps per second of POST /step over one keep-alive httpx connection."""
    body = {"action": MESSAGE}
    with httpx.Client(base_url=base, timeout=30) as http:
        http.post("/reset", json={}).raise_for_status()  # envwire: opens the session (cookie)
        for _ in range(min(200, steps)):
            http.post("/step", json=body)
        start = time.perf_counter()
        for _ in range(steps):
            response = http.post("/step", json=body)
        elapsed = time.perf_counter() - start
    assert response.status_code == 200 and response.json()["reward"] == 0.5, response.text
    return steps / elapsed


def drive_http_raw(base: str, steps: int) -> float:
    """Steps per second of POST /step with the standard library's ``http.client`` (keep-alive):
    the cheapest client, so the servers' own cost shows."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(base)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
    body = json.dumps({"action": MESSAGE})
    headers = {"content-type": "application/json"}
    connection.request("POST", "/reset", "{}", headers)
    reset = connection.getresponse()
    reset.read()
    token = reset.getheader("envwire-session")  # envwire's session; openenv-core has none
    if token:
        headers["envwire-session"] = token

    def step() -> bytes:
        connection.request("POST", "/step", body, headers)
        return connection.getresponse().read()

    for _ in range(min(200, steps)):
        step()
    start = time.perf_counter()
    for _ in range(steps):
        reply = step()
    elapsed = time.perf_counter() - start
    connection.close()
    assert json.loads(reply)["reward"] == 0.5, reply
    return steps / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3000, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--pin",
        nargs="+",
        choices=["none", "split"],
        default=["none", "split"],
        help="CPU placements to measure (default: both)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 200 steps, 1 round, no pinning"
    )
    parser.add_argument(
        "--openenv-checkout",
        type=Path,
        default=os.environ.get("OPENENV_CHECKOUT") or None,
        help="also measure OpenEnv's own echo and connect4 envs from this checkout of its "
        "repository, served by openenv-core and by envwire (default: $OPENENV_CHECKOUT)",
    )
    parser.add_argument("--serve-openenv", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--serve-ceiling", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_openenv:
        serve_openenv(args.serve_openenv)
        return 0
    if args.serve_ceiling:
        serve_ceiling(args.serve_ceiling)
        return 0

    if args.quick:
        args.steps, args.rounds, args.pin = 200, 1, ["none"]
    servers = {"openenv-core": start_openenv(), "envwire": start_envwire()}
    ceiling = start_ceiling()
    summary: dict[str, Any] = {"steps": args.steps, "rounds": args.rounds, "cpus": os.cpu_count()}
    try:
        for pin in args.pin:
            summary[pin] = measure(servers, pin, args.steps, args.rounds, ceiling)
    finally:
        for _, process in [*servers.values(), ceiling]:
            process.terminate()
            process.wait(30)
    if args.openenv_checkout is not None:
        from openenv_repo import measure_repo

        summary["repository"] = measure_repo(args.openenv_checkout, args.steps, args.rounds)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


def bench_openenv_cases(settings: Settings) -> list[Result]:
    """The suite's OpenEnv rows: both servers, WebSocket and HTTP, ratios to openenv-core
    (target 1.5x), under the scheduler's placement."""
    steps = max(200, int(settings.seconds * 1000))
    servers = {"openenv-core": start_openenv(), "envwire": start_envwire()}
    ceiling = start_ceiling()
    try:
        out = measure(servers, "none", steps, settings.runs, ceiling)
    finally:
        for _, process in [*servers.values(), ceiling]:
            process.terminate()
            process.wait(10)
    results = []
    for transport, label in (("websocket", "WebSocket"), ("http", "HTTP (httpx)")):
        medians = out[transport]["median"]
        peer = f"openenv: openenv-core's server, {label}"
        results.append(Result(peer, medians["openenv-core"]))
        results.append(
            Result(
                f"openenv: envwire, {label}",
                medians["envwire"],
                baseline=peer,
                ratio=out[transport]["ratio"],
                target=1.5,
            )
        )
    results.append(
        Result("openenv: the client's own ceiling (no-op server)", out["ceiling"]["median"])
    )
    return results


def pin_process(pid: int, cpus: set[int]) -> None:
    """Pin every thread of ``pid`` (threads it starts later inherit the affinity)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(task), cpus)


def measure(
    servers: dict[str, tuple[str, subprocess.Popen[bytes]]],
    pin: str,
    steps: int,
    rounds: int,
    ceiling: tuple[str, subprocess.Popen[bytes]],
) -> dict[str, Any]:
    """Alternating rounds over both servers and transports, under one CPU placement."""
    every = set(range(os.cpu_count() or 1))
    split = pin == "split" and len(every) >= 2
    for _, process in [*servers.values(), ceiling]:
        pin_process(process.pid, {1} if split else every)
    os.sched_setaffinity(0, {0} if split else every)
    drivers: dict[str, Callable[[str, int], float]] = {
        "websocket": drive_ws,
        "http": drive_http,
        "http-raw": drive_http_raw,
    }
    results: dict[str, dict[str, list[float]]] = {
        t: {name: [] for name in servers} for t in drivers
    }
    bound: list[float] = []
    for round_ in range(rounds):
        for transport, drive in drivers.items():
            order = list(servers) if round_ % 2 == 0 else list(reversed(servers))
            for name in order:
                results[transport][name].append(drive(servers[name][0], steps))
        bound.append(drive_ws(ceiling[0], steps))
    os.sched_setaffinity(0, every)
    out: dict[str, Any] = {}
    print(f"\nplacement: {pin if split or pin == 'none' else 'none (one CPU only)'}")
    print(f"{'transport':<10} {'server':<13} {'median':>9} {'min':>9} {'max':>9}   steps/s")
    for transport, per_server in results.items():
        medians = {name: statistics.median(values) for name, values in per_server.items()}
        for name, values in per_server.items():
            print(
                f"{transport:<10} {name:<13} {medians[name]:>9.0f} {min(values):>9.0f} "
                f"{max(values):>9.0f}"
            )
        ratio = medians["envwire"] / medians["openenv-core"]
        print(f"{transport:<10} {'ratio':<13} {ratio:>9.2f}x (envwire / openenv-core, medians)")
        out[transport] = {"median": medians, "all": per_server, "ratio": ratio}
    top = statistics.median(bound)
    print(
        f"{'websocket':<10} {'ceiling':<13} {top:>9.0f} {min(bound):>9.0f} {max(bound):>9.0f}"
        "   (a server doing no work: the client's own limit)"
    )
    out["ceiling"] = {"median": top, "all": bound}
    return out


if __name__ == "__main__":
    sys.exit(main())
