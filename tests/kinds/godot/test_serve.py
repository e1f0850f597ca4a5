"""The example Godot game in the catalog, served by ``envwire serve`` through gym-socket."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import envwire
from envwire.testing import ServerProcess


def test_example_game_through_envwire_serve(
    godot_binary: str, example_project: Path, tmp_path: Path
) -> None:
    config = tmp_path / "envwire.toml"
    config.write_text(
        "[[env]]\n"
        'id = "godot/Reach-v0"\n'
        'entry_point = "envwire.kinds.godot.catalog:godot_game"\n'
        f"kwargs = {{ command = {json.dumps([godot_binary, '--path', str(example_project)])}, "
        'action_space = { type = "Discrete", n = 3 }, '
        'observation_space = { type = "Box", low = -1, high = 1, shape = [2], '
        'dtype = "float32" } }\n'
    )
    with ServerProcess([], ["--config", str(config)]) as server:
        url = server.url("gym-socket", "godot/Reach-v0")
        first, second = envwire.make(url), envwire.make(url)  # one game instance each
        try:
            assert first.observation_space.shape == (2,)
            obs, _ = first.reset(seed=0)
            other, _ = second.reset(seed=0)
            np.testing.assert_array_equal(obs, other)
            episodes, steps = 0, 0
            while episodes < 2 and steps < 2000:
                position, target = obs
                action = 2 if target > position else 0  # move towards the target
                obs, reward, terminated, truncated, _ = first.step(action)
                assert obs in first.observation_space and isinstance(reward, float)
                steps += 1
                if terminated or truncated:
                    episodes += 1
                    obs, _ = first.reset()
            assert episodes == 2, f"no episode ended in {steps} steps"
            second.step(1)
        finally:
            first.close()
            second.close()
