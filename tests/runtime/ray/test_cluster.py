"""RayRuntime's connection: Ray missing, a cluster that is not there, bad [env.ray] tables at
server start, and ``--isolation ray`` on the command line."""

from __future__ import annotations

import sys
import time

import pytest

from envwire import cli
from envwire.errors import ConfigError
from envwire.registry import Catalog, EnvSpec, parse_env_arg
from envwire.runtime.ray import RayRuntime
from envwire.server.app import Server


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as if Ray were not installed."""
    monkeypatch.setitem(sys.modules, "ray", None)


def test_without_ray_the_error_names_the_extra(no_ray: None) -> None:
    with pytest.raises(
        ConfigError, match=r"needs Ray, which is not installed: pip install 'envwire\[ray\]'"
    ):
        RayRuntime().connect()
    with pytest.raises(ConfigError, match=r"pip install 'envwire\[ray\]'"):
        Server(Catalog([parse_env_arg("CartPole-v1@ray")]))


def test_the_command_line_reports_missing_ray(
    no_ray: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["serve", "CartPole-v1", "--isolation", "ray", "--gym-socket", "0"]) == 2
    assert "pip install 'envwire[ray]'" in capsys.readouterr().err


def test_servers_without_ray_envs_need_no_ray(no_ray: None) -> None:
    server = Server(Catalog([parse_env_arg("CartPole-v1@process")]))
    assert server.ray is None


def test_ray_isolation_from_every_source() -> None:
    assert parse_env_arg("CartPole-v1@ray").resolved_isolation == "ray"
    assert EnvSpec("x", "gym:CartPole-v1", isolation="ray").resolved_isolation == "ray"
    with pytest.raises(ConfigError, match="'inline', 'process', 'ray' or 'auto'"):
        parse_env_arg("CartPole-v1@cluster")


def test_bad_ray_tables_are_refused_when_the_server_is_made() -> None:
    pytest.importorskip("ray")
    spec = EnvSpec("g", "gym:CartPole-v1", isolation="ray", ray={"resource": {"godot": 1}})
    with pytest.raises(ConfigError, match=r"g: unknown \[env.ray\] keys \['resource'\]"):
        Server(Catalog([spec]))


def test_a_cluster_that_is_not_there_is_a_prompt_error() -> None:
    pytest.importorskip("ray")
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"cannot connect to the Ray cluster at 127.0.0.1:1"):
        RayRuntime("127.0.0.1:1").connect()
    assert time.monotonic() - start < 30


def test_the_place_timeout_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="place timeout must be positive"):
        RayRuntime(place_timeout=0)
