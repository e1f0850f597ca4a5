"""GodotEnv against the real headless Godot 3 running the example scene with envwire's addon."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from envwire.errors import EnvCrashedError, EnvTimeoutError
from envwire.kinds.godot import GodotEnv, GodotGameSpec, example_spec, make_godot_env

STEP = 1.5 * 2 / 60  # the example's speed times the addon's default 2 frames per step
LEFT, STAY, RIGHT = 0, 1, 2


@pytest.fixture
def spec(godot_binary: str, example_project: Path) -> GodotGameSpec:
    return replace(example_spec(example_project, godot_binary), reply_timeout=20.0)


@pytest.fixture
def env(spec: GodotGameSpec) -> Iterator[GodotEnv]:
    env = make_godot_env(spec, render_mode="rgb_array")
    yield env
    env.close()


def column(x: float) -> int:
    """The image column the example draws position ``x`` at."""
    return round((x + 1.0) / 2.0 * 63)


def test_reset_and_many_steps(env: GodotEnv) -> None:
    obs, info = env.reset(seed=1)
    assert info == {}
    assert env.observation_space.contains(obs)
    assert obs[0] == 0.0
    position, in_episode, episodes = 0.0, 0, 0
    for i in range(400):
        action = RIGHT if i % 2 == 0 else LEFT  # wiggle around 0: never reaches a target
        obs, reward, terminated, truncated, _ = env.step(action)
        in_episode += 1
        assert env.observation_space.contains(obs)
        assert truncated is False
        position += STEP if action == RIGHT else -STEP
        assert obs[0] == pytest.approx(position, abs=1e-5)
        toward = (action == RIGHT) == (obs[1] > 0)
        assert reward == pytest.approx(STEP if toward else -STEP, abs=1e-5)  # progress made
        if terminated:  # 5 s of game time at 60 fps, 2 frames per step
            assert 149 <= in_episode <= 151
            obs, _ = env.reset()
            position, in_episode, episodes = 0.0, 0, episodes + 1
    assert episodes == 2


def test_episodes_with_a_greedy_policy(env: GodotEnv) -> None:
    obs, _ = env.reset(seed=7)
    episodes, steps, returns = 0, 0, 0.0
    while episodes < 8:
        action = RIGHT if obs[1] > obs[0] else LEFT
        obs, reward, terminated, _, _ = env.step(action)
        steps += 1
        returns += reward
        if terminated:
            assert reward > 1.0  # the last move gets closer and collects the bonus
            episodes += 1
            obs, _ = env.reset()
    assert steps < 8 * 30  # targets lie at most 0.9 away: at most 18 moves each
    assert returns > 8.0


def test_an_episode_ends_when_its_time_is_up(env: GodotEnv) -> None:
    env.reset(seed=3)
    steps, terminated = 0, False
    while not terminated:
        _, _, terminated, _, _ = env.step(STAY)
        steps += 1
        assert steps <= 200
    assert 149 <= steps <= 151  # 5 s of game time at 60 fps, 2 frames per step


def test_seeded_resets_repeat(env: GodotEnv) -> None:
    first, _ = env.reset(seed=42)
    env.step(RIGHT)
    again, _ = env.reset(seed=42)
    other, _ = env.reset(seed=43)
    np.testing.assert_array_equal(first, again)
    assert first[1] != other[1]


def test_render_reads_the_png_back(env: GodotEnv) -> None:
    obs, _ = env.reset(seed=5)
    for _ in range(4):
        obs, *_ = env.step(RIGHT if obs[1] > 0 else LEFT)
    frame = env.render()
    assert frame is not None
    assert frame.shape == (8, 64, 3)
    assert frame.dtype == np.uint8
    red = np.flatnonzero((frame[0] == (255, 0, 0)).all(axis=-1))
    green = np.flatnonzero((frame[0] == (0, 255, 0)).all(axis=-1))
    assert red.tolist() == [column(float(obs[0]))]
    assert green.tolist() == [column(float(obs[1]))]
    assert env.render() is not None  # the second frame of the episode, 1.png
    assert not any(env.render_dir.iterdir())


def test_frames_per_step_extension(spec: GodotGameSpec) -> None:
    env = make_godot_env(replace(spec, frames_per_step=4))
    try:
        env.reset(seed=1)
        obs, *_ = env.step(RIGHT)
        assert obs[0] == pytest.approx(2 * STEP, abs=1e-5)
    finally:
        env.close()


def test_close_stops_the_game(env: GodotEnv) -> None:
    env.reset()
    pid = env.game_pid
    assert pid is not None
    env.close()
    assert env.game_exit_code == 0  # the addon quit on the close command
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_game_killed_mid_step(spec: GodotGameSpec) -> None:
    # A step of a billion frames never finishes on its own: the game dies during it.
    env = make_godot_env(replace(spec, frames_per_step=10**9, reply_timeout=60.0))
    try:
        env.reset()
        pid = env.game_pid
        assert pid is not None
        killer = threading.Timer(0.3, os.kill, (pid, signal.SIGKILL))
        killer.start()
        with pytest.raises(EnvCrashedError, match="exited with signal SIGKILL while waiting"):
            env.step(RIGHT)
        killer.join()
    finally:
        env.close()


def test_a_game_that_never_connects(
    spec: GodotGameSpec, godot_binary: str, example_project: Path, free_port: int
) -> None:
    env = GodotEnv(spec.action_space, spec.observation_space)  # type: ignore[arg-type]
    game = subprocess.Popen(
        [
            godot_binary,
            "--path",
            str(example_project),
            f"--serverPort={free_port}",
            "--connectTimeout=1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with pytest.raises(EnvTimeoutError, match="no Godot game connected"):
            env.wait_for_game(timeout=0.5)
        assert game.wait(timeout=30) == 3  # the addon gave up on the server it was sent to
    finally:
        game.kill()
        game.wait()
        env.close()


def test_a_game_started_elsewhere(
    spec: GodotGameSpec, godot_binary: str, example_project: Path
) -> None:
    env = GodotEnv(spec.action_space, spec.observation_space)  # type: ignore[arg-type]
    game = subprocess.Popen(
        [godot_binary, "--path", str(example_project), *env.game_args()],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        env.reset(seed=0)
        obs, *_ = env.step(RIGHT)
        assert obs[0] == pytest.approx(STEP, abs=1e-5)
        env.close()
        assert game.wait(timeout=30) == 0
    finally:
        game.kill()
        game.wait()
        env.close()


def test_each_env_has_its_own_game(spec: GodotGameSpec) -> None:
    envs = [make_godot_env(spec) for _ in range(2)]
    try:
        for env in envs:
            env.reset(seed=0)
        left, *_ = envs[0].step(LEFT)
        right, *_ = envs[1].step(RIGHT)
        assert left[0] == pytest.approx(-STEP, abs=1e-5)
        assert right[0] == pytest.approx(STEP, abs=1e-5)
        assert envs[0].game_pid != envs[1].game_pid
    finally:
        for env in envs:
            env.close()


def test_gymnasium_check_env(env: GodotEnv) -> None:
    with warnings.catch_warnings():
        # check_env can only try other render modes on envs made by gymnasium.make.
        warnings.filterwarnings("ignore", message=".*not having a spec")
        check_env(env)
