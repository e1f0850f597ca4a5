"""Godot games as catalog entries: specs with space descriptions, one game per env."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from gymnasium import spaces

from envwire.errors import ConfigError
from envwire.kinds.godot import GodotGameSpec, make_godot_env
from envwire.kinds.godot.catalog import godot_game, space_from_description


def test_descriptions_and_spaces() -> None:
    assert space_from_description({"type": "Discrete", "n": 3}) == spaces.Discrete(3)
    box = space_from_description({"type": "Box", "low": -1, "high": 1, "shape": [2]})
    assert box == spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
    given = spaces.MultiBinary(4)
    assert space_from_description(given) is given


def test_a_bad_description_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="bad space description"):
        space_from_description({"type": "Discrete"})


def test_each_env_launches_its_own_game(fake_game_cmd: Callable[[str], list[str]]) -> None:
    spec = GodotGameSpec(
        command=tuple(fake_game_cmd("normal")),
        action_space={"type": "Discrete", "n": 2},
        observation_space={"type": "Box", "low": 0, "high": 10, "shape": [1]},
        frames_per_step=3,
        extra_args=("--verbose=1",),
        connect_timeout=30.0,
    )
    envs = [make_godot_env(spec) for _ in range(2)]
    try:
        assert envs[0].port != envs[1].port
        assert envs[0].game_pid != envs[1].game_pid
        for env in envs:
            env.reset()
            obs, reward, *_ = env.step(1)
            assert obs.tolist() == [1.0]
            assert reward == 1.0
        log = envs[0].game_log
        assert log is not None
    finally:
        for env in envs:
            env.close()
    assert [env.game_exit_code for env in envs] == [0, 0]


def test_a_command_string_is_split_not_spelled_out() -> None:
    # A TOML string once became a tuple of characters; now it is GodotEnv's string form.
    with pytest.raises(ConfigError, match=r"uses '\|'.*exe_cmd=\["):
        godot_game(
            command="cd /project && godot3-server scene.tscn | tee log",
            action_space={"type": "Discrete", "n": 2},
            observation_space={"type": "Box", "low": 0, "high": 10, "shape": [1]},
        )
