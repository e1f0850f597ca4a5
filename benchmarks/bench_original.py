"""gym-socket: envwire's server beside the original gym-socket-api server, on its own protocol.

Run: ``python benchmarks/bench_original.py --original DIR --python PATH [--seconds S] [--runs R]
[--quick]``. ``DIR`` is a checkout of the original server (the public ``gym-socket-api``
repository: ``__main__.py``, ``server.py``, ``handler.py``, ``proto.py``) and ``PATH`` a Python
that can run it (the old ``gym`` package and numpy < 2 installed). Without both, or when the
checkout or the Python is missing, it prints why it skips and exits 0 (CI has neither).

Both servers run in processes of their own, with their default settings; the client is this
process: envwire's client with handshake flags 0 (the seed's JSON path, the only one the
original speaks), stepping CartPole one step at a time, the same client against each server in
alternating rounds. The figure is envwire's steps/s over the original's (target: 1.2). Before
the rounds, one handshake, reset and step go to each server over a plain socket, to check that
the original answers our client's bytes with its defaults, and to report the bytes of each
server's replies (the same layout from both; the observation's JSON text, and so the reply's
length, varies by a byte or two with the values).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import envwire
from envwire import messages as m
from envwire.protocols.gymsocket import ClientConnection, Flags
from envwire.protocols.gymsocket.packets import NeedData
from envwire.testing import ServerProcess
from harness import Settings, alternate, compare, machine, print_table, rate, step_loop

__all__ = ["main", "original_server", "step_bytes"]

#: The files a checkout of the original server has.
_ORIGINAL_FILES = ("__main__.py", "server.py", "handler.py", "proto.py")


def _skip_reason(original: str | None, python: str | None) -> str | None:
    """Why the comparison cannot run here, or None when it can."""
    if original is None or python is None:
        return "needs --original DIR (a gym-socket-api checkout) and --python PATH (its venv)"
    missing = [f for f in _ORIGINAL_FILES if not (Path(original) / f).is_file()]
    if missing:
        return f"no gym-socket-api checkout at {original} (missing {', '.join(missing)})"
    if not Path(python).is_file():
        return f"no Python at {python}"
    probe = subprocess.run(
        [python, "-c", "import gym, numpy"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        return f"{python} cannot import gym and numpy: {probe.stderr.strip()[-200:]}"
    return None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def original_server(checkout: str, python: str, timeout: float = 30.0) -> Iterator[int]:
    """The original server (its defaults but the port) in a process group of its own; yields
    its port once it accepts connections, and ends the group (its per-connection handler
    processes included) on exit."""
    port = _free_port()
    process = subprocess.Popen(
        [python, "__main__.py", "--port", str(port)],
        cwd=checkout,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the original server exited with {process.returncode}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the original server did not listen within {timeout:g} s")
            time.sleep(0.1)
        yield port
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _exchange(sock: socket.socket, codec: ClientConnection, request: bytes) -> tuple[object, int]:
    """Send ``request``, read until its reply parses: (the reply, its bytes)."""
    sock.sendall(request)
    size = 0
    while True:
        event = codec.next_event()
        if not isinstance(event, NeedData):
            return event, size
        data = sock.recv(65536)
        if not data:
            raise RuntimeError("the server closed the connection")
        size += len(data)
        codec.receive_data(data)


def step_bytes(port: int, env_id: str = "CartPole-v1") -> dict[str, Any]:
    """One flags-0 handshake, reset and step over a plain socket: what each reply was and its
    size in bytes (RuntimeError when the server does not answer as the seed says)."""
    codec = ClientConnection(Flags(0))
    with socket.create_connection(("127.0.0.1", port), 30) as sock:
        opened, handshake = _exchange(sock, codec, codec.send_handshake(env_id))
        if getattr(opened, "error", "") != "":
            raise RuntimeError(f"handshake refused: {opened}")
        spaces = []
        for which in (m.SpaceKind.ACTION, m.SpaceKind.OBSERVATION):
            described, _ = _exchange(sock, codec, codec.send_request(m.GetSpace(which)))
            spaces.append(getattr(described, "space", None))
        codec.set_spaces(*spaces)
        _, reset = _exchange(sock, codec, codec.send_request(m.Reset()))
        request = codec.send_request(m.Step(0))
        stepped, step = _exchange(sock, codec, request)
    if not isinstance(stepped, m.StepReply):
        raise RuntimeError(f"expected a step reply, got {stepped!r}")
    return {
        "handshake_reply_bytes": handshake,
        "reset_reply_bytes": reset,
        "step_request_bytes": len(request),
        "step_reply_bytes": step,
    }


def _rate(step: Callable[[], None], seconds: float) -> Callable[[], float]:
    return lambda: rate(step, seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--original", help="a checkout of gym-socket-api")
    parser.add_argument("--python", help="a Python that runs it (gym, numpy < 2)")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a smoke run (0.3 s, 1 round)")
    args = parser.parse_args()
    reason = _skip_reason(args.original, args.python)
    if reason is not None:
        print(f"bench_original: skipped: {reason}")
        return 0
    settings = Settings(seconds=0.3, runs=1) if args.quick else Settings(args.seconds, args.runs)
    names = {
        "original": "original gym-socket-api server, CartPole one step (flags 0)",
        "envwire": "envwire serve, CartPole one step (flags 0)",
    }
    with (
        original_server(args.original, args.python) as port,
        ServerProcess(["CartPole-v1"]) as server,
    ):
        sizes = {
            "original": step_bytes(port),
            "envwire": step_bytes(server.ports["gym-socket"]),
        }
        envs = {
            "original": envwire.make(f"gym-socket://127.0.0.1:{port}/CartPole-v1", flags=Flags(0)),
            "envwire": envwire.make(server.url("gym-socket", "CartPole-v1"), flags=Flags(0)),
        }
        try:
            cases = {}
            for key, env in envs.items():
                env.reset()
                cases[names[key]] = _rate(step_loop(env), settings.seconds)
            values = alternate(cases, settings.runs)
        finally:
            for env in envs.values():
                env.close()
    results = [
        compare(values, names["original"], notes=sizes["original"]),
        compare(values, names["envwire"], names["original"], target=1.2, notes=sizes["envwire"]),
    ]
    print_table({"results": [vars(r) for r in results], "machine": machine()})
    for key, size in sizes.items():
        print(f"{key}: " + ", ".join(f"{k} {v}" for k, v in size.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
