"""The arena as an ASGI app, served by uvicorn on a free port in a thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from envwire.arena.admin import ArenaAdmin
from envwire.arena.store import Store
from envwire.arena.web.asgi import create_app
from envwire.client import arena
from envwire.envs.nim import strong_move

uvicorn = pytest.importorskip("uvicorn", reason="uvicorn serves the ASGI app in this test")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    db = tmp_path / "arena.sqlite3"
    admin = ArenaAdmin(Store(db))
    admin.create_env("nim", "envwire/Nim-v0")
    config = admin.add_agent("nim", "alice")
    admin.store.close()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(db), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    url = f"http://127.0.0.1:{port}/"
    try:
        yield url, {**config, "url": url}
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_asgi_app(served: tuple[str, dict[str, str]]) -> None:
    url, config = served
    summary = arena.run(config, lambda p: strong_move(p) or 1, run_limit=5)
    assert set(summary.finished.values()) == {1}
    page = httpx.get(url + "arena/env/nim", timeout=30)
    assert page.status_code == 200 and "alice" in page.text
    assert httpx.get(url + "elsewhere", timeout=30).status_code == 404
    huge = httpx.put(url + "act/nim", content=b"x" * (3 << 20),
                        headers={"content-type": "application/json"}, timeout=30)  # fmt: skip
    assert huge.status_code == 413 and huge.json()["errorname"] == "Request Entity Too Large"
