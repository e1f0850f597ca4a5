"""``envwire serve``: the refusal to expose a port without tokens, and SIGHUP reloads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import envwire
from envwire.errors import UnauthenticatedError
from envwire.launcher import launch
from envwire.testing import ServerProcess
from tests.server.security.conftest import OTHER_TOKEN, TOKEN, Secrets, serve


def run_serve(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "envwire", "serve", "CartPole-v1", *args]
    command += ["--gym-socket", "0", "--http", "0", "--grpc", "0"]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.11.12.13"])
def test_a_public_address_without_tokens_is_refused(host: str) -> None:
    done = run_serve("--host", host)
    assert done.returncode == 2
    assert "without authentication" in done.stderr
    assert "--token-file" in done.stderr and "--insecure" in done.stderr
    assert "listening" not in done.stdout


def test_the_config_file_cannot_sneak_past_it(tmp_path: Path) -> None:
    config = tmp_path / "server.toml"
    config.write_text('[server]\nhost = "0.0.0.0"\n')
    done = run_serve("--config", str(config))
    assert done.returncode == 2 and "--insecure" in done.stderr


@pytest.mark.parametrize("extra", [["--insecure"], ["--token-file", "TOKENS"]])
def test_insecure_or_tokens_let_it_start(extra: list[str], secrets: Secrets) -> None:
    args = ["--host", "0.0.0.0", *(str(secrets.token_file) if a == "TOKENS" else a for a in extra)]
    with ServerProcess(["CartPole-v1"], args) as server:
        assert server.host == "0.0.0.0"


def test_tls_needs_both_files(secrets: Secrets) -> None:
    done = run_serve("--tls-cert", secrets.tls.cert)
    assert done.returncode == 2 and "--tls-key" in done.stderr


def test_sighup_reloads_the_token_file(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(TOKEN + "\n")
    tokens.chmod(0o600)
    with serve(tmp_path, ["gym-socket"], token_file=tokens) as server:
        url = server.url("gym-socket", "CartPole-v1")
        envwire.make(url, token=TOKEN).close()
        tokens.write_text(OTHER_TOKEN + "\n")
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGHUP)

        def swapped() -> bool:
            try:
                envwire.make(url, token=OTHER_TOKEN).close()
            except UnauthenticatedError:
                return False
            return True

        assert server.wait_for(swapped, timeout=10, interval=0.2)
        with pytest.raises(UnauthenticatedError, match="not accepted"):
            envwire.make(url, token=TOKEN)
        tokens.write_text("")  # a bad edit keeps the tokens in force
        os.kill(server.process.pid, signal.SIGHUP)
        assert server.wait_for(lambda: any("stay in force" in line for line in server.output))
        envwire.make(url, token=OTHER_TOKEN).close()
        assert not any(TOKEN in line or OTHER_TOKEN in line for line in server.output)


def test_the_launcher_serves_with_a_token() -> None:
    """launch(token=...) makes its server require that token, so it may bind any address."""

    with launch("CartPole-v1", host="0.0.0.0", token=TOKEN, timeout=30) as env:
        env.reset(seed=0)
        url = env.url  # type: ignore[union-attr]
        with pytest.raises(UnauthenticatedError):
            envwire.make(url)


def test_a_reload_closes_what_a_revoked_token_opened(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"{TOKEN}\n{OTHER_TOKEN}\n")
    tokens.chmod(0o600)
    front_ends = ["gym-socket", "http", "grpc"]
    with serve(tmp_path, front_ends, token_file=tokens) as server:
        urls = [
            server.url("gym-socket", "CartPole-v1"),
            server.url("ws", "envs/CartPole-v1", "http"),
            server.url("grpc", "CartPole-v1"),
        ]
        revoked = [envwire.make(url, token=TOKEN) for url in urls]
        kept = [envwire.make(url, token=OTHER_TOKEN) for url in urls]
        for env in revoked + kept:
            env.reset(seed=0)
        tokens.write_text(OTHER_TOKEN + "\n")
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGHUP)
        assert server.wait_for(
            lambda: any("connections of revoked tokens closed" in x for x in server.output),
            timeout=10,
        )
        assert any("3 connections of revoked tokens closed" in x for x in server.output)
        for env in revoked:
            with pytest.raises(envwire.EnvwireError):
                env.step(0)
            env.close()
        for env in kept:  # the others' sessions go on
            env.step(0)
            env.close()
