"""OpenEnv's own envs have no step deadline unless the operator sets one, as on openenv-core
(which answers a 35 s step at 35 s); every other env keeps its 30 s.

The server runs :mod:`tests.openenv_envs.sleepy`, whose step sleeps as long as its action asks,
twice: ``oe/Sleepy-v0`` as named, and ``oe/Cut-v0`` with ``step_timeout = 2`` in its
``[[env]]`` table.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv.core.generic_client import GenericEnvClient
from websockets.sync.client import connect

from envwire.cli import build_catalog
from envwire.registry import DEFAULT_STEP_TIMEOUT, EnvSpec, with_openenv
from envwire.settings import ServerSettings
from envwire.settings.config import read
from envwire.testing import ServerProcess
from tests.frontends.openenv.conftest import ROOT, only_http

SLEEPY = "tests.openenv_envs.sleepy:SleepyEnvironment"
#: The step openenv-core answers and envwire cut off at 30 s before.
LONG_STEP = 35.0
#: Seconds to wait for the server: the env's module imports openenv-core first.
START = 300.0
pytestmark = pytest.mark.timeout(START + 120)

CONFIG = f"""
[[env]]
id = "oe/Sleepy-v0"
entry_point = "{SLEEPY}"

[[env]]
id = "oe/Cut-v0"
entry_point = "{SLEEPY}"
step_timeout = 2
"""


# --- the deadline each env gets -------------------------------------------------------------


def test_openenv_envs_have_no_deadline_and_the_others_keep_theirs() -> None:
    assert with_openenv(EnvSpec("oe/S-v0", SLEEPY)).resolved_step_timeout is None
    assert EnvSpec("CartPole-v1", "gym:CartPole-v1").resolved_step_timeout == DEFAULT_STEP_TIMEOUT
    assert DEFAULT_STEP_TIMEOUT == 30.0
    typed = EnvSpec("e", "envwire.envs.echo:EchoEnv")  # envwire's own typed env: not OpenEnv's
    assert with_openenv(typed).resolved_step_timeout == 30.0


def test_the_operator_sets_an_openenv_envs_deadline(tmp_path: Path) -> None:
    config = tmp_path / "envwire.toml"
    config.write_text(CONFIG)
    tables = read(config).envs
    catalog = build_catalog([], tables, ServerSettings())
    assert catalog["oe/Sleepy-v0"].resolved_step_timeout is None
    assert catalog["oe/Cut-v0"].resolved_step_timeout == 2.0
    # --step-timeout sets every env's, OpenEnv's own included.
    every = build_catalog(["CartPole-v1"], tables, ServerSettings(step_timeout=7.0))
    assert {spec.resolved_step_timeout for spec in every.values()} == {7.0}


# --- on the wire ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    config = tmp_path_factory.mktemp("long-steps") / "envwire.toml"
    config.write_text(CONFIG)
    args = (*only_http(), "--config", str(config))
    with ServerProcess((), args, front_ends=("http",), cwd=ROOT, start_timeout=START) as proc:
        yield f"http://{proc.host}:{proc.ports['http']}"


def test_a_configured_step_timeout_still_cuts_the_step(base: str) -> None:
    ws_url = base.replace("http://", "ws://") + "/envs/oe/Cut-v0/ws"
    with connect(ws_url, proxy=None) as ws:
        ws.send(json.dumps({"type": "reset", "data": {}}))
        assert json.loads(ws.recv(timeout=30))["type"] == "observation"
        started = time.monotonic()
        ws.send(json.dumps({"type": "step", "data": {"seconds": 12}}))
        error = json.loads(ws.recv(timeout=30))
    assert time.monotonic() - started < 10  # cut at 2 s, well before the step's 12
    assert error["type"] == "error"
    assert error["data"]["code"] == "EXECUTION_ERROR"
    assert "step did not return within 2 s" in error["data"]["message"]
    with httpx.Client(base_url=f"{base}/envs/oe/Cut-v0", timeout=30) as http:
        session = {"envwire-session": http.post("/reset", json={}).headers["envwire-session"]}
        cut = http.post("/step", json={"action": {"seconds": 6}}, headers=session)
    assert cut.status_code == 504
    assert "within 2 s" in cut.json()["detail"]


@pytest.mark.slow
def test_a_35_s_step_of_an_openenv_env_is_answered(base: str) -> None:
    """Over the WebSocket (openenv-core's own client) and HTTP at once: one 35 s wait."""
    results: dict[str, Any] = {}

    def over_websocket() -> None:
        with GenericEnvClient(base_url=f"{base}/envs/oe/Sleepy-v0").sync() as env:
            env.reset()
            results["ws"] = env.step({"seconds": LONG_STEP})
            results["ws next"] = env.step({"seconds": 0.0})

    def over_http() -> None:
        with httpx.Client(base_url=f"{base}/envs/oe/Sleepy-v0", timeout=LONG_STEP + 30) as http:
            session = {"envwire-session": http.post("/reset", json={}).headers["envwire-session"]}
            results["http"] = http.post(
                "/step", json={"action": {"seconds": LONG_STEP}}, headers=session
            )

    threads = [threading.Thread(target=run) for run in (over_websocket, over_http)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LONG_STEP + 60)
    assert results["ws"].observation["slept"] >= LONG_STEP
    assert results["ws"].reward == 1.0
    assert results["ws next"].observation["slept"] < LONG_STEP  # the session went on
    assert results["http"].status_code == 200
    answer = results["http"].json()
    assert answer["observation"]["slept"] >= LONG_STEP
    assert (answer["reward"], answer["done"]) == (1.0, False)
