"""RayRuntime's connection: Ray missing, a cluster that is not there, bad [env.ray] tables at
server start, ``--isolation ray`` on the command line, where the cluster is looked for, and a
local Ray that a server starts on demand (and takes down with it)."""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import pytest

import envwire
from envwire import cli
from envwire.app import Server
from envwire.errors import ConfigError
from envwire.registry import Catalog, EnvSpec, parse_env_arg
from envwire.runtime.ray import RayRuntime
from envwire.testing import SERVER_ARGS, ServerProcess


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
    with pytest.raises(ConfigError, match="'inline', 'process', 'pool', 'ray' or 'auto'"):
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


def test_the_target_is_the_address_then_ray_address_then_local(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert RayRuntime().target == "local"
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    assert RayRuntime().target == "10.0.0.1:6379"
    assert RayRuntime("10.0.0.2:6379").target == "10.0.0.2:6379"


def _descendants(pid: int) -> set[int]:
    """The live processes under ``pid`` (from /proc: Ray's daemons and workers)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            # the command name in parentheses may hold spaces: the fields after it are fixed
            fields = stat.read_text().rpartition(")")[2].split()
            parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
def test_without_an_address_the_server_starts_a_local_ray_and_stops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("ray")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with ServerProcess(["CartPole-v1@ray"], SERVER_ARGS, start_timeout=120) as server:
        env = envwire.make(server.url("gym-socket", "CartPole-v1"), timeout=60)
        try:
            env.reset(seed=0)
            env.step(0)
        finally:
            env.close()
        assert server.process is not None
        ray_processes = _descendants(server.process.pid)
        assert ray_processes, "the server started no local Ray"
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in ray_processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in ray_processes if _alive(pid)], "the local Ray outlived the server"
