"""``envwire serve --isolation ray`` against a real local Ray: the conformance kit over every
front end, vector episodes equal to Gymnasium's, placement refusals, several servers on one
cluster, the arena's runs, and no actor outliving its session (Ray's state API)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray")

from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import SyncVectorEnv

import envwire
import envwire.ports
from envwire.client import arena
from envwire.errors import CapacityError, TransportError
from envwire.registry import parse_env_arg
from envwire.testing import CONFORMANCE_ENVS, SERVER_ARGS, ConformanceTests, ServerProcess
from tests.ray_helpers import env_actors, local_ray, no_env_actors

#: Fewer sessions than the kit's default: each one here is a Ray worker process.
CAPACITY = 3
FRONT_ENDS = tuple(row.name for row in envwire.ports.FRONT_ENDS)
#: An env that needs a custom resource no node of the test's cluster has.
GODOT_CONFIG = """
[[env]]
id = "test/NeedsGodot-v0"
entry_point = "envwire.testing.envs:TupleEnv"
isolation = "ray"

[env.ray]
resources = { godot = 1 }
"""


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    with local_ray(num_cpus=2) as address:
        yield address


def ray_server(
    address: str, *envs: str, args: tuple[str, ...] = ("--isolation", "ray")
) -> ServerProcess:
    """``envwire serve`` on the test's cluster (by default with every env in Ray actors)."""
    return ServerProcess(
        envs or CONFORMANCE_ENVS,
        (*SERVER_ARGS, "--capacity", str(CAPACITY), "--ray-address", address, *args),
        front_ends=FRONT_ENDS,
    )


@pytest.fixture(scope="module")
def server(cluster: str) -> Iterator[ServerProcess]:
    with ray_server(cluster) as running:
        yield running
    assert no_env_actors(cluster), "the server left env actors behind"


class RayConformance(ConformanceTests):
    capacity = CAPACITY
    server: ServerProcess
    cluster: str

    @pytest.fixture(autouse=True)
    def _server(self, server: ServerProcess, cluster: str) -> Iterator[None]:
        self.server, self.cluster = server, cluster
        yield
        assert no_env_actors(cluster), "an env actor outlived its session"


class TestGymSocketOnRay(RayConformance):
    def connect(self, env_id: str) -> Any:
        return envwire.make(self.server.url("gym-socket", env_id), timeout=30)


class TestGrpcOnRay(RayConformance):
    def connect(self, env_id: str) -> Any:
        return envwire.make(self.server.url("grpc", env_id), timeout=30)


class TestWebSocketOnRay(RayConformance):
    def connect(self, env_id: str) -> Any:
        return envwire.make(self.server.url("ws", f"envs/{env_id}", "http"), timeout=30)


class TestHttpOnRay(RayConformance):
    def connect(self, env_id: str) -> Any:
        return envwire.make(self.server.url("http", f"envs/{env_id}"), timeout=30)


@pytest.mark.parametrize("scheme", ["gym-socket", "grpc"])
def test_vector_batches_over_two_actors_equal_sync_vector_env(
    server: ServerProcess, cluster: str, scheme: str
) -> None:
    n = 5
    remote = envwire.make_vec(server.url(scheme, "CartPole-v1"), n, workers=2, timeout=30)
    spec = parse_env_arg("CartPole-v1")
    local = SyncVectorEnv([spec.make for _ in range(n)])
    try:
        assert len(env_actors(cluster)) == 2
        assert data_equivalence(remote.reset(seed=11), local.reset(seed=11), exact=True)
        rng = np.random.default_rng(0)
        ended = np.zeros(n, bool)
        for t in range(60):
            batch = rng.integers(0, 2, n)
            got, want = remote.step(batch), local.step(batch)
            assert data_equivalence(got, want, exact=True), f"step {t}"
            ended |= got[2] | got[3]
        assert ended.any(), "an episode should have ended and autoreset"
    finally:
        remote.close()
        local.close()
    assert no_env_actors(cluster)


@pytest.mark.parametrize("scheme", ["gym-socket", "ws"])
def test_a_session_the_cluster_cannot_place_gets_capacity_reached(
    cluster: str, tmp_path: Path, scheme: str
) -> None:
    config = tmp_path / "envwire.toml"
    config.write_text(GODOT_CONFIG)
    args = ("--config", str(config), "--place-timeout", "1")
    with ray_server(cluster, "CartPole-v1@inline", args=args) as godot:
        path = "envs/test/NeedsGodot-v0" if scheme == "ws" else "test/NeedsGodot-v0"
        url = godot.url(scheme, path, "http" if scheme == "ws" else None)
        start = time.monotonic()
        # gym-socket's handshake carries only a message; the other front ends carry the code
        expected = TransportError if scheme == "gym-socket" else CapacityError
        with pytest.raises(expected, match=r"no capacity for the env: it did not place the env's"):
            envwire.make(url, timeout=30)
        assert time.monotonic() - start < 20
        assert no_env_actors(cluster)
        envwire.make(godot.url("gym-socket", "CartPole-v1"), timeout=30).close()  # it goes on


def test_two_servers_serve_from_one_cluster(server: ServerProcess, cluster: str) -> None:
    with ray_server(cluster, "CartPole-v1") as other:
        envs = [
            envwire.make(server.url("gym-socket", "CartPole-v1"), timeout=30),
            envwire.make(other.url("grpc", "CartPole-v1"), timeout=30),
        ]
        try:
            for env in envs:
                env.reset(seed=0)
                env.step(0)
            assert len(env_actors(cluster)) == 2
            jobs = {actor.job_id for actor in env_actors(cluster, detail=True)}
            assert len(jobs) == 2, "each server is a driver of its own"
        finally:
            for env in envs:
                env.close()
        assert no_env_actors(cluster)


def test_workers_of_one_server_share_one_cluster(cluster: str) -> None:
    """``--workers 2`` with a named cluster: each worker joins it as a driver of its own, and
    every session's env is an actor there, whichever worker accepted the connection."""
    with ServerProcess(
        ["CartPole-v1@ray"],
        (*SERVER_ARGS, "--ray-address", cluster),
        front_ends=("gym-socket",),
        workers=2,
    ) as server:
        envs: list[Any] = []
        jobs: set[Any] = set()
        try:
            # Connections go to whichever worker accepts first: open sessions until both
            # workers hold some (20 all landing on one worker would be a fault of their own).
            while len(jobs) < 2 and len(envs) < 20:
                env = envwire.make(server.url("gym-socket", "CartPole-v1"), timeout=60)
                envs.append(env)
                env.reset(seed=0)
                env.step(0)
                jobs = {actor.job_id for actor in env_actors(cluster, detail=True)}
            assert len(env_actors(cluster)) == len(envs)
            assert len(jobs) == 2, f"every worker is a driver of its own, got jobs {jobs}"
        finally:
            for env in envs:
                env.close()
        deadline = time.monotonic() + 60
        while not no_env_actors(cluster) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert no_env_actors(cluster), "the workers left env actors behind"


def test_the_arena_plays_its_runs_in_ray_actors(cluster: str, tmp_path: Path) -> None:
    from tests.arena.web.conftest import make_db

    db = tmp_path / "arena.sqlite3"
    _, configs = make_db(db)
    args = ("--isolation", "ray", "--arena-db", str(db))
    seen: list[int] = []

    def play(percept: Any, info: Any) -> int:
        if not seen:  # mid-run: the run's env is an actor of the cluster
            seen.append(len(env_actors(cluster)))
        return 1 if percept % 2 else min(2, percept)

    with ray_server(cluster, "envwire/Nim-v0", "CartPole-v1", args=args) as server:
        config = {**configs["carol"], "url": f"http://127.0.0.1:{server.ports['http']}/"}
        outcomes: dict[str, Any] = {}
        summary = arena.run(config, play, run_limit=4, on_finish=outcomes.__setitem__)
        assert len(summary.finished) >= 4 and set(outcomes.values()) <= {0, 1}
        assert seen and seen[0] >= 1, "the arena's envs did not run in Ray actors"
    assert no_env_actors(cluster)
