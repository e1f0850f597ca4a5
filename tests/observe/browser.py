"""A headless Chromium (Debian's ``chromium``) driven over the DevTools protocol, for the
dashboard's tests: navigate, evaluate JavaScript, wait for a condition, take screenshots."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_LISTENING = re.compile(r"DevTools listening on (ws://[^\s]+)")


def artifacts(default: Path) -> Path:
    """Where screenshots go: ``$ENVWIRE_TEST_ARTIFACTS`` when set (CI keeps it), else
    ``default``."""
    where = Path(os.environ.get("ENVWIRE_TEST_ARTIFACTS") or default)
    where.mkdir(parents=True, exist_ok=True)
    return where


class Browser:
    """One headless Chromium with one page."""

    def __init__(self, profile: Path, width: int = 1200, height: int = 1000) -> None:
        assert CHROMIUM is not None
        self.process = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--window-size={width},{height}", f"--user-data-dir={profile}",
             "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.process.stderr is not None
        deadline = time.monotonic() + 60
        port = None
        while port is None and time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line and self.process.poll() is not None:
                raise RuntimeError("chromium exited before listening")
            found = _LISTENING.search(line)
            if found:
                port = found.group(1).split(":")[2].split("/")[0]
        assert port is not None, "chromium did not open its DevTools port"
        pages = httpx.get(f"http://127.0.0.1:{port}/json/list", timeout=30).json()
        page = next(p for p in pages if p["type"] == "page")
        self._stack = contextlib.ExitStack()
        self.ws = self._stack.enter_context(
            connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        )
        self._ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools command; its result (events in between are skipped)."""
        ident = next(self._ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))

    def go(self, url: str) -> None:
        """Load ``url``."""
        self.call("Page.enable")
        self.call("Page.navigate", url=url)

    def js(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                           awaitPromise=True)  # fmt: skip
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait(self, expression: str, timeout: float = 30.0) -> Any:
        """Poll ``expression`` until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.js(expression)
            except RuntimeError:
                value = None
            if value:
                return value
            assert time.monotonic() < deadline, f"timed out waiting for {expression}"
            time.sleep(0.2)

    def screenshot(self, path: Path) -> bytes:
        """Save a PNG of the page."""
        data = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        path.write_bytes(data)
        return data

    def close(self) -> None:
        """Close the connection and the browser."""
        self._stack.close()
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        if self.process.stderr is not None:
            self.process.stderr.close()
