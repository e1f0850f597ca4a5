"""Episodes served through gym-socket, OpenEnv and dm_env_rpc are recorded as Minari datasets
that ``minari.load_dataset`` loads, equal step by step to what the clients saw."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path
from typing import Any

import gymnasium
import minari
import numpy as np
import pytest

import envwire
from envwire.app import Server
from envwire.errors import ConfigError
from envwire.observe.datasets import DatasetWriter
from envwire.observe.episodes import Episode
from envwire.observe.storage import dataset_id, directory_size
from envwire.registry import Catalog, EnvSpec, parse_env_arg
from envwire.settings import Settings
from envwire.testing import ServerProcess
from tests.observe.conftest import play_episode, scrape, start, url, value

CART = "CartPole-v1"


def _played(env: Any, seeds: list[int]) -> list[dict[str, list[Any]]]:
    """Play one episode per seed with a fixed action pattern; what the client saw."""
    seen = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        episode: dict[str, list[Any]] = {"observations": [obs], "actions": [], "rewards": [],
                                         "terminations": [], "truncations": []}  # fmt: skip
        t = 0
        while True:
            action = int(t % 3 == 0)
            obs, reward, terminated, truncated, _ = env.step(action)
            t += 1
            for key, item in zip(
                ("observations", "actions", "rewards", "terminations", "truncations"),
                (obs, action, reward, terminated, truncated),
                strict=True,
            ):
                episode[key].append(item)
            if terminated or truncated:
                break
        seen.append(episode)
    return seen


def _flush(server: Server) -> None:
    assert server.observe.recorder is not None
    assert server.observe.recorder.writer.flush(30)


def _assert_same(dataset: Any, seen: list[dict[str, list[Any]]]) -> None:
    assert dataset.total_episodes == len(seen)
    for recorded, saw in zip(dataset.iterate_episodes(), seen, strict=True):
        assert len(recorded) == len(saw["actions"])
        np.testing.assert_array_equal(recorded.observations, np.stack(saw["observations"]))
        np.testing.assert_array_equal(recorded.actions, np.asarray(saw["actions"]))
        np.testing.assert_array_equal(recorded.rewards, np.asarray(saw["rewards"]))
        np.testing.assert_array_equal(recorded.terminations, np.asarray(saw["terminations"]))
        np.testing.assert_array_equal(recorded.truncations, np.asarray(saw["truncations"]))


@pytest.mark.parametrize(
    ("front_end", "path"),
    [("gym-socket", CART), ("ws", f"envs/{CART}"), ("grpc", CART)],
)
def test_recorded_episodes_load_with_minari_and_equal_what_the_client_saw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, front_end: str, path: str
) -> None:
    server = start(record=str(tmp_path / "datasets"))
    try:
        where = "http" if front_end == "ws" else front_end
        address = url(server, where, path)
        env = envwire.make("ws" + address[4:] if front_end == "ws" else address)
        try:
            seen = _played(env, [0, 1, 2])
        finally:
            env.close()
        _flush(server)
        samples = scrape(url(server, "http", "metrics"))
        assert value(samples, "envwire_recorded_episodes_total", env=CART) == 3
    finally:
        server.shutdown()
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    dataset = minari.load_dataset(CART)
    assert dataset.observation_space == gymnasium.make(CART).observation_space
    assert dataset.action_space == gymnasium.make(CART).action_space
    _assert_same(dataset, seen)
    assert [e["seed"] for e in dataset.storage.get_episode_metadata(range(3))] == [0, 1, 2]


def test_dict_observations_and_infos_are_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = Catalog([parse_env_arg("test/Dict-v0=envwire.testing.envs:DictEnv")])
    server = Server(catalog, Settings.of(gym_socket=0, http=None, grpc=None, record=str(tmp_path)))
    server.start()
    try:
        address = url(server, "gym-socket", "test/Dict-v0")
        observations = play_episode(address, lambda t, env: env.action_space.sample(), seed=3)
        _flush(server)
    finally:
        server.shutdown()
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    assert len(observations) == 20  # DictEnv's episodes
    episode = next(minari.load_dataset("test/Dict-v0").iterate_episodes())
    for key in observations[0]:
        recorded = episode.observations[key][1:]
        if key == "label":
            assert list(recorded) == [o[key] for o in observations]
        else:
            np.testing.assert_array_equal(recorded, np.stack([o[key] for o in observations]))
    np.testing.assert_array_equal(episode.infos["t"], np.arange(21))  # the reset's info too


def test_vector_sessions_record_each_copy_separately(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = start(record=str(tmp_path))
    try:
        vec = envwire.make_vec(url(server, "gym-socket", CART), 2, autoreset_mode="NextStep")
        try:
            vec.reset(seed=10)
            for _ in range(80):
                vec.step(np.asarray([0, 1]))
        finally:
            vec.close()
        _flush(server)
    finally:
        server.shutdown()
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    dataset = minari.load_dataset(CART)
    assert dataset.total_episodes >= 2
    seeds = {}
    for n, meta in enumerate(dataset.storage.get_episode_metadata(range(dataset.total_episodes))):
        seeds[n] = meta.get("seed")
    first = [n for n, seed in seeds.items() if seed in (10, 11)]
    assert sorted(seeds[n] for n in first) == [10, 11]
    for n in first:  # replay each copy's first episode locally: the same episode
        recorded = next(dataset.iterate_episodes([n]))
        local = gymnasium.make(CART)
        obs, _ = local.reset(seed=seeds[n])
        np.testing.assert_array_equal(recorded.observations[0], obs)
        for t, action in enumerate(recorded.actions):
            assert action == (0 if seeds[n] == 10 else 1)  # each copy got its own action
            obs, reward, terminated, truncated, _ = local.step(action)
            np.testing.assert_array_equal(recorded.observations[t + 1], obs)
            assert recorded.rewards[t] == reward
            assert recorded.terminations[t] == terminated
            assert recorded.truncations[t] == truncated
        assert recorded.terminations[-1] or recorded.truncations[-1]


def test_frames_are_recorded_when_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = EnvSpec("test/CatchFrames-v0", "envwire.envs.catch:CatchEnv",
                   kwargs={"render_mode": "rgb_array"})  # fmt: skip
    settings = Settings.of(
        gym_socket=0, http=None, grpc=None, record=str(tmp_path), record_frames=True
    )
    server = Server(Catalog([spec]), settings)
    server.start()
    try:
        steps = len(play_episode(url(server, "gym-socket", spec.id), lambda t, env: 1))
        _flush(server)
    finally:
        server.shutdown()
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    episode = next(minari.load_dataset(spec.id).iterate_episodes())
    frames = episode.infos["render"]
    assert frames.shape[0] == steps + 1 and frames.ndim == 4 and frames.dtype == np.uint8
    local = spec.make()
    local.reset(seed=0)
    np.testing.assert_array_equal(frames[0], local.render())
    for t in range(steps):
        local.step(1)
        np.testing.assert_array_equal(frames[t + 1], local.render())


def test_record_fraction_zero_records_nothing(tmp_path: Path) -> None:
    server = start(record=str(tmp_path), record_fraction=0.0)
    try:
        env = envwire.make(url(server, "gym-socket", CART))
        try:
            _played(env, [0])
        finally:
            env.close()
        _flush(server)
    finally:
        server.shutdown()
    assert not (tmp_path / dataset_id(CART)).exists()


def _episode(steps: int) -> Episode:
    space = gymnasium.spaces.Box(-1, 1, (64,), np.float32)
    episode = Episode(CART, space, gymnasium.spaces.Discrete(2))
    episode.observations = [np.zeros(64, np.float32) for _ in range(steps + 1)]
    episode.infos = [{} for _ in range(steps + 1)]
    episode.actions = [0] * steps
    episode.rewards = [1.0] * steps
    episode.terminations = [False] * (steps - 1) + [True]
    episode.truncations = [False] * steps
    return episode


def test_the_disk_budget_is_a_bound(tmp_path: Path) -> None:
    dropped: list[str] = []
    budget = 200_000
    writer = DatasetWriter(tmp_path, max_bytes=budget, queue_size=1000,
                           on_drop=lambda env, reason: dropped.append(reason))  # fmt: skip
    for _ in range(60):
        writer.offer(_episode(100))  # ~26 kB of observations each
    assert writer.flush(60)
    writer.close()
    assert "disk_full" in dropped
    assert directory_size(tmp_path) <= budget
    written = 60 - len(dropped)
    assert written > 0
    os.environ["MINARI_DATASETS_PATH"] = str(tmp_path)
    try:
        assert minari.load_dataset(CART).total_episodes == written
    finally:
        del os.environ["MINARI_DATASETS_PATH"]


def test_a_full_queue_drops_episodes_instead_of_blocking(tmp_path: Path) -> None:
    dropped: list[str] = []
    writer = DatasetWriter(tmp_path, queue_size=1,
                           on_drop=lambda env, reason: dropped.append(reason))  # fmt: skip
    for _ in range(30):
        writer.offer(_episode(50))  # offer never blocks: the writer takes ms per episode
    assert writer.flush(60)
    writer.close()
    assert dropped and set(dropped) == {"queue_full"}


def test_the_writer_logs_its_progress_at_info(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = DatasetWriter(tmp_path, queue_size=1, max_bytes=60_000, progress_every=0)
    with caplog.at_level(logging.INFO, logger="envwire.record"):
        for _ in range(3):
            writer.offer(_episode(100))  # ~26 kB each: the third passes the budget
            assert writer.flush(60)
        writer.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "envwire.record"]
    assert any(": 1 episodes written, 0 dropped" in line for line in lines), lines
    assert lines[-1].startswith(f"recording {tmp_path}: 2 episodes written, 1 dropped, ")
    assert lines[-1].endswith(" MB held (closed)")


def test_the_writer_is_quiet_when_info_is_off(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = DatasetWriter(tmp_path, progress_every=0)
    with caplog.at_level(logging.WARNING, logger="envwire.record"):
        writer.offer(_episode(10))
        writer.close()
    assert writer.written == 1
    assert [r for r in caplog.records if r.name == "envwire.record"] == []


def test_episodes_finished_before_a_sigkill_are_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "datasets"
    args = ("--record", str(root), "--http", "0")
    with ServerProcess([CART], args, front_ends=("gym-socket", "http")) as process:
        metrics = f"http://127.0.0.1:{process.ports['http']}/metrics"
        env = envwire.make(f"gym-socket://127.0.0.1:{process.ports['gym-socket']}/{CART}")
        seen = _played(env, [0, 1, 2])
        assert process.wait_for(
            lambda: value(scrape(metrics), "envwire_recorded_episodes_total", env=CART) == 3,
            timeout=30,
        )
        env.reset(seed=9)  # an episode in flight, lost with the server
        env.step(0)
        assert process.process is not None
        os.kill(process.process.pid, signal.SIGKILL)
        process.process.wait(10)
        env.close()
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(root))
    _assert_same(minari.load_dataset(CART), seen)


def test_recording_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="record_fraction must be a number from 0 to 1"):
        start(record=str(tmp_path), record_fraction=2.0)
