"""An OpenEnv app's own ``session_timeout`` (openenv-core's ``ConcurrencyConfig``) is applied to
its sessions, HTTP and WebSocket, while other envs keep the server's idle limits."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.types import ConcurrencyConfig
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from envwire.app import Server
from envwire.errors import ConfigError
from envwire.kinds.openenv_core import appmodule as openenv_app
from envwire.kinds.openenv_core.appmodule import find_server
from envwire.registry import Catalog, EnvSpec, with_openenv
from envwire.settings import Settings
from envwire.testing import wait_until
from tests.openenv_envs.walk import MoveAction, PositionObservation, WalkEnvironment

TIMEOUT = 1.0


def walk_spec(env_id: str, session_timeout: float | None) -> EnvSpec:
    """The walk env as an app built by ``create_app`` with that ``session_timeout``."""
    config = ConcurrencyConfig(max_concurrent_envs=8, session_timeout=session_timeout)
    app = create_app(WalkEnvironment, MoveAction, PositionObservation, concurrency_config=config)
    target = openenv_app.from_server(find_server(app), app)
    entry = "tests.openenv_envs.walk:WalkEnvironment"
    return with_openenv(EnvSpec(env_id, entry, isolation="inline", openenv={"target": target}))


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    catalog = Catalog([walk_spec("oe/Brief-v0", TIMEOUT), walk_spec("oe/Patient-v0", None)])
    config = Settings.of(gym_socket=None, http=0, grpc=None, monitor_root=None, reap_interval=0.1)
    with Server(catalog, config) as server:
        [front] = server.front_ends
        yield f"http://{front.host}:{front.port}"


def sessions(base: str) -> int:
    return int(httpx.get(f"{base}/status", timeout=10).json()["sessions"])


def test_the_apps_timeout_reaches_the_spec() -> None:
    assert walk_spec("a", TIMEOUT).session_timeout == TIMEOUT
    assert walk_spec("b", None).session_timeout is None
    # The operator's setting wins over the app's.
    settings = walk_spec("a", TIMEOUT).openenv
    spec = EnvSpec("c", "x:y", openenv=settings, session_timeout=60.0)
    assert with_openenv(spec).session_timeout == 60


@pytest.mark.parametrize("value", [0, -1.0, float("inf"), "soon"])
def test_a_bad_session_timeout_is_refused(value: object) -> None:
    with pytest.raises(ConfigError, match="session_timeout must be a positive number"):
        EnvSpec("x", "gym:CartPole-v1", session_timeout=value)  # type: ignore[arg-type]


def test_an_idle_http_session_is_closed_after_the_apps_timeout(base: str) -> None:
    with httpx.Client(base_url=base, timeout=10) as http:
        brief = http.post("/envs/oe/Brief-v0/reset").headers["envwire-session"]
        patient = http.post("/envs/oe/Patient-v0/reset").headers["envwire-session"]
        step = {"action": {"direction": "right"}}
        # Used within the timeout, the session lives on.
        for _ in range(3):
            time.sleep(TIMEOUT / 5)
            assert http.post(
                "/envs/oe/Brief-v0/step", json=step, headers={"envwire-session": brief}
            ).is_success
        assert wait_until(lambda: sessions(base) == 1, 10)  # the brief one went
        gone = http.post("/envs/oe/Brief-v0/step", json=step, headers={"envwire-session": brief})
        assert gone.status_code == 404
        kept = http.post(
            "/envs/oe/Patient-v0/step", json=step, headers={"envwire-session": patient}
        )
        assert kept.is_success  # the other env keeps the server's 300 s
        http.delete("/envs/oe/Patient-v0/session", headers={"envwire-session": patient})


def test_an_idle_websocket_session_is_told_and_closed(base: str) -> None:
    with connect("ws" + base[4:] + "/envs/oe/Brief-v0/ws") as ws:
        ws.send('{"type":"reset"}')
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"
        notice = json.loads(ws.recv(timeout=10))
        assert notice["type"] == "error" and "without requests" in notice["data"]["message"]
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=10)
    assert wait_until(lambda: sessions(base) == 0, 10)
