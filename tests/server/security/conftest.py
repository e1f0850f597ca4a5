"""Servers with tokens, TLS and small limits, for the security tests."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from envwire.testing import CONFORMANCE_ENVS, ServerProcess
from tests.tlsfiles import TlsFiles, make_tls_files

ROOT = Path(__file__).resolve().parents[3]

TOKEN = "test-token-0123456789abcdef"
OTHER_TOKEN = "test-token-fedcba9876543210"


@dataclass(frozen=True)
class Secrets:
    """A token file holding :data:`TOKEN`, and TLS files."""

    token_file: Path
    tls: TlsFiles


@pytest.fixture(scope="session")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> Secrets:
    directory = tmp_path_factory.mktemp("secrets")
    token_file = directory / "tokens.txt"
    token_file.write_text(f"# tokens for the tests\n{TOKEN}\n")
    token_file.chmod(0o600)
    return Secrets(token_file, make_tls_files(directory / "tls"))


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Path):
        return f'"{value}"'
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


def serve(
    tmp: Path,
    front_ends: Sequence[str],
    *,
    envs: Sequence[str] = CONFORMANCE_ENVS,
    args: Sequence[str] = (),
    **settings: object,
) -> ServerProcess:
    """A ServerProcess running ``front_ends``; ``settings`` go to its ``[server]`` table."""
    config = tmp / f"server-{len(os.listdir(tmp))}.toml"
    lines = ["[server]"] + [f"{key} = {_toml(value)}" for key, value in settings.items()]
    config.write_text("\n".join(lines) + "\n")
    return ServerProcess(
        envs, ("--config", str(config), *args), front_ends=tuple(front_ends), cwd=ROOT
    )


def secured(secrets: Secrets, *, tls: bool = False) -> dict[str, object]:
    """Settings for a server that requires :data:`TOKEN` (and serves TLS when ``tls``)."""
    settings: dict[str, object] = {"token_file": secrets.token_file}
    if tls:
        settings |= {"tls_cert": secrets.tls.cert, "tls_key": secrets.tls.key}
    return settings


def threads_of(pid: int) -> int:
    """How many threads a process has (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no thread count in /proc")
