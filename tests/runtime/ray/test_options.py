"""[env.ray] tables: what is accepted, what each turns into for Ray, and clear refusals."""

from __future__ import annotations

import pytest

from envwire.errors import ConfigError
from envwire.runtime.ray import RayOptions


def test_no_table_keeps_rays_defaults() -> None:
    options = RayOptions.from_table("e", None)
    assert options == RayOptions()
    assert options.actor_options() == {}
    assert options.bundle() == {"CPU": 1.0}


def test_a_full_table() -> None:
    table = {
        "num_cpus": 2,
        "num_gpus": 0.5,
        "memory": 1 << 30,
        "resources": {"godot": 1},
        "runtime_env": {"env_vars": {"A": "1"}},
        "strategy": "SPREAD",
    }
    options = RayOptions.from_table("e", table)
    assert options.actor_options() == {
        "num_cpus": 2,
        "num_gpus": 0.5,
        "memory": 1 << 30,
        "resources": {"godot": 1},
        "runtime_env": {"env_vars": {"A": "1"}},
    }
    assert options.bundle() == {"CPU": 2.0, "GPU": 0.5, "memory": float(1 << 30), "godot": 1.0}
    assert options.describe() == f"CPU=2, GPU=0.5, memory={1 << 30}, godot=1"


def test_actors_in_a_placement_group_take_exactly_their_bundle() -> None:
    options = RayOptions.from_table("e", {"resources": {"godot": 1}, "strategy": "PACK"})
    assert options.actor_options(bundled=True) == {
        "num_cpus": 1.0,
        "num_gpus": 0.0,
        "resources": {"godot": 1.0},
    }
    no_cpu = RayOptions.from_table("e", {"num_cpus": 0, "resources": {"godot": 1}})
    assert no_cpu.bundle() == {"godot": 1.0}
    assert no_cpu.actor_options(bundled=True) == {
        "num_cpus": 0.0,
        "num_gpus": 0.0,
        "resources": {"godot": 1.0},
    }


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"num_cpu": 1}, r"e: unknown \[env.ray\] keys \['num_cpu'\]"),
        ({"num_cpus": -1}, "num_cpus must be a non-negative number, got -1"),
        ({"num_gpus": "one"}, "num_gpus must be a non-negative number"),
        ({"memory": True}, "memory must be a non-negative number"),
        ({"resources": {"godot": "x"}}, "resources.godot must be a non-negative number"),
        ({"resources": 3}, "resources must be a table"),
        ({"runtime_env": "pip"}, "runtime_env must be a table"),
        ({"strategy": "spread"}, "strategy must be one of PACK, SPREAD, STRICT_PACK"),
        ({"num_cpus": 0, "strategy": "PACK"}, "a placement strategy needs each actor"),
    ],
)
def test_mistakes_are_config_errors_naming_the_env_and_key(
    table: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        RayOptions.from_table("e", table)
