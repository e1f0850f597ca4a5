"""``--log-format json``: one JSON object per line with the session events."""

from __future__ import annotations

import json
import logging

import pytest

import envwire
from envwire.observe import JsonFormatter
from envwire.testing import ServerProcess

CART = "CartPole-v1"


def test_json_log_lines_carry_the_session_events() -> None:
    args = ("--log-format", "json", "--log-level", "INFO")
    with ServerProcess([CART], args) as process:
        env = envwire.make(f"gym-socket://127.0.0.1:{process.ports['gym-socket']}/{CART}")
        env.reset(seed=0)
        length, total, done = 0, 0.0, False
        while not done:
            _, reward, terminated, truncated, _ = env.step(0)
            length, total, done = length + 1, total + float(reward), terminated or truncated
        env.reset()
        with pytest.raises(envwire.EnvwireError):
            env.step(5)
        env.close()
        assert process.wait_for(lambda: any("session_closed" in line for line in process.output))
    entries = [json.loads(line) for line in process.output if line.startswith("{")]
    events = {e.get("event"): e for e in entries if "event" in e}
    assert {"session_opened", "episode_ended", "error", "session_closed"} <= set(events)
    for entry in entries:
        assert {"time", "level", "logger", "message"} <= set(entry)
    opened = events["session_opened"]
    assert opened["front_end"] == "gym-socket" and opened["env"] == CART
    assert opened["peer"].startswith("127.0.0.1:") and len(opened["session"]) == 32
    ended = events["episode_ended"]
    assert ended["length"] == length and ended["episode_return"] == total
    assert ended["session"] == opened["session"]
    assert events["error"]["code"] == "invalid_action"
    assert events["session_closed"]["steps"] == length  # the refused step took none


def test_the_formatter_writes_one_json_object() -> None:
    record = logging.LogRecord("envwire.events", logging.WARNING, __file__, 1, "x %s", ("y",), None)
    record.event, record.code = "error", "env_error"
    entry = json.loads(JsonFormatter().format(record))
    assert entry["message"] == "x y" and entry["level"] == "warning"
    assert entry["event"] == "error" and entry["code"] == "env_error"
    assert "\n" not in JsonFormatter().format(record)
