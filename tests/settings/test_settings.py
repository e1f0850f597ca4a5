"""Typed settings: one source for flags, keys, defaults, checks and the docs' table."""

from __future__ import annotations

import argparse
import dataclasses
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envwire.cli import _parser
from envwire.errors import ConfigError
from envwire.settings import SECTIONS, Settings, Source, given, keys, load, markdown
from envwire.settings.config import read
from envwire.settings.sections import metas

ROOT = Path(__file__).resolve().parents[2]


def test_every_key_is_unique_and_has_a_flag() -> None:
    seen: dict[str, str] = {}
    for section in SECTIONS:
        for _, meta in metas(section):
            assert meta.key not in seen, f"{meta.key} in {section.__name__} and {seen[meta.key]}"
            seen[meta.key] = section.__name__
            assert meta.flag.startswith("--") and meta.help and meta.kind.expects
    assert list(seen) == keys()


def test_every_setting_parses_from_its_flag_as_from_the_file() -> None:
    """The command line and the file agree: each default, given as a flag, loads to itself."""
    parser = _parser()
    for section in SECTIONS:
        for name, meta in metas(section):
            default = getattr(section(), name)
            if isinstance(default, bool) or default is None or isinstance(default, tuple):
                continue  # flags without a value, and settings that are off by default
            args = parser.parse_args(["serve", meta.flag, meta.kind.show(default)])
            assert given(args) == {meta.key: default}, meta.key


def test_flags_not_given_leave_their_keys_out() -> None:
    assert given(_parser().parse_args(["serve"])) == {}
    argv = ["serve", "--http", "off", "--allowed-host", "a", "--allowed-host", "b"]
    args = _parser().parse_args(argv)
    assert given(args) == {"http": None, "allowed_hosts": ["a", "b"]}
    assert load([Source("flags", given(args))]).security.allowed_hosts == ("a", "b")


def test_later_sources_win() -> None:
    chosen = load(
        [Source("file", {"gym_socket": 5000, "capacity": 3}), Source("flags", {"capacity": 7})]
    )
    assert (chosen.gym_socket.port, chosen.server.capacity) == (5000, 7)
    assert chosen.http.port == 8000  # a default stays


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"gym_sockett": 5000}, "unknown key 'gym_sockett' (did you mean 'gym_socket'?)"),
        ({"gym_socket": "five thousand"}, "gym_socket must be a port number from 0 to 65535"),
        ({"gym_socket": 70000}, "gym_socket must be a port number"),
        ({"capacity": 0}, "capacity must be an integer >= 1, or none, got 0"),
        ({"capacity": -5}, "capacity must be an integer >= 1"),
        ({"capacity": 2.5}, "capacity must be an integer"),
        ({"capacity": "3"}, "capacity must be an integer"),  # TOML has numbers: no strings
        ({"idle_timeout": -1}, "idle_timeout must be a number of seconds > 0"),
        ({"handshake_timeout": 0}, "handshake_timeout must be a number of seconds > 0, or auto"),
        ({"step_timeout": float("inf")}, "step_timeout must be a number of seconds > 0"),
        ({"isolation": "proces"}, "isolation must be one of 'auto', 'inline', 'process', 'pool'"),
        ({"isolation": "proces"}, "(did you mean 'process'?)"),
        ({"insecure": "yes"}, "insecure must be true or false"),
        ({"allowed_hosts": ["a", 1]}, "allowed_hosts must be a list of host names"),
        ({"record_fraction": 1.5}, "record_fraction must be a number from 0 to 1"),
        ({"busy_poll_us": 20_000}, "busy_poll_us must be a number of microseconds from 0"),
        ({"tls_cert": "c.pem"}, "TLS needs both a certificate and its key"),
        ({"arena_plugin_upload": True}, "arena_plugin_upload needs arena_plugins"),
        ({"gym_socket": "off", "http": "off", "grpc": "off"}, "every front end is off"),
    ],
)
def test_mistakes_name_the_key_and_what_it_expects(values: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load([Source("envwire.toml [server]", values)])
    assert message in str(caught.value)


def test_a_long_bad_value_is_cut_short() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.of(host="x" * 100_000 + "\n")
    assert len(str(caught.value)) < 300


def test_off_and_none_turn_optional_bounds_off() -> None:
    chosen = Settings.of(capacity="none", http="off", max_connections="none", idle_timeout="none")
    assert chosen.server.capacity is None and chosen.http.port is None
    assert chosen.security.max_connections is None and chosen.server.idle_timeout is None


def test_settings_are_frozen() -> None:
    chosen = Settings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        chosen.server.capacity = 3  # type: ignore[misc]


def test_the_docs_table_is_the_settings(tmp_path: Path) -> None:
    """docs/guides/serving.md holds exactly the table :func:`markdown` makes (regenerate it
    with ``python -m envwire.settings``)."""
    text = (ROOT / "docs" / "guides" / "serving.md").read_text()
    start = text.index("<!-- settings table: python -m envwire.settings -->")
    end = text.index("<!-- end of the settings table -->")
    table = text[start:end].split("\n", 1)[1]
    assert table.strip() == markdown().strip()


# -- the config file ---------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "envwire.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[serve]\nhost = 'a'\n", "unknown table [serve] (did you mean 'server'?)"),
        ("[server]\ngym_sockett = 5000\n", "[server]: unknown key 'gym_sockett'"),
        ("[[env]]\nentry_point = 'x:y'\n", "[[env]] #1: id is missing"),
        ("[[env]]\nid = 'a/B-v0'\nentry_pont = 'x:y'\n", "unknown key 'entry_pont' (did you"),
        ("[[env]]\nid = 'a/B-v0'\nentry_point = 'x:y'\nisolation = 'proces'\n", "isolation must"),
        ("[[env]]\nid = 'CartPole-v1'\nmax_episode_steps = 'ten'\n", "max_episode_steps must be"),
        ("[[env]]\nid = 'CartPole-v1'\nstep_timeout = -1\n", "step_timeout must be a number"),
        ("[[env]]\nid = 'CartPole-v1'\nkwargs = 3\n", "kwargs must be a table"),
        ("[[env]]\nid = 'no/Such-v0'\n", "entry_point is missing, and unknown env id"),
        ("[server\n", "cannot read config"),
    ],
)
def test_config_mistakes(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        read(write(tmp_path, text))
    assert message in str(caught.value) and str(tmp_path) in str(caught.value)


def test_pool_isolation_and_its_size_are_accepted(tmp_path: Path) -> None:
    text = "[server]\npool_workers = 3\n[[env]]\nid = 'a/B-v0'\nentry_point = 'x:y'\n"
    config = read(write(tmp_path, text + "isolation = 'pool'\n"))
    (spec,) = config.envs
    assert spec.resolved_isolation == "pool"
    assert load([config.server]).server.pool_workers == 3
    assert load([]).server.pool_workers == 0  # one per core, decided by the pool
    with pytest.raises(ConfigError, match="pool_workers must be"):
        load([Source("flags", {"pool_workers": -1})])


def test_the_switch_interval_is_seconds_above_zero() -> None:
    assert load([]).server.switch_interval == 0.02
    assert load([Source("flags", {"switch_interval": 0.005})]).server.switch_interval == 0.005
    with pytest.raises(ConfigError, match="switch_interval must be"):
        load([Source("flags", {"switch_interval": 0})])


@pytest.mark.process
def test_serve_sets_the_switch_interval(tmp_path: Path) -> None:
    """``envwire serve`` sets the interval for its own process (it is the server's)."""
    code = (
        "import sys, envwire.cli as cli\n"
        "class Stop(Exception): pass\n"
        "def fail(*a, **k): raise Stop(sys.getswitchinterval())\n"
        "cli.Server = fail\n"
        "try: cli.main(['serve', 'CartPole-v1', '--switch-interval', '0.03', '--workers', '1'])\n"
        "except Stop as stop: print(stop)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert float(out.stdout.strip()) == pytest.approx(0.03)


def test_an_env_table_without_entry_point_changes_a_known_env(tmp_path: Path) -> None:
    config = read(write(tmp_path, "[[env]]\nid = 'CartPole-v1'\nmax_episode_steps = 10\n"))
    (spec,) = config.envs
    assert spec.entry_point == "gym:CartPole-v1" and spec.max_episode_steps == 10


@pytest.mark.parametrize(
    "text",
    [
        "[server]\ngym_sockett = 5000\n",
        "[server]\ngym_socket = 'five thousand'\n",
        "[server]\nstep_timeout = -1\n",
        "[[env]]\nid = 'a/B-v0'\nentry_point = 'x:y'\nisolation = 'proces'\n",
        "[[env]]\nid = 'CartPole-v1'\nmax_episode_steps = 'ten'\n",
    ],
)
@pytest.mark.process
def test_serve_with_a_bad_config_exits_at_once_naming_the_key(tmp_path: Path, text: str) -> None:
    """Within a second (the interpreter's start aside), exit status 2, one line, no traceback,
    and nothing listens."""
    config = write(tmp_path, text)
    command = [sys.executable, "-m", "envwire", "serve", "--config", str(config)]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    took = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert "listening" not in done.stdout and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envwire: ") and str(config) in lines[0]
    key = re.search(r"(gym_sockett|gym_socket|step_timeout|isolation|max_episode_steps)", text)
    assert key is not None and key.group(1) in lines[0]
    assert took < 30  # bounded; the interpreter's start dominates


def test_argparse_mistakes_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        _parser().parse_args(["serve", "--capacity", "-5"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1
    assert "--capacity: expected an integer >= 1, or none, got '-5'" in err


def test_namespace_helpers_ignore_other_arguments() -> None:
    assert given(argparse.Namespace(envs=["x"], config=None, run=print)) == {}
