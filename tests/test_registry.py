"""Env ids, entry points, isolation and did-you-mean."""

from __future__ import annotations

import sys
from typing import Any

import gymnasium
import numpy as np
import pytest

from envwire.errors import ConfigError, EnvError, UnknownEnvError
from envwire.registry import DEFAULT_IDS, Catalog, EnvSpec, default_catalog, parse_env_arg


def test_default_catalog_is_classic_control_and_builtins() -> None:
    catalog = default_catalog()
    assert list(catalog) == list(DEFAULT_IDS)
    assert {"CartPole-v1", "Pendulum-v1", "Acrobot-v1", "envwire/Catch-v0"} <= set(catalog)
    assert all(spec.resolved_isolation == "inline" for spec in catalog.values())


@pytest.mark.parametrize(
    ("arg", "env_id", "entry", "isolation"),
    [
        ("CartPole-v1", "CartPole-v1", "gym:CartPole-v1", "inline"),
        ("pkg.mod:Env", "pkg.mod:Env", "pkg.mod:Env", "process"),
        ("my/Env-v0=pkg.mod:Env", "my/Env-v0", "pkg.mod:Env", "process"),
        ("fast=pkg.mod:Env@inline", "fast", "pkg.mod:Env", "inline"),
        ("CartPole-v1@process", "CartPole-v1", "gym:CartPole-v1", "process"),
        ("many=pkg.mod:Env@pool", "many", "pkg.mod:Env", "pool"),
        ("alias=CartPole-v1", "alias", "gym:CartPole-v1", "inline"),
    ],
)
def test_parse_env_arg(arg: str, env_id: str, entry: str, isolation: str) -> None:
    spec = parse_env_arg(arg)
    assert (spec.id, spec.entry_point, spec.resolved_isolation) == (env_id, entry, isolation)


def test_parse_env_arg_errors() -> None:
    with pytest.raises(ConfigError, match="did you mean 'CartPole-v1'"):
        parse_env_arg("CartPol-v1")
    with pytest.raises(ConfigError, match="isolation must be"):
        parse_env_arg("CartPole-v1@thread")


def test_lookup_suggests_close_ids_and_lists_what_is_served() -> None:
    catalog = default_catalog()
    with pytest.raises(UnknownEnvError, match="did you mean 'CartPole-v1'") as caught:
        catalog.lookup("CartPole-v2")
    assert "served here: CartPole-v1" in str(caught.value)
    small = Catalog([parse_env_arg("CartPole-v1")])
    with pytest.raises(UnknownEnvError, match="this server was not started with it"):
        small.lookup("Pendulum-v1")


def test_entry_points_make_envs_and_report_mistakes() -> None:
    env = EnvSpec("c", "envwire.envs.catch:CatchEnv", {"rows": 4}).make()
    assert env.observation_space.shape == (4, 5, 1)
    with pytest.raises(ConfigError, match="must look like"):
        EnvSpec("x", "nocolon").make()
    with pytest.raises(ConfigError, match="cannot import"):
        EnvSpec("x", "no_such_module_xyz:Env").make()
    with pytest.raises(ConfigError, match="has no Nope"):
        EnvSpec("x", "envwire.envs.catch:Nope").make()
    with pytest.raises(ConfigError, match=r"expected a gymnasium\.Env"):
        EnvSpec("x", "builtins:dict").make()
    with pytest.raises(EnvError, match="ValueError: Catch needs rows"):
        EnvSpec("x", "envwire.envs.catch:CatchEnv", {"rows": 1}).make()


def test_time_limits_apply_to_entry_points() -> None:
    env = EnvSpec("c", "envwire.envs.catch:CatchEnv", max_episode_steps=2).make()
    assert isinstance(env, gymnasium.wrappers.TimeLimit)


def test_overrides_apply_to_every_spec() -> None:
    catalog = default_catalog().with_overrides(step_timeout=3.0, isolation="process")
    assert {s.step_timeout for s in catalog.values()} == {3.0}
    assert {s.resolved_isolation for s in catalog.values()} == {"process"}


def test_client_kwargs_are_only_those_the_operator_opened() -> None:
    from envwire.errors import InvalidArgumentError

    spec = EnvSpec("c", "envwire.envs.catch:CatchEnv", {"columns": 3}, client_kwargs=("rows",))
    env = spec.with_client_kwargs({"rows": 4}).make()
    assert env.observation_space.shape == (4, 3, 1)
    with pytest.raises(InvalidArgumentError, match=r"may not set \['columns'\]"):
        spec.with_client_kwargs({"columns": 9})
    with pytest.raises(InvalidArgumentError, match="allowed: none"):
        EnvSpec("d", "envwire.envs.catch:CatchEnv").with_client_kwargs({"rows": 2})


def test_a_huge_id_gets_no_did_you_mean_and_is_not_echoed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 50 MB id once cost gigabytes in difflib and came back whole in the error."""
    from envwire import registry

    catalog = Catalog([EnvSpec("CartPole-v1", "gym:CartPole-v1")])

    def forbidden(*args: object, **kwargs: object) -> list[str]:
        raise AssertionError("did-you-mean ran on an over-long id")

    monkeypatch.setattr(registry.difflib, "get_close_matches", forbidden)
    huge = "CartPole-v1" + "x" * 50_000_000
    with pytest.raises(UnknownEnvError, match="at most 256 characters") as info:
        catalog.lookup(huge)
    assert len(str(info.value)) < 200
    assert "50000011 characters" in str(info.value)
    with pytest.raises(UnknownEnvError):
        catalog.lookup("x" * (registry.MAX_ENV_ID + 1))


def test_clip_keeps_short_text_and_cuts_long_text() -> None:
    from envwire.errors import clip

    assert clip("CartPole-v1") == "'CartPole-v1'"
    assert clip("a" * 1000, 20) == "'" + "a" * 18 + "... (1000 characters)"


def test_dm_env_entry_points_make_their_gymnasium_form() -> None:
    from envwire.kinds.dm_env import DmEnvGym

    spec = parse_env_arg("grid=envwire.testing.dmenvs:GridEnv")
    assert spec.resolved_isolation == "process" and spec.render_mode() is None
    env = EnvSpec("g", "envwire.testing.dmenvs:GridEnv", {"cells": 7}).make()
    assert isinstance(env, DmEnvGym) and env.observation_space["cell"].n == 7
    with pytest.raises(ConfigError, match="cannot render in mode 'rgb_array'"):
        EnvSpec("g", "envwire.testing.dmenvs:GridEnv", {"render_mode": "rgb_array"}).make()
    with pytest.raises(ConfigError, match=r"expected a gymnasium\.Env, a dm_env\.Environment"):
        EnvSpec("x", "builtins:object").make()


def grid_factory(cells: int = 5) -> Any:
    """A factory entry point that returns a dm_env env (not a class)."""
    from envwire.testing.dmenvs import GridEnv

    return GridEnv(cells=cells, limit=4)


def test_dm_env_factories_make_their_gymnasium_form_too() -> None:
    from envwire.kinds.dm_env import DmEnvGym

    env = EnvSpec("f", f"{__name__}:grid_factory", {"cells": 6}).make()
    assert isinstance(env, DmEnvGym) and env.observation_space["cell"].n == 6
    specs = env.unwrapped.dm_specs()
    assert specs.action["move"].num_values == 3 and specs.reward.dtype == np.float32
    env.reset(seed=1)
    ends = [env.step({"move": 1, "force": np.zeros(2, np.float32)})[2:4] for _ in range(4)]
    env.close()
    assert ends[-1] == (False, True)  # the factory's time limit: LAST with discount 1


def test_dm_control_suite_names() -> None:
    pytest.importorskip("dm_control", reason="the dm-control extra is not installed")
    spec = parse_env_arg("dm_control/cartpole-swingup")
    assert (spec.id, spec.entry_point) == ("dm_control/cartpole-swingup",) * 2
    assert spec.resolved_isolation == "process" and spec.render_mode() == "rgb_array"
    alias = parse_env_arg("cart=dm_control/cartpole-swingup@inline")
    assert (alias.id, alias.entry_point, alias.isolation) == (
        "cart",
        "dm_control/cartpole-swingup",
        "inline",
    )
    env = alias.make(render_mode="rgb_array", render_kwargs={"height": 24, "width": 32})
    env.reset(seed=0)
    frame = env.render()
    env.close()
    assert frame.shape == (24, 32, 3) and frame.dtype == np.uint8
    with pytest.raises(ConfigError, match="did you mean 'dm_control/walker-walk'"):
        parse_env_arg("dm_control/walker-wlak")


def test_dm_control_names_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dm_control", None)  # as if it were not installed
    with pytest.raises(
        ConfigError, match=r"needs dm_control, .*: pip install 'envwire\[dm-control\]'"
    ):
        parse_env_arg("dm_control/cartpole-swingup")
