"""The ``envwire`` command line: argument checking, ``--version``, and ``list``'s output."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import envwire
from envwire.cli import build_catalog, main
from envwire.errors import ConfigError
from envwire.registry import EnvSpec
from envwire.settings import ServerSettings, Settings, Source, load
from envwire.settings.config import env_spec


def _exit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    out, err = capsys.readouterr()
    return int(stop.value.code or 0), out, err


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _exit(["--version"], capsys)
    assert code == 0 and out.strip() == f"envwire {envwire.__version__}"


def test_log_level_takes_only_known_levels(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _exit(["--log-level", "foo", "list"], capsys)
    assert code == 2
    assert "invalid choice: 'FOO'" in err and "DEBUG" in err and "Traceback" not in err


def test_log_level_is_case_insensitive(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    configured: dict[str, Any] = {}
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: configured.update(kw))
    assert main(["--log-level", "debug", "list", "CartPole-v1"]) == 0
    assert configured["level"] == "DEBUG"
    assert "CartPole-v1  [inline]" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["0", "-1", "inf", "soon"])
def test_step_timeout_must_be_positive_seconds(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _exit(["list", "--step-timeout", value], capsys)
    assert code == 2 and "--step-timeout" in err


def test_idle_timeout_zero_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    # 0 would make every connection's socket non-blocking: dropped at its first silence.
    code, _, err = _exit(["serve", "--idle-timeout", "0"], capsys)
    assert code == 2 and "--idle-timeout: expected a number of seconds > 0, or none" in err


def test_step_timeout_reaches_every_spec() -> None:
    (spec,) = build_catalog(["CartPole-v1"], (), ServerSettings(step_timeout=0.5)).values()
    assert spec.step_timeout == 0.5


@pytest.mark.parametrize("field", ["step_timeout", "make_timeout"])
@pytest.mark.parametrize("value", [0, -2.0])
def test_spec_timeouts_must_be_positive(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=f"{field} must be a positive number of seconds"):
        EnvSpec("x/Y-v0", "gym:CartPole-v1", **{field: value})  # type: ignore[arg-type]


def test_config_file_with_a_zero_step_timeout_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "envwire.toml"
    config.write_text('[[env]]\nid = "a/B-v0"\nentry_point = "gym:CartPole-v1"\nstep_timeout = 0\n')
    assert main(["list", "--config", str(config)]) == 2
    assert "step_timeout must be a number of seconds > 0, got 0" in capsys.readouterr().err


def test_list_keeps_deprecation_warnings_out_of_the_catalog(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["list", "CartPole-v0", "CartPole-v1"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "\x1b[" not in out
    v0, v1 = out.split("CartPole-v1  [inline]")
    assert v0.startswith("CartPole-v0  [inline]")
    assert "note:" in v0 and "out of date" in v0 and "`v1`" in v0
    assert "note:" not in v1


@pytest.mark.parametrize(
    ("option", "table", "layout"),
    [
        (None, {}, "auto"),
        ("seed", {"monitor_layout": "video"}, "seed"),
        (None, {"monitor_layout": "seed"}, "seed"),
        (None, {"legacy_monitor_reply": True}, "video"),  # the old setting's name still works
    ],
)
def test_monitor_layout_from_flags_and_config(
    option: str | None, table: dict[str, Any], layout: str
) -> None:
    flags = {} if option is None else {"monitor_layout": option}
    chosen = load([Source("envwire.toml [server]", table), Source("the command line", flags)])
    assert chosen.gym_socket.monitor_layout == layout


def test_a_bad_monitor_layout_in_the_config_is_refused() -> None:
    with pytest.raises(ConfigError, match="monitor_layout must be one of"):
        Settings.of(monitor_layout="go")


def test_monitor_layout_flag_choices(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _exit(["serve", "--monitor-layout", "legacy"], capsys)
    assert code == 2 and "expected one of 'auto', 'seed' or 'video', got 'legacy'" in err


def test_an_openenv_class_and_its_models_from_the_config() -> None:
    guess = "tests.openenv_envs.guess_env"
    table = {
        "id": "oe/Guess-v0",
        "entry_point": f"{guess}.server.guess_environment:GuessEnvironment",
        "openenv": {
            "action": f"{guess}.models:GuessAction",
            "observation": f"{guess}.models:GuessObservation",
        },
    }
    (spec,) = build_catalog([], [env_spec(table, "test")], ServerSettings()).values()
    # Not marked SUPPORTS_CONCURRENT_SESSIONS: one session, as openenv-core allows.
    assert (
        spec.openenv is not None and spec.max_sessions == 1 and spec.resolved_isolation == "inline"
    )
    table["openenv"] = {**table["openenv"], "max_concurrent_envs": 2}
    with pytest.raises(ConfigError, match="SUPPORTS_CONCURRENT_SESSIONS"):
        build_catalog([], [env_spec(table, "test")], ServerSettings())
    walk_id = "oe/Walk-v0=tests.openenv_envs.walk:WalkEnvironment"
    (walk,) = build_catalog([walk_id], (), ServerSettings()).values()
    assert walk.openenv == {"class": True} and walk.max_sessions is None


def test_busy_poll_out_of_range_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["serve", "--busy-poll-us", "20000", "--gym-socket", "0", "--http", "off"]
    code, _, err = _exit([*argv, "--grpc", "off", "CartPole-v1"], capsys)
    assert code == 2 and "--busy-poll-us: expected a number of microseconds from 0 to 10000" in err
