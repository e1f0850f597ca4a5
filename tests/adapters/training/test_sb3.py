"""The SB3 VecEnv over the wire, step for step against SB3's own DummyVecEnv, and PPO trained
over gym-socket and dm_env_rpc ending with exactly the parameters of a local run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import data_equivalence

pytest.importorskip("stable_baselines3", reason="the sb3 extra is not installed")
torch = pytest.importorskip("torch", reason="the sb3 extra is not installed")

from gymnasium.vector.utils import batch_space  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback  # noqa: E402
from stable_baselines3.common.env_checker import check_env  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env as local_make_vec_env  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor  # noqa: E402

import envwire  # noqa: E402
from envwire.adapters.training.sb3 import RemoteAttributeError, SB3VecEnv, make_vec_env  # noqa: E402
from envwire.adapters.vector import RemoteVectorEnv  # noqa: E402
from envwire.errors import InvalidArgumentError, StateError, UnsupportedError  # noqa: E402
from envwire.protocols.gymsocket.finals import merge_finals  # noqa: E402
from envwire.testing import ServerProcess  # noqa: E402
from tests.adapters.helpers import quiet_ticker, ticker  # noqa: E402
from tests.spaces_catalog import assert_same  # noqa: E402

TICKER = "test/Ticker-v0"
N = 4


@pytest.fixture
def pair(adapter_server: ServerProcess, scheme: str) -> Iterator[tuple[SB3VecEnv, DummyVecEnv]]:
    """The remote VecEnv (no monitor) and a DummyVecEnv of local copies, both seeded 7."""
    remote = make_vec_env(adapter_server.url(scheme, TICKER), N, seed=7, monitor=False)
    local = DummyVecEnv([ticker for _ in range(N)])
    local.seed(7)
    assert isinstance(remote, SB3VecEnv)
    yield remote, local
    remote.close()
    local.close()


def plain(infos: Any) -> Any:
    """Infos with numpy scalars as Python ones: a vector info batches a copy's Python floats
    into a float64 array, so they come back as numpy scalars (as from Gymnasium's own)."""
    if isinstance(infos, dict):
        return {key: plain(value) for key, value in infos.items()}
    if isinstance(infos, list | tuple):
        return type(infos)(plain(value) for value in infos)
    return infos.item() if isinstance(infos, np.generic) else infos


def same(got: Any, want: Any) -> bool:
    return bool(data_equivalence(plain(got), plain(want), exact=True))


def actions(t: int) -> np.ndarray:
    return np.array([(t + i) % 3 for i in range(N)], np.int64)


def test_batches_infos_and_autoresets_equal_dummy_vec_env(
    pair: tuple[SB3VecEnv, DummyVecEnv],
) -> None:
    remote, local = pair
    assert remote.num_envs == local.num_envs == N
    assert remote.observation_space == local.observation_space
    assert remote.action_space == local.action_space
    assert data_equivalence(remote.reset(), local.reset(), exact=True)
    assert same(remote.reset_infos, local.reset_infos)
    ends = {"terminated": 0, "truncated": 0}
    for t in range(40):
        got, want = remote.step(actions(t)), local.step(actions(t))
        assert same(got, want), f"step {t}"
        assert got[1].dtype == want[1].dtype == np.float32
        assert got[2].dtype == want[2].dtype == np.bool_
        assert same(remote.reset_infos, local.reset_infos), f"step {t}"
        for done, info in zip(got[2], got[3], strict=True):
            assert "TimeLimit.truncated" in info
            if done:
                assert info["terminal_observation"] in remote.observation_space
                ends["truncated" if info["TimeLimit.truncated"] else "terminated"] += 1
    assert ends["terminated"] > 0 and ends["truncated"] > 0, ends


def test_episodes_ending_without_infos_equal_dummy_vec_env(
    adapter_server: ServerProcess, scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CartPole's steps carry no info, so a step where episodes end is split per copy by the
    lean way (only final observations: over gym-socket kept apart from any vector info, over
    dm_env_rpc taken from it): the same batches, infos and reset infos as DummyVecEnv's, as
    the general split gives them."""
    split = []
    if scheme == "gym-socket":
        original = RemoteVectorEnv.step_finals

        def counted(self: RemoteVectorEnv, actions: Any) -> Any:
            result = original(self, actions)
            split.append(result[5] is not None and len(result[5]) > 0)
            return result

        monkeypatch.setattr(RemoteVectorEnv, "step_finals", counted)
    else:
        original_ended = SB3VecEnv._ended_only

        def counted_ended(self: SB3VecEnv, *args: Any) -> Any:
            result = original_ended(self, *args)
            split.append(result is not None)
            return result

        monkeypatch.setattr(SB3VecEnv, "_ended_only", counted_ended)
    remote = make_vec_env(adapter_server.url(scheme, "CartPole-v1"), N, seed=3, monitor=False)
    local = DummyVecEnv([lambda: gymnasium.make("CartPole-v1")] * N)
    local.seed(3)
    try:
        assert data_equivalence(remote.reset(), local.reset(), exact=True)
        for t in range(120):
            batch = np.array([(t // (i + 1)) % 2 for i in range(N)], np.int64)
            got, want = remote.step(batch), local.step(batch)
            assert same(got, want), f"step {t}"
            assert same(remote.reset_infos, local.reset_infos), f"step {t}"
    finally:
        remote.close()
        local.close()
    assert sum(split) >= 5


def test_the_lean_step_equals_the_general_one_and_dummy_vec_env(
    adapter_server: ServerProcess,
) -> None:
    """Episodes without infos that end by termination, by the time limit and by both at once:
    over gym-socket the lean step (final observations kept apart from the vector info) and
    the general one (the vector info split per copy) give DummyVecEnv's batches, infos and
    reset infos."""
    url = adapter_server.url("gym-socket", "test/QuietTicker-v0")
    lean = make_vec_env(url, N, seed=5, monitor=False)
    general = make_vec_env(url, N, seed=5, monitor=False)
    assert isinstance(lean, SB3VecEnv) and isinstance(general, SB3VecEnv)
    general.vector._receive_split = None  # the transport's split read, unused
    local = DummyVecEnv([quiet_ticker for _ in range(N)])
    local.seed(5)
    ends = {"terminated": 0, "truncated": 0, "split": 0}
    try:
        observations = [env.reset() for env in (lean, general, local)]
        assert same(observations[0], observations[2]) and same(observations[1], observations[2])
        for t in range(60):
            steps = [env.step(actions(t)) for env in (lean, general, local)]
            for env, step in zip((lean, general), steps, strict=False):
                assert same(step, steps[2]), f"step {t}"
                assert same(env.reset_infos, local.reset_infos), f"step {t}"
            for done, info in zip(steps[0][2], steps[0][3], strict=True):
                if done:
                    ends["truncated" if info["TimeLimit.truncated"] else "terminated"] += 1
    finally:
        for env in (lean, general, local):
            env.close()
    assert ends["terminated"] > 0 and ends["truncated"] > 0, ends


class _Scripted:
    """A SameStep vector env's stand-in whose steps are given: SB3VecEnv's other side."""

    def __init__(self, space: gymnasium.Space[Any], steps: list[tuple[Any, ...]]) -> None:
        self.num_envs = N
        self.single_observation_space = space
        self.single_action_space = gymnasium.spaces.Discrete(2)
        self.metadata = {"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP}
        self.steps = iter(steps)

    def step_async(self, actions: Any) -> None:
        pass

    def step_wait_finals(self) -> tuple[Any, ...]:
        return next(self.steps)

    def step_finals(self, actions: Any) -> tuple[Any, ...]:
        return next(self.steps)


_ENDS = [  # terminated, truncated per copy
    ([False] * N, [False] * N),
    ([False, True, False, False], [False] * N),
    ([False] * N, [False, False, True, False]),
    ([True, False, False, True], [True, True, False, False]),
    ([True] * N, [False] * N),
]


@pytest.mark.parametrize(
    "space",
    [
        gymnasium.spaces.Box(-1, 1, (3,), np.float32),
        gymnasium.spaces.Box(0, 255, (2, 3), np.uint8),
        gymnasium.spaces.Discrete(5),
    ],
    ids=["box", "box_2d", "discrete"],
)
def test_final_observations_kept_apart_give_the_general_paths_infos(space: Any) -> None:
    """The same steps, once with the final observations kept apart (the lean read) and once
    in Gymnasium's vector info (the general one): the same batches, step infos (each final
    observation as Gymnasium's final_obs holds it, a 0-d array for a scalar space) and reset
    infos."""
    batch = batch_space(space, N)
    batch.seed(1)
    lean_steps, general_steps = [], []
    for terminated, truncated in _ENDS:
        observations, rewards = batch.sample(), np.arange(N, dtype=np.float64) / 3
        ended = np.logical_or(terminated, truncated)
        rows = batch.sample()[ended]
        arrays = (observations, rewards, np.array(terminated), np.array(truncated))
        lean_steps.append((*arrays, {}, rows))
        infos = merge_finals({}, 3, ended, rows) if ended.any() else {}
        general_steps.append((*arrays, infos, None))
    lean = SB3VecEnv(_Scripted(space, lean_steps))  # type: ignore[arg-type]
    general = SB3VecEnv(_Scripted(space, general_steps))  # type: ignore[arg-type]
    for t in range(len(_ENDS)):
        for env in (lean, general):
            env.reset_infos = [{"copy": i} for i in range(N)]
        got, want = lean.step(np.zeros(N, np.int64)), general.step(np.zeros(N, np.int64))
        assert_same(got, want, f"step {t}")
        assert_same(lean.reset_infos, general.reset_infos, f"step {t}")
        assert got[1].dtype == np.float32 and got[2].dtype == np.bool_


def test_seeds_and_options_are_used_for_one_reset(
    pair: tuple[SB3VecEnv, DummyVecEnv], scheme: str
) -> None:
    remote, local = pair
    assert remote.seed(3) == local.seed(3) == [3, 4, 5, 6]
    if scheme == "grpc":  # a dm_env_rpc ResetRequest has no place for options
        remote.set_options({"offset": 0.25})
        with pytest.raises(InvalidArgumentError, match="no place in a ResetRequest"):
            remote.reset()
        remote.set_options({})
    else:
        remote.set_options({"offset": 0.25})
        local.set_options({"offset": 0.25})
    assert same(remote.reset(), local.reset())
    assert same(remote.reset_infos, local.reset_infos)
    assert remote.reset_infos[0]["offset"] == (0.0 if scheme == "grpc" else 0.25)
    # the next reset is unseeded and has no options: both continue their random streams
    assert same(remote.reset(), local.reset())
    assert [info["offset"] for info in remote.reset_infos] == [0.0] * N
    # a seed given again replays the first reset
    remote.seed(3)
    again = remote.reset()
    remote.seed(3)
    np.testing.assert_array_equal(remote.reset(), again)


def test_per_copy_options_that_differ_are_refused(pair: tuple[SB3VecEnv, DummyVecEnv]) -> None:
    remote, _ = pair
    remote.set_options([{"offset": 0.1 * i} for i in range(N)])
    with pytest.raises(UnsupportedError, match="different reset options per copy"):
        remote.reset()
    remote.set_options({})
    assert remote.reset().shape == (N, 3)


def test_reset_cancels_a_step_in_flight(pair: tuple[SB3VecEnv, DummyVecEnv]) -> None:
    remote, local = pair
    remote.reset()
    local.reset()
    remote.step_async(actions(0))
    remote.seed(11)
    local.seed(11)
    assert data_equivalence(remote.reset(), local.reset(), exact=True)
    assert same(remote.step(actions(1)), local.step(actions(1)))


def test_step_equals_step_async_then_step_wait(pair: tuple[SB3VecEnv, DummyVecEnv]) -> None:
    """SB3's ``step`` is one call to the vector env where it can be (over gym-socket,
    ``RemoteVectorEnv.step_finals``); ``step_async`` then ``step_wait``, as ``VecMonitor``
    calls them, give the same batches, infos and reset infos, episodes ending in both."""
    remote, local = pair
    remote.reset()
    local.reset()
    ended = [0, 0]
    for t in range(80):
        if t % 2:
            remote.step_async(actions(t))
            got = remote.step_wait()
        else:
            got = remote.step(actions(t))
        assert same(got, local.step(actions(t))), f"step {t}"
        assert same(remote.reset_infos, local.reset_infos), f"step {t}"
        ended[t % 2] += int(got[2].sum())
    assert min(ended) > 0, ended
    remote.step_async(actions(0))
    with pytest.raises(StateError, match="step_async is waiting"):
        remote.vector.step_finals(actions(0))
    remote.step_wait()


def test_attributes_that_cross_the_wire_and_those_that_do_not(
    pair: tuple[SB3VecEnv, DummyVecEnv], scheme: str
) -> None:
    remote, local = pair
    for name in ("observation_space", "action_space", "render_mode"):
        assert remote.get_attr(name, indices=[0, 2]) == local.get_attr(name, indices=[0, 2])[:1] * 2
    assert remote.env_method("get_wrapper_attr", "action_space") == [remote.action_space] * N
    assert remote.has_attr("render_mode")
    assert not remote.has_attr("np_random")
    with pytest.raises(RemoteAttributeError, match="'np_random' of the remote env"):
        remote.get_attr("np_random")
    with pytest.raises(UnsupportedError, match="cannot set 'gravity'"):
        remote.set_attr("gravity", 1.0)
    with pytest.raises(RemoteAttributeError, match="cannot call 'render'"):
        remote.env_method("render", indices=1)
    with pytest.raises(RemoteAttributeError, match="carries no frames"):
        remote.get_images()
    assert remote.env_is_wrapped(Monitor) == [False] * N
    if scheme == "grpc":  # dm_env_rpc's properties extension
        assert remote.get_attr("env.id", indices=1) == [TICKER]
        assert remote.get_attr("world.num_envs") == [N] * N
    else:
        with pytest.raises(RemoteAttributeError, match="get_attr knows"):
            remote.get_attr("env.id")


def test_make_vec_env_monitors_and_checks(adapter_server: ServerProcess) -> None:
    env = make_vec_env(adapter_server.url("gym-socket", "CartPole-v1"), 2, seed=0)
    try:
        assert isinstance(env, VecMonitor) and isinstance(env.venv, SB3VecEnv)
        env.reset()
        lengths = []
        for _ in range(60):
            *_, infos = env.step(np.ones(2, np.int64))
            lengths += [info["episode"]["l"] for info in infos if "episode" in info]
        assert lengths and all(length > 0 for length in lengths)
    finally:
        env.close()
    with pytest.raises(InvalidArgumentError, match="unknown URL scheme"):
        make_vec_env("http://127.0.0.1:1/CartPole-v1", 2)
    next_step = envwire.make_vec(adapter_server.url("gym-socket", "CartPole-v1"), 2)
    with pytest.raises(ValueError, match="SameStep"):
        SB3VecEnv(next_step)
    next_step.close()


@pytest.mark.parametrize("env_id", ["CartPole-v1", TICKER])
def test_single_remote_env_passes_sb3_env_checker(
    adapter_server: ServerProcess, scheme: str, env_id: str
) -> None:
    env = envwire.make(adapter_server.url(scheme, env_id))
    try:
        check_env(env, warn=True, skip_render_check=True)
    finally:
        env.close()


class _Episodes(BaseCallback):
    """Records (timestep, copy, return, length) of every finished episode."""

    def __init__(self) -> None:
        super().__init__()
        self.episodes: list[tuple[int, int, float, int]] = []

    def _on_step(self) -> bool:
        for i, info in enumerate(self.locals["infos"]):
            if "episode" in info:
                episode = info["episode"]
                self.episodes.append((self.num_timesteps, i, float(episode["r"]), episode["l"]))
        return True


@pytest.fixture
def deterministic_torch() -> Iterator[None]:
    """The CPU settings under which PPO's numbers are reproducible (docs/guides/training.md)."""
    threads = torch.get_num_threads()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    yield
    torch.use_deterministic_algorithms(False)
    torch.set_num_threads(threads)


def train_ppo(env: Any, seed: int = 0) -> tuple[dict[str, Any], list[tuple[int, int, float, int]]]:
    """4,096 steps of PPO (4 rollouts of 128 steps x 8 copies, 10 epochs each)."""
    model = PPO("MlpPolicy", env, n_steps=128, seed=seed, device="cpu")
    episodes = _Episodes()
    model.learn(4096, callback=episodes)
    env.close()
    return model.policy.state_dict(), episodes.episodes


@pytest.fixture(scope="module")
def local_run() -> tuple[dict[str, Any], list[tuple[int, int, float, int]]]:
    torch.use_deterministic_algorithms(True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return train_ppo(local_make_vec_env("CartPole-v1", n_envs=8, seed=0))
    finally:
        torch.use_deterministic_algorithms(False)
        torch.set_num_threads(threads)


@pytest.mark.usefixtures("deterministic_torch")
def test_ppo_over_the_wire_equals_ppo_on_dummy_vec_env(
    adapter_server: ServerProcess, scheme: str, local_run: Any
) -> None:
    want_params, want_episodes = local_run
    params, episodes = train_ppo(make_vec_env(adapter_server.url(scheme, "CartPole-v1"), 8, seed=0))
    assert len(episodes) > 50, "CartPole episodes should end and autoreset many times"
    assert episodes == want_episodes
    assert params.keys() == want_params.keys()
    for name, tensor in params.items():
        assert torch.equal(tensor, want_params[name]), name


@pytest.mark.usefixtures("deterministic_torch")
def test_the_equality_check_sees_a_different_seed(
    adapter_server: ServerProcess, local_run: Any
) -> None:
    want_params, want_episodes = local_run
    # PPO seeds the env too (copy i gets seed + i), so one seed changes both
    url = adapter_server.url("gym-socket", "CartPole-v1")
    params, episodes = train_ppo(make_vec_env(url, 8), seed=1)
    assert episodes != want_episodes
    assert not all(torch.equal(tensor, want_params[name]) for name, tensor in params.items())
