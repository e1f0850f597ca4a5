"""A pytest plugin that points OpenEnv's own tests at a live envwire server.

Loaded by ``benchmarks/openenv_protocol_tests.py`` (``-p openenv_live_plugin``). OpenEnv's tests
build an app with openenv-core (``create_app``, ``HTTPEnvServer(...).register_routes``) and
drive it in-process with Starlette's ``TestClient``; some start ``uvicorn`` on a port
(``run_server`` in ``tests/envs/test_websockets.py``). With this plugin:

- ``TestClient(app)`` starts an envwire server in this process, on a free port, serving what
  the app was built from (read back with
  ``envwire.kinds.openenv_core.appmodule.find_server``), and sends every request and
  WebSocket message over real sockets to it;
- ``run_server(module, port, ...)`` runs ``envwire serve oe/test=<module>:app --http <port>``.

openenv-core's server never runs. ``ENVWIRE_OPENENV_COMPAT`` (``default`` or ``strict``)
chooses envwire's mode; ``ENVWIRE_LIVE=0`` keeps openenv-core (the baseline run) and only
gives ``run_server`` the same start timeout. Whether each test reached a server is written as
JSON lines to ``ENVWIRE_LIVE_REPORT``.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

LIVE = os.environ.get("ENVWIRE_LIVE", "1") != "0"
COMPAT = os.environ.get("ENVWIRE_OPENENV_COMPAT", "default")
START_TIMEOUT = float(os.environ.get("ENVWIRE_START_TIMEOUT", "180"))
REPORT = os.environ.get("ENVWIRE_LIVE_REPORT")

_servers: list[Any] = []
#: Whether the running test reached a server (reset before each test).
_used = {"server": False}


class LiveWebSocket:
    """The parts of Starlette's ``WebSocketTestSession`` OpenEnv's tests use, over a socket."""

    def __init__(self, url: str) -> None:
        from websockets.sync.client import connect

        self._ws = connect(url, max_size=None, open_timeout=30)

    def __enter__(self) -> LiveWebSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_text(self, data: str) -> None:
        self._ws.send(data)

    def send_bytes(self, data: bytes) -> None:
        self._ws.send(data)

    def send_json(self, data: Any, mode: str = "text") -> None:
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
        self._ws.send(text if mode == "text" else text.encode())

    def _receive(self) -> str | bytes:
        from starlette.websockets import WebSocketDisconnect
        from websockets.exceptions import ConnectionClosed

        try:
            return self._ws.recv(timeout=60)
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd is not None else 1006
            raise WebSocketDisconnect(code) from None

    def receive_text(self) -> str:
        message = self._receive()
        return message if isinstance(message, str) else message.decode()

    def receive_bytes(self) -> bytes:
        message = self._receive()
        return message.encode() if isinstance(message, str) else message

    def receive_json(self, mode: str = "text") -> Any:
        return json.loads(self._receive())

    def close(self, code: int = 1000, reason: str | None = None) -> None:
        self._ws.close(code, reason or "")


class LiveTestClient(httpx.Client):
    """``TestClient(app)`` against an in-process envwire serving what ``app`` was built from."""

    def __init__(self, app: Any, base_url: str = "http://testserver", **kwargs: Any) -> None:
        _used["server"] = True
        from envwire.app import Server
        from envwire.kinds.openenv_core.appmodule import find_server, from_server
        from envwire.registry import Catalog, EnvSpec

        server_obj = find_server(app)
        target = from_server(server_obj, None if server_obj is app else app)
        spec = EnvSpec(
            "openenv/test", "openenv:test", isolation="inline", openenv={"target": target}
        )
        from envwire.settings import Settings

        config = Settings.of(http=0, gym_socket=None, grpc=None, openenv_compat=COMPAT)
        self.server = Server(Catalog([spec]), config)
        self.server.start()
        _servers.append(self.server)
        host, port = self.server.addresses["http"]
        self.live_base = f"http://{host}:{port}"
        self.app = app
        super().__init__(base_url=self.live_base, timeout=60)

    def websocket_connect(self, path: str, *args: Any, **kwargs: Any) -> LiveWebSocket:
        return LiveWebSocket("ws" + self.live_base[4:] + path)


@contextlib.contextmanager
def live_run_server(
    module_path: str,
    port: int = 8000,
    startup_timeout: float = 10.0,
    env_vars: dict[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """``run_server`` of OpenEnv's ``test_websockets.py``, serving the module with envwire
    (or, with ``ENVWIRE_LIVE=0``, with uvicorn as the original does)."""
    _used["server"] = True
    env = dict(os.environ, **(env_vars or {}))
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), env.get("PYTHONPATH", "")])
    if LIVE:
        command = [sys.executable, "-m", "envwire", "serve", f"oe/test={module_path}:app"]
        command += ["--http", str(port), "--gym-socket", "off", "--grpc", "off"]
        command += ["--openenv-compat", COMPAT]
    else:
        command = [sys.executable, "-m", "uvicorn", f"{module_path}:app"]
        command += ["--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + max(startup_timeout, START_TIMEOUT)
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                    break
            if process.poll() is not None:
                raise TimeoutError(f"server exited: {process.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
            time.sleep(0.3)
        else:
            raise TimeoutError(
                f"server did not start within {max(startup_timeout, START_TIMEOUT)} s"
            )
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


def pytest_configure(config: pytest.Config) -> None:
    if LIVE:
        import fastapi.testclient
        import starlette.testclient

        fastapi.testclient.TestClient = LiveTestClient  # type: ignore[misc,assignment]
        starlette.testclient.TestClient = LiveTestClient  # type: ignore[misc,assignment]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "run_server"):
            module.run_server = live_run_server


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    _used["server"] = False
    yield
    for server in _servers:
        server.shutdown()
    _servers.clear()
    if REPORT:
        with Path(REPORT).open("a") as out:
            out.write(json.dumps({"test": item.nodeid, "wire": _used["server"]}) + "\n")
