"""``--log-format json`` with Ray in the same process: every stderr line stays JSON.

The ray extra is not needed: a stand-in ``ray`` module does at import and at ``ray.init`` what
Ray 2.x does in a driver (from Ray's logging documentation): it gives the ``ray`` logger a
plain-text stderr handler that does not propagate, logs "Started a local Ray instance." on
``ray._private.worker``, and, unless ``log_to_driver=False``, prints the actors' output on
stderr as ``(pid=N) ...`` lines.
"""

from __future__ import annotations

import io
import json
import logging
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from envwire.observe.logs import JsonFormatter
from envwire.runtime.ray import RayRuntime


def _stand_in(stderr: io.StringIO, calls: list[dict[str, Any]]) -> types.ModuleType:
    ray = types.ModuleType("ray")
    state = {"up": False}
    handler = logging.StreamHandler(stderr)
    handler.setFormatter(
        logging.Formatter("%(asctime)s\t%(levelname)s %(filename)s -- %(message)s")
    )
    logging.getLogger("ray").addHandler(handler)
    logging.getLogger("ray").propagate = False

    def init(**kwargs: Any) -> None:
        calls.append(kwargs)
        state["up"] = True
        logging.getLogger("ray._private.worker").warning("Started a local Ray instance.")
        if kwargs.get("log_to_driver", True):
            print("(EnvActor pid=4242) an actor's print", file=sys.stderr)

    ray.init = init  # type: ignore[attr-defined]
    ray.is_initialized = lambda: state["up"]  # type: ignore[attr-defined]
    context = types.SimpleNamespace(gcs_address="127.0.0.1:6379")
    ray.get_runtime_context = lambda: context  # type: ignore[attr-defined]
    return ray


@pytest.fixture
def json_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """The root logger writing JSON lines to a buffer that is also ``sys.stderr``."""
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    root = logging.getLogger()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    saved = root.handlers[:], root.level
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    ray_logger = logging.getLogger("ray")
    ray_saved = ray_logger.handlers[:], ray_logger.propagate
    try:
        yield stream
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        ray_logger.handlers[:], ray_logger.propagate = ray_saved


def test_ray_lines_are_json_lines(json_root: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[dict[str, Any]] = []
    monkeypatch.setitem(sys.modules, "ray", _stand_in(json_root, calls))
    assert RayRuntime().connect() == "127.0.0.1:6379"
    assert calls == [{"address": "local", "namespace": "envwire", "log_to_driver": False}]
    lines = json_root.getvalue().splitlines()
    records = [json.loads(line) for line in lines]  # every line is JSON
    assert [r["message"] for r in records] == ["Started a local Ray instance."]
    assert records[0]["logger"] == "ray._private.worker"


def test_text_logs_leave_ray_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    ray_logger = logging.getLogger("ray")
    saved = ray_logger.handlers[:], ray_logger.propagate
    calls: list[dict[str, Any]] = []
    try:
        monkeypatch.setitem(sys.modules, "ray", _stand_in(stream, calls))
        RayRuntime().connect()
    finally:
        ray_logger.handlers[:], ray_logger.propagate = saved
    assert calls == [{"address": "local", "namespace": "envwire"}]
    assert "(EnvActor pid=4242) an actor's print" in stream.getvalue()
