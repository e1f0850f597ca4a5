"""RLlib's PPO trained for a few iterations against a live envwire server, on a real local Ray.

RLlib pins its own Gymnasium release, so ``.ci/run`` runs this file in a virtualenv of its own
(the ``rllib`` extra); where Ray is not installed the training test skips and the env creator's
own tests still run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from envwire.adapters.gymenv import RemoteEnv
from envwire.adapters.training.rllib import env_creator
from envwire.adapters.vector import RemoteVectorEnv
from envwire.errors import InvalidArgumentError
from envwire.testing import ServerProcess


def test_env_creator_opens_one_env_or_one_vector_session(adapter_server: ServerProcess) -> None:
    url = adapter_server.url("grpc", "CartPole-v1")
    single = env_creator({"url": url, "timeout": 10.0})
    vector = env_creator({"url": url, "num_envs": 3})
    try:
        assert isinstance(single, RemoteEnv)
        assert isinstance(vector, RemoteVectorEnv)
        assert vector.num_envs == 3
        assert vector.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
        obs, _ = vector.reset(seed=0)
        assert obs.shape == (3, 4)
    finally:
        single.close()
        vector.close()
    with pytest.raises(InvalidArgumentError, match="env_config needs 'url'"):
        env_creator({"num_envs": 2})


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[Any]:
    """A local Ray of two CPUs, shut down after the module."""
    ray = pytest.importorskip("ray", reason="the rllib extra is not installed")
    # RLlib's own modules, not just the package: Ray without the rllib extra (envwire[ray])
    # has ray.rllib but not what it imports (scipy, ...).
    pytest.importorskip("ray.rllib.algorithms.ppo", reason="the rllib extra is not installed")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_rllib_ppo_trains_against_the_server(
    adapter_server: ServerProcess, ray_cluster: Any
) -> None:
    from ray.rllib.algorithms.ppo import PPOConfig

    from envwire.adapters.training.rllib import register

    url = adapter_server.url("gym-socket", "CartPole-v1")
    config = (
        PPOConfig()
        .environment(register("envwire-test"), env_config={"url": url})
        .env_runners(
            num_env_runners=1,  # an env runner actor: its own process, its own connection
            num_envs_per_env_runner=4,
            gym_env_vectorize_mode="vector_entry_point",  # one batched session of 4 copies
        )
        .training(train_batch_size_per_learner=512, minibatch_size=128, num_epochs=2)
        .debugging(seed=0)
    )
    algo = config.build_algo()
    try:
        weights = algo.get_module().get_state()
        before = {key: np.array(value) for key, value in weights.items()}
        results = [algo.train() for _ in range(3)]
        after = algo.get_module().get_state()
    finally:
        algo.stop()
    runners = results[-1]["env_runners"]
    assert runners["num_env_steps_sampled_lifetime"] >= 3 * 512
    assert runners["num_episodes_lifetime"] > 10, "CartPole episodes end and autoreset"
    assert 8 <= runners["episode_return_mean"] <= 500
    assert any(not np.array_equal(before[key], np.array(after[key])) for key in before)
