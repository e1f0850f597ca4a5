"""Ray workers on a simulated two-node cluster (``ray.cluster_utils.Cluster``): placement by
resources, PACK and SPREAD, a node dying mid-episode, and no actor outliving its session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray")

from envwire import messages as m
from envwire.errors import EnvCrashedError
from envwire.registry import EnvSpec
from envwire.runtime.ray import RayRuntime
from envwire.session import Session, State
from tests.ray_helpers import env_actors, eventually, live_placement_groups, no_env_actors


class TwoNodes:
    """The cluster: a head (4 CPUs, resource ``head``) and a worker (2 CPUs, ``godot``)."""

    def __init__(self) -> None:
        import ray
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": 4,
                "resources": {"head": 1},
                "include_dashboard": True,
                # None: the first free port from 8265 on, as ray.init picks it (the Cluster's
                # default is 8265 itself, which another suite's Ray may hold)
                "dashboard_port": None,
            },
        )
        try:
            self.worker_node = self.cluster.add_node(num_cpus=2, resources={"godot": 1})
            self.cluster.wait_for_nodes(timeout=60)
            ray.init(address=self.cluster.address, namespace="envwire")
        except BaseException:
            self.cluster.shutdown()
            raise
        self.address = str(ray.get_runtime_context().gcs_address)
        self.head = self.cluster.head_node.node_id
        self.worker = self.worker_node.node_id

    def shutdown(self) -> None:
        import ray

        try:
            ray.shutdown()
        finally:
            self.cluster.shutdown()


@pytest.fixture(scope="module")
def nodes() -> Iterator[TwoNodes]:
    cluster = TwoNodes()
    try:
        yield cluster
    finally:
        cluster.shutdown()


@pytest.fixture(scope="module")
def runtime(nodes: TwoNodes) -> RayRuntime:
    return RayRuntime(place_timeout=20)


@pytest.fixture(autouse=True)
def _no_leaks(nodes: TwoNodes) -> Iterator[None]:
    yield
    assert no_env_actors(nodes.address), "an env actor outlived its session"
    assert eventually(lambda: not live_placement_groups(nodes.address)), "a group outlived it"


def cartpole(**ray: Any) -> EnvSpec:
    return EnvSpec("CartPole-v1", "gym:CartPole-v1", isolation="ray", ray=ray)


def test_custom_resources_choose_the_node(runtime: RayRuntime, nodes: TwoNodes) -> None:
    on_worker = runtime.make_worker(cartpole(resources={"godot": 1}))
    on_head = runtime.make_worker(cartpole(resources={"head": 0.5}))
    try:
        assert (on_worker.node_id, on_head.node_id) == (nodes.worker, nodes.head)
        assert {a.node_id for a in env_actors(nodes.address)} == {nodes.worker, nodes.head}
    finally:
        on_worker.close()
        on_head.close()


@pytest.mark.parametrize(("strategy", "spread"), [("PACK", False), ("SPREAD", True)])
def test_a_vector_sessions_actors_are_packed_or_spread(
    runtime: RayRuntime, strategy: str, spread: bool
) -> None:
    group = runtime.make_worker(cartpole(strategy=strategy), 4, "NextStep", 2)
    try:
        assert len(set(group.nodes)) == (2 if spread else 1), group.nodes
        obs, _ = group.call("reset", 0, None, timeout=10)
        assert obs.shape == (4, 4)
    finally:
        group.close()


def _play(session: Session, steps: int) -> bool:
    """Step with action 0 up to ``steps`` times; whether the episode ended."""
    for _ in range(steps):
        reply = session.handle(m.Step(action=_zeros(session)))
        if session.autoreset_mode is None and (reply.terminated or reply.truncated):
            return True
    return False


def _zeros(session: Session) -> Any:
    return 0 if session.autoreset_mode is None else np.zeros(session.num_envs, np.int64)


def test_a_dying_node_crashes_only_its_sessions(runtime: RayRuntime, nodes: TwoNodes) -> None:
    bystanders = [
        Session(cartpole(num_cpus=0, resources={"head": 0.1}), worker_factory=runtime.make_worker)
        for _ in range(2)
    ]
    victims = [
        Session(
            cartpole(strategy="SPREAD"),
            num_envs=4,
            autoreset_mode="NextStep",
            workers=2,
            worker_factory=runtime.make_worker,
        )
        for _ in range(2)
    ]
    try:
        for victim in victims:
            assert set(victim.worker.nodes) == {nodes.head, nodes.worker}
        for session in bystanders + victims:
            session.handle(m.Reset(seed=1))
            _play(session, 3)  # mid-episode

        nodes.cluster.remove_node(nodes.worker_node)

        for victim in victims:
            with pytest.raises(EnvCrashedError) as caught:
                _play(victim, 1)
            message = str(caught.value)
            assert "crashed during step" in message and nodes.worker[:8] in message, message
            assert "the node is gone" in message, message
            assert victim.state is State.BROKEN
        for bystander in bystanders:
            assert _play(bystander, 500), "a bystander's episode did not run to its end"
        for victim in victims:
            victim.handle(m.Reset(seed=2))  # a fresh group, on the node that is left
            assert victim.worker.nodes == [nodes.head, nodes.head]
            _play(victim, 3)
        assert len(env_actors(nodes.address)) == 2 + 2 * 2
    finally:
        for session in bystanders + victims:
            session.close()
