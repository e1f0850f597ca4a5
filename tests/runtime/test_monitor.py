"""The episode monitor: statistics, videos and Gym's resume/force meaning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envwire.envs.catch import CatchEnv
from envwire.errors import EnvError, InvalidArgumentError
from envwire.registry import EnvSpec
from envwire.runtime.hosts import EnvHost
from envwire.runtime.monitor import EpisodeMonitor, video_schedule


def test_video_schedule_is_gyms_capped_cubic() -> None:
    assert [e for e in range(3001) if video_schedule(e)] == [
        0,
        1,
        8,
        27,
        64,
        125,
        216,
        343,
        512,
        729,
        1000,
        2000,
        3000,
    ]


def run_episodes(monitor: EpisodeMonitor, env: CatchEnv, count: int) -> None:
    for episode in range(count):
        env.reset(seed=episode)
        monitor.on_reset(env)
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(1)
            done = terminated or truncated
            monitor.on_step(env, reward, done)


def test_statistics_and_videos(tmp_path: Path) -> None:
    env = CatchEnv(render_mode="rgb_array")
    monitor = EpisodeMonitor(str(tmp_path), resume=False, force=False, video=True)
    run_episodes(monitor, env, 3)
    monitor.close()
    stats = json.loads(next(tmp_path.glob("envwire.stats.*.json")).read_text())
    assert stats["episode_lengths"] == [9, 9, 9]
    assert len(stats["episode_rewards"]) == len(stats["timestamps"]) == 3
    assert len(list(tmp_path.glob("envwire.video.*.gif"))) == 2  # episodes 0 and 1


def test_no_video_without_frames_or_when_disabled(tmp_path: Path) -> None:
    monitor = EpisodeMonitor(str(tmp_path / "a"), resume=False, force=False, video=True)
    run_episodes(monitor, CatchEnv(), 1)  # render_mode None: no frames
    monitor = EpisodeMonitor(str(tmp_path / "b"), resume=False, force=False, video=False)
    run_episodes(monitor, CatchEnv(render_mode="rgb_array"), 1)
    assert not list(tmp_path.glob("*/envwire.video.*"))


def test_force_and_resume(tmp_path: Path) -> None:
    monitor = EpisodeMonitor(str(tmp_path), resume=False, force=False, video=False)
    run_episodes(monitor, CatchEnv(), 1)
    with pytest.raises(InvalidArgumentError, match=r"force .* resume"):
        EpisodeMonitor(str(tmp_path), resume=False, force=False, video=False)
    EpisodeMonitor(str(tmp_path), resume=True, force=False, video=False)
    assert len(list(tmp_path.iterdir())) == 1
    (tmp_path / "openaigym.manifest.0.json").write_text("{}")
    EpisodeMonitor(str(tmp_path), resume=False, force=True, video=False)
    assert list(tmp_path.iterdir()) == []


def video_error(directory: Path) -> str | None:
    stats = json.loads(next(directory.glob("envwire.stats.*.json")).read_text())
    return stats["video_error"]  # type: ignore[no-any-return]


def test_a_video_without_rgb_frames_says_why(tmp_path: Path) -> None:
    monitor = EpisodeMonitor(str(tmp_path), resume=False, force=False, video=True)
    monitor.on_reset(CatchEnv())  # render_mode None: nothing to draw from
    # Written at once, before any episode has ended.
    assert video_error(tmp_path) == "the env draws no RGB frames (render_mode=None)"


def test_rendering_that_raises_is_noted(tmp_path: Path) -> None:
    host = EnvHost(EnvSpec("t/NoRenderer-v0", "envwire.testing.envs:NoRendererEnv"))
    assert host.env.render_mode == "rgb_array"
    host.monitor(str(tmp_path), False, False, True)
    host.reset(0, None)
    assert video_error(tmp_path) == (
        "rendering raised RuntimeError: NoRendererEnv has no renderer (on purpose)"
    )
    host.close()


def test_an_explicit_render_that_raises_is_noted(tmp_path: Path) -> None:
    host = EnvHost(EnvSpec("t/NoRenderer-v0", "envwire.testing.envs:NoRendererEnv"))
    host.monitor(str(tmp_path), False, False, True)
    with pytest.raises(EnvError, match="render raised RuntimeError"):
        host.call("render", ())
    assert video_error(tmp_path) == (
        "Render raised RuntimeError: NoRendererEnv has no renderer (on purpose)"
    )
    host.close()


def test_no_note_when_videos_are_off(tmp_path: Path) -> None:
    monitor = EpisodeMonitor(str(tmp_path), resume=False, force=False, video=False)
    monitor.on_reset(CatchEnv())
    monitor.note_missing_frames("ignored")
    assert monitor.video_error is None
