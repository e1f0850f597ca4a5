"""Episodes served through gym-socket, OpenEnv and dm_env_rpc are recorded as Minari datasets
that ``minari.load_dataset`` loads, equal step by step to what the clients saw."""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import gymnasium
import minari
import numpy as np
import pytest

import envwire
from envwire.app import Server
from envwire.errors import ConfigError
from envwire.observe import datasets
from envwire.observe.datasets import DatasetWriter
from envwire.observe.episodes import Episode
from envwire.observe.storage import dataset_id, directory_size
from envwire.registry import Catalog, EnvSpec, parse_env_arg
from envwire.settings import Settings
from envwire.testing import ServerProcess, wait_until
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


def _loaded(root: Path) -> int:
    os.environ["MINARI_DATASETS_PATH"] = str(root)
    try:
        return int(minari.load_dataset(CART).total_episodes)
    finally:
        del os.environ["MINARI_DATASETS_PATH"]


def test_a_full_queue_waits_and_loses_nothing_by_default(tmp_path: Path) -> None:
    dropped: list[str] = []
    writer = DatasetWriter(tmp_path, queue_size=1,
                           on_drop=lambda env, reason: dropped.append(reason))  # fmt: skip
    for _ in range(30):
        writer.offer(_episode(50))  # faster than the writer: offer waits for room
    assert writer.flush(60)
    writer.close()
    assert dropped == [] and writer.dropped == 0
    assert writer.waited > 0  # the queue was full: the wait is what kept them
    assert _loaded(tmp_path) == 30


def test_a_stuck_writer_holds_no_session_longer_than_the_wait_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The disk hangs: the session whose episode finds the queue full waits ``wait_timeout``
    seconds, then goes on; its episode is dropped, counted and logged, and the episodes
    already handed over are written once the disk answers again."""
    disk = threading.Event()  # set: the disk answers again
    encode = datasets.encode

    def hung(episode: Episode) -> bytes:
        assert disk.wait(60)
        return encode(episode)

    monkeypatch.setattr(datasets, "encode", hung)
    dropped: list[str] = []
    writer = DatasetWriter(tmp_path, queue_size=1, wait_timeout=0.5,
                           on_drop=lambda env, reason: dropped.append(reason))  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="envwire.record"):
        writer.offer(_episode(5))  # the writer takes it and hangs on the disk
        assert wait_until(lambda: not writer._queue, 30)
        writer.offer(_episode(5))  # waits in the queue
        offered = threading.Thread(target=writer.offer, args=(_episode(5),), daemon=True)
        started = time.monotonic()
        offered.start()
        offered.join(30)  # without a timeout, this offer would wait as long as the disk
        assert not offered.is_alive()
        assert time.monotonic() - started >= 0.5
        assert dropped == ["wait_timeout"] and writer.wait_timeouts == 1
        disk.set()
        assert writer.flush(60)
        writer.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("made no room within 0.5 s" in w and f"1 of {CART}" in w for w in warnings)
    assert writer.dropped == 1 and _loaded(tmp_path) == 2


def test_the_wait_timeout_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="wait timeout must be above 0"):
        DatasetWriter(tmp_path, wait_timeout=0)


def test_the_lossy_mode_drops_on_a_full_queue_and_says_how_many(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dropped: list[str] = []
    writer = DatasetWriter(tmp_path, queue_size=1, overflow="drop",
                           on_drop=lambda env, reason: dropped.append(reason))  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="envwire.record"):
        for _ in range(30):
            writer.offer(_episode(50))  # never blocks: the writer takes ms per episode
        assert writer.flush(60)
        writer.close()
    assert dropped and set(dropped) == {"queue_full"} and writer.dropped == len(dropped)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and all("episodes dropped" in w for w in warnings)
    # The lines together count every drop: the first at once, the rest when closing.
    told = sum(int(m) for w in warnings for m in re.findall(rf"(\d+) of {CART}", w))
    assert told == len(dropped)
    assert _loaded(tmp_path) == 30 - len(dropped)


def test_overflow_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="overflow must be one of"):
        DatasetWriter(tmp_path, overflow="spill")


def _step_hard(address: str, stop: threading.Event, counts: list[int]) -> None:
    """Step CartPole with random actions until ``stop``; count the finished episodes."""
    env = envwire.make(address)
    try:
        env.reset(seed=len(counts))
        finished = 0
        while not stop.is_set():
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                finished += 1
                env.reset()
    finally:
        env.close()
    counts.append(finished)


def test_four_clients_at_full_speed_lose_no_episode(tmp_path: Path) -> None:
    """Under load the recorded sessions slow down to the writer's pace; every episode that
    ends is in the dataset (benchmarks/bench_record.py measures it for longer)."""
    root = tmp_path / "datasets"
    with ServerProcess([CART], ("--record", str(root))) as process:
        stop, counts = threading.Event(), []
        threads = [
            threading.Thread(
                target=_step_hard, args=(process.url("gym-socket", CART), stop, counts)
            )
            for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        time.sleep(3.0)
        stop.set()
        for thread in threads:
            thread.join(60)
        assert process.stop(timeout=120) == 0  # SIGTERM: what is queued is written first
    assert len(counts) == 4 and sum(counts) > 50
    assert _loaded(root) == sum(counts)


def test_a_relative_record_directory_is_resolved_once(tmp_path: Path) -> None:
    with ServerProcess([CART], ("--record", "datasets/"), cwd=tmp_path) as process:
        env = envwire.make(process.url("gym-socket", CART))
        seen = _played(env, [0, 1])
        env.close()
        assert process.stop(timeout=60) == 0
    assert "Error" not in "".join(process.output)
    os.environ["MINARI_DATASETS_PATH"] = str(tmp_path / "datasets")
    try:
        _assert_same(minari.load_dataset(CART), seen)
    finally:
        del os.environ["MINARI_DATASETS_PATH"]


def test_serve_exits_non_zero_when_episodes_could_not_be_written(tmp_path: Path) -> None:
    root = tmp_path / "datasets"
    root.mkdir()
    (root / dataset_id(CART)).write_text("a file where the dataset's folder goes")
    with ServerProcess([CART], ("--record", str(root))) as process:
        env = envwire.make(process.url("gym-socket", CART))
        _played(env, [0, 1])
        env.close()
        status = process.stop(timeout=60)
    output = "".join(process.output)
    assert status == 1, output
    assert "recording failed: 2 episodes could not be written" in output


def test_record_frames_on_an_env_without_frames_warns_once_at_start(tmp_path: Path) -> None:
    dict_env = "test/Dict-v0=envwire.testing.envs:DictEnv"  # no render mode
    args = ("--record", str(tmp_path), "--record-frames")
    with ServerProcess([dict_env, CART], args) as process:
        at_start = "".join(process.output)
        env = envwire.make(process.url("gym-socket", "test/Dict-v0"))
        env.reset(seed=0)
        env.close()
        process.stop(timeout=60)
    warning = "test/Dict-v0: --record-frames: its episodes are recorded without frames"
    assert warning in at_start  # before the first session, not at its first episode
    assert "".join(process.output).count(warning) == 1
    assert "CartPole-v1: --record-frames" not in at_start  # it renders rgb_array frames


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
