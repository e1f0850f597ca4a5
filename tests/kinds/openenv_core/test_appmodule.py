"""Reading back what an OpenEnv app module gave to openenv-core's ``create_app``."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from openenv.core.env_server.http_server import HTTPEnvServer, create_app
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import ConcurrencyConfig

from envwire.errors import ConfigError
from envwire.kinds.openenv_core import appmodule as openenv_app
from envwire.kinds.openenv_core.appmodule import (
    find_server,
    from_config,
    load_app,
    read_manifest,
    resolve,
)
from tests.openenv_envs.notes import NotesEnvironment
from tests.openenv_envs.walk import MoveAction, PositionObservation, WalkEnvironment

ENVS = Path(__file__).resolve().parents[2] / "openenv_envs"


def test_an_app_module_gives_its_factory_models_and_options() -> None:
    target = load_app("tests.openenv_envs.notes:app")
    assert target.factory is NotesEnvironment
    assert (target.action, target.observation) == (CallToolAction, CallToolObservation)
    assert target.max_concurrent_envs == 4
    assert target.name == "NotesEnvironment"
    assert not target.production
    assert target.extra_routes == ()


def test_create_app_without_options_means_one_session() -> None:
    app = create_app(WalkEnvironment, MoveAction, PositionObservation)
    target = openenv_app.from_server(find_server(app), app)
    assert target.max_concurrent_envs == 1
    assert target.session_timeout is None


def test_a_factory_function_and_a_concurrency_config() -> None:
    def make() -> WalkEnvironment:
        return WalkEnvironment()

    config = ConcurrencyConfig(max_concurrent_envs=3, session_timeout=30.0)
    app = create_app(make, MoveAction, PositionObservation, concurrency_config=config)
    target = openenv_app.from_server(find_server(app), app)
    assert target.factory is make
    assert target.env_class is None
    assert (target.max_concurrent_envs, target.session_timeout) == (3, 30.0)
    partial = functools.partial(WalkEnvironment)
    app = create_app(partial, MoveAction, PositionObservation)
    assert openenv_app.from_server(find_server(app), app).env_class is WalkEnvironment


def test_production_mode_and_routes_the_module_added() -> None:
    from fastapi import FastAPI

    app = FastAPI()
    server = HTTPEnvServer(WalkEnvironment, MoveAction, PositionObservation)
    server.register_routes(app, mode="production")

    @app.get("/config")
    def config() -> dict[str, str]:
        return {}

    target = openenv_app.from_server(find_server(app), app)
    assert target.production
    assert target.extra_routes == ("/config",)
    # The server object itself is a target too.
    assert openenv_app.from_server(find_server(server)).action is MoveAction


def test_objects_not_built_by_openenv_core_are_refused() -> None:
    from fastapi import FastAPI

    with pytest.raises(ConfigError, match="not built by openenv-core"):
        find_server(FastAPI())
    with pytest.raises(ConfigError, match="cannot import"):
        load_app("tests.openenv_envs.no_such_module:app")
    with pytest.raises(ConfigError, match="has no"):
        load_app("tests.openenv_envs.notes:no_such_app")
    with pytest.raises(ConfigError, match="must look like"):
        load_app("tests.openenv_envs.notes")


def test_the_config_form_checks_what_openenv_core_checks() -> None:
    walk = "tests.openenv_envs.walk"
    target = from_config(
        f"{walk}:WalkEnvironment",
        f"{walk}:MoveAction",
        f"{walk}:PositionObservation",
        max_concurrent_envs=8,
    )
    assert (target.factory, target.action, target.max_concurrent_envs) == (
        WalkEnvironment,
        MoveAction,
        8,
    )
    guess = "tests.openenv_envs.guess_env"
    with pytest.raises(ConfigError, match="SUPPORTS_CONCURRENT_SESSIONS"):
        from_config(
            f"{guess}.server.guess_environment:GuessEnvironment",
            f"{guess}.models:GuessAction",
            f"{guess}.models:GuessObservation",
            max_concurrent_envs=2,
        )
    with pytest.raises(ConfigError, match="not a pydantic model"):
        from_config(
            f"{walk}:WalkEnvironment", f"{walk}:WalkEnvironment", f"{walk}:PositionObservation"
        )


def test_a_manifest_names_the_app_relative_to_its_directory(tmp_path: Path) -> None:
    manifest = read_manifest(ENVS / "guess_env")
    assert manifest.name == "guess_env"
    assert manifest.app == "guess_env.server.app:app"  # a package: imported by its own name
    assert manifest.path == str(ENVS)
    (tmp_path / "openenv.yaml").write_text("name: loose\napp: server.app:app\n")
    loose = read_manifest(tmp_path)
    assert (loose.app, loose.path) == ("server.app:app", str(tmp_path))
    (tmp_path / "openenv.yaml").write_text("name: broken\n")
    with pytest.raises(ConfigError, match="names no app"):
        read_manifest(tmp_path)
    with pytest.raises(ConfigError, match="cannot read"):
        read_manifest(tmp_path / "missing")


def test_resolve_is_cached_and_adds_paths() -> None:
    manifest = read_manifest(ENVS / "guess_env")
    settings = {"app": True, "paths": [manifest.path], "max_concurrent_envs": 2}
    target = resolve(settings, manifest.app)
    assert target.action.__module__ == "guess_env.models"
    assert target.max_concurrent_envs == 2  # the operator's override
    assert resolve(settings, manifest.app) is target
    with pytest.raises(ConfigError, match="need either"):
        resolve({}, "x:y")
    assert resolve({"target": target}, "anything") is target  # an object served in-process
