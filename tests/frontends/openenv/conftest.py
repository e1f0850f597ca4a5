"""Fixtures of the OpenEnv tests: real ``envwire serve`` processes with only the http front end."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from envwire.ports import FRONT_ENDS, HTTP
from envwire.testing import CONFORMANCE_ENVS, ServerProcess

ROOT = Path(__file__).resolve().parents[3]

#: The typed built-ins and a reward-scaled echo, beside the conformance envs.
TYPED_ENVS = (
    "envwire/Echo-v0",
    "envwire/Connect4-v0",
    "envwire/Coding-v0",
    "test/ScaledEcho-v0=tests.frontends.openenv.helpers:scaled_echo@inline",
    "test/QuickCoding-v0=tests.frontends.openenv.helpers:quick_coding@inline",
)


def only_http() -> tuple[str, ...]:
    """Arguments that switch every other front end off."""
    args: list[str] = []
    for row in FRONT_ENDS:
        if row is not HTTP:
            args += [row.flag, "off"]
    return tuple(args)


def http_server(
    tmp: Path,
    envs: Sequence[str],
    args: Sequence[str] = (),
    *,
    start_timeout: float = 60.0,
    **settings: object,
) -> ServerProcess:
    """A ServerProcess serving ``envs`` over http only; ``settings`` go to its [server] table.
    OpenEnv's own envs import openenv-core at start-up (seconds of CPU): give them longer."""
    config = tmp / "server.toml"
    lines = ["[server]"] + [f"{key} = {_toml(value)}" for key, value in settings.items()]
    config.write_text("\n".join(lines) + "\n")
    # From the repository root, so that ``tests.frontends.openenv.helpers`` entry points import.
    return ServerProcess(
        envs,
        (*only_http(), "--config", str(config), *args),
        front_ends=("http",),
        cwd=ROOT,
        start_timeout=start_timeout,
    )


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A shared server: the typed envs first (envwire/Echo-v0 is the root env), then the
    conformance envs."""
    tmp = tmp_path_factory.mktemp("openenv-server")
    envs = (*TYPED_ENVS, *CONFORMANCE_ENVS)
    with http_server(tmp, envs, ("--step-timeout", "10", "--capacity", "300")) as proc:
        yield proc


@pytest.fixture(scope="session")
def base(server: ServerProcess) -> str:
    """http://host:port of the shared server."""
    return f"http://{server.host}:{server.ports['http']}"
