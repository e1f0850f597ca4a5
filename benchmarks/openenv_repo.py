"""OpenEnv's own echo and connect4 envs, served by openenv-core and by envwire, same client.

Used by ``bench_openenv.py --openenv-checkout PATH`` (a checkout of OpenEnv's repository): each
env's unmodified app module (``echo_env.server.app:app``, ``connect4_env.server.app:app``) is
served twice, by uvicorn as its authors run it and by ``envwire serve oe/<name>=<app>``, each
in its own process, and openenv-core's ``GenericEnvClient(...).sync()`` drives both over the
WebSocket, alternating, in rounds. echo is an ``MCPEnvironment``: each step is a
``call_tool`` of its ``echo_message`` tool. connect4 plays columns 0..6 in turn and resets
when a game ends (the resets count as steps, on both servers alike).
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from envwire.ports import FRONT_ENDS

__all__ = ["APPS", "measure_repo"]

#: The envs measured: name -> app module.
APPS = {"echo": "echo_env.server.app:app", "connect4": "connect4_env.server.app:app"}


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start(command: list[str], envs: Path, port: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(envs), ENABLE_WEB_INTERFACE="false")
    process = subprocess.Popen(
        command, cwd=envs, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 300  # both import openenv-core (seconds on a loaded machine)
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{' '.join(command)} exited with {process.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return process
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    process.kill()
    raise RuntimeError(f"{' '.join(command)} did not become healthy")


def _servers(envs: Path, name: str, app: str) -> dict[str, tuple[str, subprocess.Popen[bytes]]]:
    core, wire = _port(), _port()
    uvicorn = [sys.executable, "-m", "uvicorn", app, "--port", str(core), "--log-level", "error"]
    serve = [sys.executable, "-m", "envwire", "serve", f"oe/{name}={app}", "--http", str(wire)]
    for row in FRONT_ENDS:
        if row.name != "http":
            serve += [row.flag, "off"]
    servers: dict[str, tuple[str, subprocess.Popen[bytes]]] = {}
    try:
        servers["openenv-core"] = (f"http://127.0.0.1:{core}", _start(uvicorn, envs, core))
        servers["envwire"] = (f"http://127.0.0.1:{wire}", _start(serve, envs, wire))
    except BaseException:
        for _, process in servers.values():
            process.kill()
        raise
    return servers


def _echo(env: Any, steps: int) -> None:
    action = {"type": "call_tool", "tool_name": "echo_message", "arguments": {"message": "hi"}}
    for _ in range(steps):
        result = env.step(action)
    assert result.observation["result"]["data"] == "hi", result


def _connect4(env: Any, steps: int) -> None:
    done, column = False, 0
    for _ in range(steps):
        if done:
            done = env.reset().done
            continue
        result = env.step({"column": column})
        done, column = result.done, (column + 1) % 7
    assert isinstance(result.observation["board"], list), result


DRIVERS: dict[str, Callable[[Any, int], None]] = {"echo": _echo, "connect4": _connect4}


def _drive(base: str, name: str, steps: int) -> float:
    """Steps per second of openenv-core's sync ``GenericEnvClient`` on one env."""
    from openenv.core.generic_client import GenericEnvClient

    with GenericEnvClient(base_url=base).sync() as env:
        env.reset()
        DRIVERS[name](env, min(100, steps))  # warm-up
        env.reset()
        start = time.perf_counter()
        DRIVERS[name](env, steps)
        return steps / (time.perf_counter() - start)


def measure_repo(checkout: Path, steps: int, rounds: int) -> dict[str, Any]:
    """Median steps per second of each env on both servers, and envwire's ratio; printed too.

    Raises:
        RuntimeError: the checkout has no ``envs/`` with these envs, or a server did not start.
    """
    envs = checkout / "envs"
    missing = [name for name in APPS if not (envs / f"{name}_env").is_dir()]
    if missing:
        raise RuntimeError(f"{checkout} has no envs/{missing[0]}_env: not an OpenEnv checkout?")
    out: dict[str, Any] = {}
    print(f"\nOpenEnv's own envs ({checkout}), GenericEnvClient().sync() over WebSocket")
    print(f"{'env':<10} {'server':<13} {'median':>9} {'min':>9} {'max':>9}   steps/s")
    for name, app in APPS.items():
        servers = _servers(envs, name, app)
        runs: dict[str, list[float]] = {server: [] for server in servers}
        try:
            for round_ in range(rounds):
                order = list(servers) if round_ % 2 == 0 else list(reversed(servers))
                for server in order:
                    runs[server].append(_drive(servers[server][0], name, steps))
        finally:
            for _, process in servers.values():
                process.terminate()
                process.wait(30)
        medians = {server: statistics.median(values) for server, values in runs.items()}
        for server, values in runs.items():
            print(
                f"{name:<10} {server:<13} {medians[server]:>9.0f} {min(values):>9.0f} "
                f"{max(values):>9.0f}"
            )
        ratio = medians["envwire"] / medians["openenv-core"]
        print(f"{name:<10} {'ratio':<13} {ratio:>9.2f}x (envwire / openenv-core, medians)")
        out[name] = {"median": medians, "all": runs, "ratio": ratio}
    return out
