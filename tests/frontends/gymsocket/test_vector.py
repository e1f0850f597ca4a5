"""Remote vector envs over gym-socket, compared with Gymnasium's in-process SyncVectorEnv."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv

import envwire
from envwire.errors import InvalidActionError, InvalidArgumentError, StateError, TransportError
from envwire.registry import parse_env_arg
from envwire.testing import ServerProcess

ENVS = ["CartPole-v1", "test/Dict-v0=envwire.testing.envs:DictEnv", "envwire/Catch-v0"]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess(ENVS) as running:
        yield running


def local_vector(env_id: str, n: int, mode: str) -> SyncVectorEnv:
    spec = next(parse_env_arg(a) for a in ENVS if parse_env_arg(a).id == env_id)
    return SyncVectorEnv([spec.make for _ in range(n)], autoreset_mode=mode)


def actions(env: VectorEnv, t: int) -> Any:
    space = env.action_space
    space.seed(t)
    return space.sample()


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("env_id", ["CartPole-v1", "test/Dict-v0"])
def test_batches_equal_sync_vector_env(
    server: ServerProcess, env_id: str, mode: str, workers: int
) -> None:
    n = 5
    remote = envwire.make_vec(
        server.url("gym-socket", env_id), n, autoreset_mode=mode, workers=workers
    )
    local = local_vector(env_id, n, mode)
    try:
        assert remote.single_action_space == local.single_action_space
        assert remote.single_observation_space == local.single_observation_space
        assert remote.action_space == local.action_space
        assert remote.observation_space == local.observation_space
        assert remote.metadata["autoreset_mode"] == AutoresetMode(mode)
        got, want = remote.reset(seed=11), local.reset(seed=11)
        assert data_equivalence(got, want, exact=True)
        ended = np.zeros(n, bool)
        for t in range(60):
            batch = actions(local, t)
            got, want = remote.step(batch), local.step(batch)
            assert data_equivalence(got, want, exact=True), f"step {t}"
            assert got[0] in remote.observation_space
            ended |= got[2] | got[3]
            if mode == "Disabled" and ended.any():
                break
        if env_id == "CartPole-v1" and mode != "Disabled":
            assert ended.any(), "an episode should have ended and autoreset"
    finally:
        remote.close()
        local.close()


def test_step_async_lets_the_agent_work_meanwhile(server: ServerProcess) -> None:
    remote = envwire.make_vec(server.url("gym-socket", "CartPole-v1"), 4)
    local = local_vector("CartPole-v1", 4, "NextStep")
    try:
        remote.reset(seed=0)
        local.reset(seed=0)
        for t in range(20):
            batch = np.array([(t + i) % 2 for i in range(4)])
            remote.step_async(batch)
            want = local.step(batch)  # work done while the server steps
            assert data_equivalence(remote.step_wait(), want, exact=True)
        with pytest.raises(StateError, match="step_wait without step_async"):
            remote.step_wait()
        remote.step_async(np.zeros(4, np.int64))
        with pytest.raises(StateError, match="step while a step_async is waiting"):
            remote.step(np.zeros(4, np.int64))
        remote.step_wait()  # the batch in flight is still there, and the session goes on
        assert remote.step(np.zeros(4, np.int64))[0].shape == (4, 4)
    finally:
        remote.close()


def test_bad_batches_are_reported_and_the_session_goes_on(server: ServerProcess) -> None:
    remote = envwire.make_vec(server.url("gym-socket", "CartPole-v1"), 3)
    try:
        remote.reset(seed=0)
        with pytest.raises(InvalidActionError):
            remote.step(np.array([0, 1, 5]))
        with pytest.raises(InvalidActionError):
            remote.step(np.array([0, 1]))
        obs, *_ = remote.step(np.array([0, 1, 0]))
        assert obs.shape == (3, 4)
    finally:
        remote.close()


def test_uint8_batches_travel_as_raw_tensors(server: ServerProcess) -> None:
    remote = envwire.make_vec(server.url("gym-socket", "envwire/Catch-v0"), 64)
    try:
        obs, _ = remote.reset(seed=0)
        assert obs.dtype == np.uint8 and obs.shape == (64, 10, 5, 1)
        obs, rewards, *_ = remote.step(np.ones(64, np.int64))
        assert rewards.dtype == np.float64 and rewards.shape == (64,)
    finally:
        remote.close()


def test_per_copy_seeds(server: ServerProcess) -> None:
    remote = envwire.make_vec(server.url("gym-socket", "CartPole-v1"), 3)
    local = local_vector("CartPole-v1", 3, "NextStep")
    try:
        seeds = [5, None, 0]
        got, want = remote.reset(seed=seeds), local.reset(seed=seeds)
        np.testing.assert_array_equal(got[0][[0, 2]], want[0][[0, 2]])
    finally:
        remote.close()


def test_vector_options_are_checked(server: ServerProcess) -> None:
    with pytest.raises(InvalidArgumentError, match="autoreset mode 'Sometimes'"):
        envwire.make_vec(server.url("gym-socket", "CartPole-v1"), 2, autoreset_mode="Sometimes")
    with pytest.raises(TransportError, match="num_envs"):
        envwire.make_vec(server.url("gym-socket", "CartPole-v1"), 0)


@pytest.mark.parametrize("workers", [1, 2])
def test_reset_mask_in_a_split_group(server: ServerProcess, workers: int) -> None:
    remote = envwire.make_vec(
        server.url("gym-socket", "CartPole-v1"), 4, autoreset_mode="Disabled", workers=workers
    )
    local = local_vector("CartPole-v1", 4, "Disabled")
    try:
        assert data_equivalence(remote.reset(seed=1), local.reset(seed=1), exact=True)
        for t in range(3):
            batch = actions(local, t)
            assert data_equivalence(remote.step(batch), local.step(batch), exact=True)
        mask = np.array([False, False, True, True])  # spares the first worker's slice
        got = remote.reset(options={"reset_mask": mask})
        want = local.reset(options={"reset_mask": mask})
        assert data_equivalence(got, want, exact=True)
        batch = actions(local, 9)
        assert data_equivalence(remote.step(batch), local.step(batch), exact=True)
    finally:
        remote.close()
        local.close()
