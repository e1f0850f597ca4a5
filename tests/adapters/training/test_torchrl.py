"""Remote envs as TorchRL envs: TorchRL's own spec checks, and rollouts equal to in-process ones."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import gymnasium
import pytest

torch = pytest.importorskip("torch", reason="the torchrl extra is not installed")
pytest.importorskip("torchrl", reason="the torchrl extra is not installed")

from tensordict import TensorDictBase  # noqa: E402
from torchrl.envs import EnvBase, GymEnv, GymWrapper  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

from envwire.adapters.training.torchrl import make_env, make_vec_env  # noqa: E402
from envwire.testing import ServerProcess  # noqa: E402
from tests.adapters.helpers import ticker  # noqa: E402

ENVS = {"CartPole-v1": lambda: gymnasium.make("CartPole-v1"), "test/Ticker-v0": ticker}


@pytest.fixture
def closing() -> Iterator[Callable[[EnvBase], EnvBase]]:
    """Registers envs to close after the test."""
    opened: list[EnvBase] = []
    yield lambda env: opened.append(env) or env
    for env in opened:
        env.close()


def rollout(env: EnvBase, steps: int) -> TensorDictBase:
    """A seeded rollout with seeded random actions, through autoresets."""
    env.set_seed(5)
    torch.manual_seed(0)
    return env.rollout(steps, break_when_any_done=False)


def assert_same(got: TensorDictBase, want: TensorDictBase) -> None:
    assert got.batch_size == want.batch_size
    assert set(got.keys(True, True)) == set(want.keys(True, True))
    for key in want.keys(True, True):
        assert torch.equal(got[key], want[key]), key


@pytest.mark.parametrize("env_id", sorted(ENVS))
def test_remote_env_passes_check_env_specs_and_rolls_out_as_local(
    adapter_server: ServerProcess, scheme: str, env_id: str, closing: Any
) -> None:
    remote = closing(make_env(adapter_server.url(scheme, env_id)))
    local = closing(GymWrapper(ENVS[env_id]()))
    assert remote.batch_size == torch.Size([])
    check_env_specs(remote)
    assert remote.full_observation_spec == local.full_observation_spec
    assert remote.full_action_spec == local.full_action_spec
    got = rollout(remote, 40)
    assert got["next", "done"].any(), "an episode should end within 40 steps"
    assert_same(got, rollout(local, 40))


# Not Ticker in SameStep: its reset infos have other keys than its step infos, which TorchRL's
# info reader cannot batch in SameStep mode (it fails the same way on a local SyncVectorEnv).
@pytest.mark.parametrize(
    ("env_id", "mode"),
    [("CartPole-v1", "Disabled"), ("CartPole-v1", "SameStep"), ("test/Ticker-v0", "Disabled")],
)
def test_batched_env_passes_check_env_specs_and_rolls_out_as_local(
    adapter_server: ServerProcess, scheme: str, env_id: str, mode: str, closing: Any
) -> None:
    n = 3
    remote = closing(make_vec_env(adapter_server.url(scheme, env_id), n, autoreset_mode=mode))
    local_vector = gymnasium.vector.SyncVectorEnv([ENVS[env_id]] * n, autoreset_mode=mode)
    local = closing(GymWrapper(local_vector))
    assert remote.batch_size == torch.Size([n])
    check_env_specs(remote)
    assert remote.full_observation_spec == local.full_observation_spec
    got = rollout(remote, 30)
    assert got["next", "done"].any(), "copies should end episodes and be reset"
    assert_same(got, rollout(local, 30))


def test_next_step_is_refused_by_torchrl(adapter_server: ServerProcess) -> None:
    with pytest.raises(RuntimeError, match="auto-reset mode must be one of"):
        make_vec_env(adapter_server.url("gym-socket", "CartPole-v1"), 2, autoreset_mode="NextStep")


def test_gym_env_by_the_registered_id(adapter_server: ServerProcess, closing: Any) -> None:
    env = closing(GymEnv("envwire/Remote-v0", url=adapter_server.url("grpc", "CartPole-v1")))
    check_env_specs(env)
    assert_same(rollout(env, 25), rollout(closing(GymEnv("CartPole-v1")), 25))
