"""Start a server for an env and connect to it: OpenEnv's ``from_docker_image`` without Docker.

::

    from envwire.launcher import launch

    with launch("envwire/Coding-v0") as env:          # a local `envwire serve` process
        env.reset()
        env.step({"code": "print(1 + 1)"})

    with launch("CartPole-v1", protocol="http") as env:  # a gymnasium.Env
        env.reset(seed=0)

:func:`launch` starts ``python -m envwire serve <env> --http 0 --workers 1`` (every other front
end off), waits for its "listening" line, and connects with :func:`envwire.make`. With
``image=...`` and a reachable Docker engine it runs that image instead (``docker run -d -p
127.0.0.1::<port>``) and connects once ``/health`` answers; without an engine it falls back to
a local process for the same env id. Closing the client (or leaving the ``with`` block) stops
the server.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import gymnasium
import httpx

from envwire.adapters.connect import make
from envwire.errors import ConfigError, TransportError
from envwire.ports import FRONT_ENDS, HTTP

if TYPE_CHECKING:
    from envwire.client.openenv import TypedClient

__all__ = ["Launched", "docker_available", "launch"]

log = logging.getLogger("envwire.launcher")

_LISTENING = re.compile(r"^envwire: http listening on (?P<host>\S+):(?P<port>\d+)( \(TLS\))?$")


def docker_available(timeout: float = 10.0) -> bool:
    """Whether a Docker CLI is installed and its engine answers."""
    docker = shutil.which("docker")
    if docker is None:
        return False
    try:
        done = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and bool(done.stdout.strip())


class Launched:
    """A client connected to a server this process started; closing it stops the server.

    Attributes:
        env: the connected client (a ``gymnasium.Env`` or a ``TypedClient``).
        url: the URL it connected to.
        output: the server's output so far (local processes).
    """

    def __init__(
        self,
        env: gymnasium.Env[Any, Any] | TypedClient,
        url: str,
        stop: Callable[[], None],
        output: list[str],
    ) -> None:
        self.env = env
        self.url = url
        self.output = output
        self._stop = stop
        self._closed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def close(self) -> None:
        """Close the client, then stop the server (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.env.close()
        finally:
            self._stop()

    def __enter__(self) -> gymnasium.Env[Any, Any] | TypedClient:
        return self.env

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Launched({self.url})"


def launch(
    env: str,
    *,
    protocol: str = "ws",
    image: str | None = None,
    host: str = "127.0.0.1",
    args: Sequence[str] = (),
    start_timeout: float = 60.0,
    **connect_kwargs: object,
) -> Launched:
    """Serve ``env`` from a new server and connect to it.

    Args:
        env: an ``envwire serve`` env argument (``CartPole-v1``, ``my/Env-v0=pkg.mod:Class``).
        protocol: ``"ws"`` or ``"http"``.
        image: a Docker image running ``envwire serve`` on port 8000; used only when a Docker
            engine is reachable.
        host: the address the local server binds.
        args: extra ``envwire serve`` arguments (``--step-timeout 5``, ``--config f.toml``).
        start_timeout: seconds to wait for the server.
        connect_kwargs: passed to :func:`envwire.make` (``timeout``, ``observation_type``...).
            A ``token`` is also required by a local server (through a private token file),
            which is what lets ``host`` be a non-loopback address.

    Raises:
        ConfigError: the server exited or did not come up in time (its output included).
        TransportError, EnvwireError: as :func:`envwire.make`.
    """
    if protocol not in ("ws", "http"):
        raise ConfigError(f"protocol must be 'ws' or 'http', got {protocol!r}")
    env_id = env.partition("@")[0]
    env_id = env_id.partition("=")[0] if "=" in env_id else env_id
    if image is not None:
        if docker_available():
            return _launch_docker(
                image,
                env_id,
                protocol=protocol,
                start_timeout=start_timeout,
                connect_kwargs=connect_kwargs,
            )
        log.warning("no Docker engine is reachable; serving %s from a local process", env_id)
    return _launch_local(
        env,
        env_id,
        protocol=protocol,
        host=host,
        args=args,
        start_timeout=start_timeout,
        connect_kwargs=connect_kwargs,
    )


def _connect(url: str, connect_kwargs: dict[str, object]) -> gymnasium.Env[Any, Any] | TypedClient:
    return make(url, **connect_kwargs)


def _launch_local(
    env: str,
    env_id: str,
    *,
    protocol: str,
    host: str,
    args: Sequence[str],
    start_timeout: float,
    connect_kwargs: dict[str, object],
) -> Launched:
    command = [sys.executable, "-m", "envwire", "serve", env, "--host", host, HTTP.flag, "0"]
    command += ["--workers", "1"]  # one client: one process serves it, and starts soonest
    for row in FRONT_ENDS:
        if row is not HTTP:
            command += [row.flag, "off"]
    token_dir = None
    if connect_kwargs.get("token"):
        token_dir = tempfile.TemporaryDirectory(prefix="envwire-launch-")
        token_file = os.path.join(token_dir.name, "tokens")
        with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as file:
            file.write(str(connect_kwargs["token"]) + "\n")
        command += ["--token-file", token_file]
    command += list(args)
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )
    output: list[str] = []
    found: dict[str, str] = {}
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            match = _LISTENING.match(line.strip())
            if match:
                found.update(match.groupdict())
                ready.set()
        ready.set()

    threading.Thread(target=read, name="envwire-launcher", daemon=True).start()

    def stop() -> None:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        if process.stdout is not None:
            process.stdout.close()
        if token_dir is not None:
            token_dir.cleanup()

    if not ready.wait(start_timeout) or not found:
        stop()
        raise ConfigError(f"envwire serve {env} did not start:\n" + "".join(output[-40:]))
    url = f"{protocol}://{found['host']}:{found['port']}/envs/{quote(env_id, safe='/:')}"
    try:
        client = _connect(url, connect_kwargs)
    except BaseException:
        stop()
        raise
    return Launched(client, url, stop, output)


def _launch_docker(
    image: str,
    env_id: str,
    *,
    protocol: str,
    start_timeout: float,
    connect_kwargs: dict[str, object],
) -> Launched:
    docker = shutil.which("docker") or "docker"
    started = subprocess.run(
        [docker, "run", "-d", "--rm", "-p", "127.0.0.1::8000", image],
        capture_output=True,
        text=True,
        timeout=start_timeout,
        check=False,
    )
    if started.returncode != 0:
        raise ConfigError(f"docker run {image} failed: {started.stderr.strip()}")
    container = started.stdout.strip()

    def stop() -> None:
        subprocess.run(
            [docker, "rm", "-f", container], capture_output=True, timeout=60, check=False
        )

    try:
        port = subprocess.run(
            [docker, "port", container, "8000/tcp"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()[0]
        address = port.rsplit(":", 1)
        base = f"http://127.0.0.1:{address[-1]}"
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise TransportError(f"{image}: /health did not answer within {start_timeout:g} s")
            time.sleep(0.25)
        url = f"{protocol}://127.0.0.1:{address[-1]}/envs/{quote(env_id, safe='/:')}"
        client = _connect(url, connect_kwargs)
    except BaseException:
        stop()
        raise
    return Launched(client, url, stop, [])
