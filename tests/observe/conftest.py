"""An in-process server with every front end, for the observability tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import envwire
from envwire.app import Server
from envwire.ports import FRONT_ENDS
from envwire.registry import Catalog, parse_env_arg
from envwire.settings import Settings

ENVS = (
    "CartPole-v1",
    "envwire/Catch-v0",
    "test/Raise-v0=envwire.testing.envs:RaiseEnv",
    "test/Crash-v0=envwire.testing.envs:CrashEnv@process",
)
#: Every front end on a free port (each row of envwire.ports, by its settings key).
ALL_FRONT_ENDS = {row.key: 0 for row in FRONT_ENDS}


def start(**config: Any) -> Server:
    """A started in-process server over :data:`ENVS` (every front end on a free port unless
    ``config`` says otherwise; ``config`` holds settings keys)."""
    server = Server(
        Catalog([parse_env_arg(e) for e in ENVS]), Settings.of(**{**ALL_FRONT_ENDS, **config})
    )
    server.start()
    return server


def url(server: Server, front_end: str, path: str = "") -> str:
    """``scheme://host:port/path`` of a front end."""
    host, port = server.addresses[front_end]
    scheme = {"gym-socket": "gym-socket", "http": "http", "grpc": "grpc"}[front_end]
    return f"{scheme}://{host}:{port}/{path.lstrip('/')}"


def play_episode(address: str, policy: Callable[[int, Any], Any], seed: int = 0) -> list[Any]:
    """Connect, reset with ``seed`` and step ``policy(t, env)`` until the episode ends (at most
    10,000 steps); the observations after each step."""
    env = envwire.make(address)
    try:
        env.reset(seed=seed)
        observations: list[Any] = []
        for t in range(10_000):
            obs, _, terminated, truncated, _ = env.step(policy(t, env))
            observations.append(obs)
            if terminated or truncated:
                return observations
        raise AssertionError("the episode did not end in 10,000 steps")
    finally:
        env.close()


def scrape(address: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """GET a metrics URL and parse it with prometheus-client's own text-format parser:
    {(sample name, labels): value}."""
    response = httpx.get(address, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return samples_of(response.text)


def samples_of(text: str | bytes) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Prometheus' text format, parsed: {(sample name, labels): value}."""
    if isinstance(text, bytes):
        text = text.decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    """A sample's value (0 when absent)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A server with every front end, recording nothing."""
    running = start(monitor_root=str(tmp_path / "monitor"))
    try:
        yield running
    finally:
        running.shutdown()
