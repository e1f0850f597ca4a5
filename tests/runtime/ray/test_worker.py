"""Ray workers on a real local Ray: calls, errors, crashes, hangs, placement, zero-copy batches,
and no actor outliving its worker."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray")

from gymnasium.vector import SyncVectorEnv

from envwire import messages as m
from envwire.errors import (
    CapacityError,
    ConfigError,
    EnvCrashedError,
    EnvError,
    EnvTimeoutError,
)
from envwire.registry import EnvSpec
from envwire.runtime.ray import RayRuntime
from envwire.runtime.ray.worker import RayGroup, RayWorker
from envwire.session import Session, State
from tests.ray_helpers import env_actors, eventually, live_placement_groups, no_env_actors

TUPLE = "envwire.testing.envs:TupleEnv"
ENVS = "envwire.testing.envs"

pytestmark = pytest.mark.usefixtures("local_ray")


def spec(entry_point: str, **fields: object) -> EnvSpec:
    return EnvSpec(entry_point.rpartition(":")[2], entry_point, isolation="ray", **fields)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def runtime() -> RayRuntime:
    return RayRuntime(place_timeout=20)


def test_calls_return_what_the_env_returns(runtime: RayRuntime, local_ray: str) -> None:
    import ray

    worker = runtime.make_worker(spec(TUPLE))
    try:
        assert isinstance(worker, RayWorker)
        assert worker.node_id == ray.get_runtime_context().get_node_id()
        action_space, observation_space = worker.call("spaces", timeout=5)
        obs, info = worker.call("reset", 0, None, timeout=5)
        assert obs in observation_space and info == {"t": 0}
        result = worker.call("step", action_space.sample(), timeout=5)
        assert result[1:] == (0.1, False, False, {"t": 1})
        assert len(env_actors(local_ray)) == 1
    finally:
        worker.close()
    assert no_env_actors(local_ray)


def test_env_exceptions_are_env_errors_and_the_env_goes_on(runtime: RayRuntime) -> None:
    worker = runtime.make_worker(spec(f"{ENVS}:RaiseEnv", kwargs={"raise_at": 1}))
    try:
        worker.call("reset", 0, None, timeout=5)
        with pytest.raises(EnvError, match=r"RaiseEnv: step raised RuntimeError: RaiseEnv fails"):
            worker.call("step", (0, [0, 1]), timeout=5)
        assert worker.call("reset", 0, None, timeout=5)[1] == {"t": 0}
    finally:
        worker.close()


def test_a_failing_constructor_is_reported_and_its_actor_freed(
    runtime: RayRuntime, local_ray: str
) -> None:
    with pytest.raises(ConfigError, match="cannot import"):
        runtime.make_worker(spec("no_such_module_xyz:Env"))
    assert no_env_actors(local_ray)


@pytest.mark.parametrize("how", ["segfault", "exit"])
def test_a_crash_is_env_crashed_naming_the_node(runtime: RayRuntime, how: str) -> None:
    worker = runtime.make_worker(spec(f"{ENVS}:CrashEnv", kwargs={"crash_at": 1, "how": how}))
    worker.call("reset", 0, None, timeout=5)
    with pytest.raises(EnvCrashedError) as caught:
        worker.call("step", (0, [0, 1]), timeout=10)
    message = str(caught.value)
    node = f"{worker.node_ip} ({worker.node_id[:8]})"
    assert f"Ray actor on node {node} crashed during step" in message, message
    assert "worker process has died" in message, message
    with pytest.raises(EnvCrashedError, match="the env's Ray actor is gone"):
        worker.call("reset", 0, None, timeout=5)
    worker.close()


def test_a_hang_is_a_timeout_and_kills_the_actor(runtime: RayRuntime, local_ray: str) -> None:
    worker = runtime.make_worker(spec(f"{ENVS}:HangEnv", kwargs={"hang_at": 1}))
    worker.call("reset", 0, None, timeout=5)
    with pytest.raises(EnvTimeoutError, match=r"step did not return within 0.5 s; its Ray actor"):
        worker.call("step", (0, [0, 1]), timeout=0.5)
    assert no_env_actors(local_ray)
    worker.close()


def test_an_actor_the_cluster_cannot_place_is_capacity_reached(local_ray: str) -> None:
    impatient = RayRuntime(place_timeout=1.0)
    godot = spec(TUPLE, ray={"resources": {"godot": 1}})
    with pytest.raises(
        CapacityError,
        match=r"no capacity for the env: it did not place the env's actor within 1 s \(it needs",
    ):
        impatient.make_worker(godot)
    group = spec(TUPLE, ray={"num_cpus": 2, "strategy": "PACK"})
    with pytest.raises(
        CapacityError,
        match=r"no capacity for the session: it did not place 2 actors \(PACK, each CPU=2\)",
    ):
        impatient.make_worker(group, 4, "NextStep", 2)
    assert no_env_actors(local_ray)
    assert eventually(lambda: not live_placement_groups(local_ray)), "a refused group is left"


def test_a_vector_group_equals_one_sync_vector_env(runtime: RayRuntime, local_ray: str) -> None:
    cartpole = EnvSpec("CartPole-v1", "gym:CartPole-v1", isolation="ray")
    group = runtime.make_worker(cartpole, 6, "NextStep", 2)
    local = SyncVectorEnv([cartpole.make for _ in range(6)])
    try:
        assert isinstance(group, RayGroup) and len(env_actors(local_ray)) == 2
        got, want = group.call("reset", 7, None, timeout=10), local.reset(seed=7)
        np.testing.assert_array_equal(got[0], want[0])
        rng = np.random.default_rng(0)
        for _ in range(60):
            actions = rng.integers(0, 2, 6)
            got, want = group.call("step", actions, timeout=10), local.step(actions)
            for g, w in zip(got[:4], want[:4], strict=True):
                np.testing.assert_array_equal(g, w)
    finally:
        group.close()
        local.close()
    assert no_env_actors(local_ray)


def test_a_vector_step_is_one_actor_call_per_worker(runtime: RayRuntime, local_ray: str) -> None:
    from ray.util.state import list_tasks

    cartpole = EnvSpec("CartPole-v1", "gym:CartPole-v1", isolation="ray")
    group = runtime.make_worker(cartpole, 8, "NextStep", 2)
    steps = 7
    try:
        assert isinstance(group, RayGroup)
        group.call("reset", 0, None, timeout=10)
        for _ in range(steps):
            group.call("step", np.zeros(8, np.int64), timeout=10)
        actors = {a.actor_id for a in env_actors(local_ray)}

        def calls() -> dict[str, int]:
            tasks = list_tasks(
                address=local_ray,
                filters=[("name", "=", "EnvActor.call")],
                limit=10_000,
                raise_on_missing_output=False,
            )
            counted = dict.fromkeys(actors, 0)
            for task in tasks:
                if task.actor_id in counted:
                    counted[task.actor_id] += 1
            return counted

        # spaces (asked of the first actor), one reset, then one call per step, per actor;
        # Ray reports finished tasks to its state API a moment later
        want = sorted([1 + steps, 1 + 1 + steps])
        assert eventually(lambda: sorted(calls().values()) == want), calls()
    finally:
        group.close()


def test_a_vector_session_has_at_most_one_actor_per_cluster_cpu(
    runtime: RayRuntime, local_ray: str
) -> None:
    cartpole = EnvSpec("CartPole-v1", "gym:CartPole-v1", isolation="ray")
    group = runtime.make_worker(cartpole, 6, "NextStep", 5)
    try:
        assert runtime.max_workers() == 2
        assert isinstance(group, RayGroup) and group.sizes == [3, 3]
        assert len(env_actors(local_ray)) == 2
    finally:
        group.close()


def test_large_batches_are_read_in_place_from_the_object_store(runtime: RayRuntime) -> None:
    frames = spec(f"{ENVS}:FramesEnv")
    worker = runtime.make_worker(frames, 8, "NextStep", 1)  # 8 x 84x84x4 bytes: 225 kB
    try:
        obs, _ = worker.call("reset", 0, None, timeout=10)
        assert obs.shape == (8, 84, 84, 4) and obs.dtype == np.uint8
        assert not obs.flags.writeable, "a copy: the batch did not come from the object store"
        obs, *_ = worker.call("step", np.zeros(8, np.int64), timeout=10)
        assert not obs.flags.writeable and int(obs[0, 0, 0, 0]) == 1
    finally:
        worker.close()


def test_reset_after_a_crash_makes_a_fresh_actor(runtime: RayRuntime, local_ray: str) -> None:
    crash = spec(f"{ENVS}:CrashEnv", kwargs={"crash_at": 2, "how": "exit"})
    session = Session(crash, worker_factory=runtime.make_worker)
    try:
        first = env_actors(local_ray)[0].actor_id
        session.handle(m.Reset(seed=0))
        session.handle(m.Step(action=(0, np.array([0, 1], np.int8))))
        with pytest.raises(EnvCrashedError):
            session.handle(m.Step(action=(0, np.array([0, 1], np.int8))))
        assert session.state is State.BROKEN
        session.handle(m.Reset(seed=0))
        assert session.state is State.RUNNING
        assert [a.actor_id for a in env_actors(local_ray)] != [first]
        assert len(env_actors(local_ray)) == 1
    finally:
        session.close()
    assert no_env_actors(local_ray)
