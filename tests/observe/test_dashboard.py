"""``/dashboard`` and its JSON, in a real headless Chromium and over plain HTTP."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import envwire
from envwire.app import Server
from envwire.registry import Catalog, EnvSpec, parse_env_arg
from envwire.settings import Settings
from tests.observe.browser import CHROMIUM, Browser, artifacts
from tests.observe.conftest import play_episode, url

CATCH = "test/CatchFrames-v0"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """HTTP and gym-socket, recording episodes with frames."""
    catalog = Catalog([
        parse_env_arg("CartPole-v1"),
        EnvSpec(CATCH, "envwire.envs.catch:CatchEnv", kwargs={"render_mode": "rgb_array"}),
    ])  # fmt: skip
    record = {"record": str(tmp_path / "datasets"), "record_frames": True}
    running = Server(catalog, Settings.of(gym_socket=0, http=0, grpc=None, **record))
    running.start()
    try:
        yield running
    finally:
        running.shutdown()


def _catch_episode(server: Server) -> int:
    """Play one recorded Catch episode to its end; its length."""
    steps = len(play_episode(url(server, "gym-socket", CATCH), lambda t, env: t % 3))
    assert server.observe.recorder is not None
    assert server.observe.recorder.writer.flush(30)
    return steps


def test_the_json_behind_the_page(server: Server) -> None:
    steps = _catch_episode(server)
    env = envwire.make(url(server, "gym-socket", "CartPole-v1"))
    try:
        env.reset(seed=0)
        env.step(0)
        live = httpx.get(url(server, "http", "dashboard/api/live"), timeout=30).json()
        (row,) = live["sessions"]
        assert row["env"] == "CartPole-v1" and row["front_end"] == "gym-socket"
        assert row["steps"] == 1 and row["peer"].startswith("127.0.0.1:")
    finally:
        env.close()
    listing = httpx.get(url(server, "http", "dashboard/api/episodes"), timeout=30).json()
    assert listing["episodes"] == {CATCH: [{"id": 0, "steps": steps}]}
    replay = httpx.get(url(server, "http", f"dashboard/api/episode/{CATCH}/0"), timeout=30)
    episode = replay.json()
    assert episode["steps"] == steps and len(episode["rewards"]) == steps
    assert len(episode["frames"]) == steps + 1
    assert episode["frames"][0].startswith("data:image/png;base64,")
    missing = httpx.get(url(server, "http", f"dashboard/api/episode/{CATCH}/9"), timeout=30)
    assert missing.status_code == 404
    climbing = httpx.get(url(server, "http", "dashboard/api/episode/../../etc/0"), timeout=30)
    assert climbing.status_code == 404
    page = httpx.get(url(server, "http", "dashboard"), timeout=30)
    assert page.headers["content-type"].startswith("text/html")
    assert "http://" not in page.text and "https://" not in page.text  # nothing from a CDN
    posted = httpx.post(url(server, "http", "metrics"), timeout=30)
    assert posted.status_code == 405


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)")
def test_the_dashboard_in_a_real_browser(server: Server, tmp_path: Path) -> None:
    shots = artifacts(tmp_path / "screenshots")
    steps = _catch_episode(server)
    env = envwire.make(url(server, "gym-socket", "CartPole-v1"))
    stop = threading.Event()

    def keep_stepping() -> None:
        env.reset(seed=0)
        while not stop.is_set():
            _, _, terminated, truncated, _ = env.step(int(time.time() * 10) % 2)
            if terminated or truncated:
                env.reset()
            time.sleep(0.005)

    stepper = threading.Thread(target=keep_stepping, daemon=True)
    stepper.start()
    browser = Browser(tmp_path / "profile")
    try:
        browser.go(url(server, "http", "dashboard"))
        sessions = browser.wait(
            "document.querySelector('#sessions tbody').innerText.includes('CartPole-v1')"
            " && document.querySelector('#sessions tbody').innerText"
        )
        assert "gym-socket" in sessions and "127.0.0.1:" in sessions
        first = browser.wait("Number(document.getElementById('chart').dataset.samples || 0)")
        browser.wait(f"Number(document.getElementById('chart').dataset.samples) > {first}")
        assert browser.js("document.querySelectorAll('#chart polyline.series').length") >= 1
        assert browser.js("document.getElementById('legend').innerText").count("CartPole") == 1
        # a time axis: clock times under the chart, in order
        ticks = browser.js(
            "[...document.querySelectorAll('#chart text.tick')].map((t) => t.textContent)"
        )
        times = [t for t in ticks if t.count(":") == 2]
        assert times and times == sorted(times), ticks
        assert "recording is off" not in browser.js("document.getElementById('episodes').innerText")
        browser.screenshot(shots / "dashboard-live.png")
        link = f"document.querySelector('a.episode[data-dataset=\"{CATCH}\"]')"
        browser.wait(link + " !== null")
        browser.js(link + ".click()")
        browser.wait("document.getElementById('replay').dataset.done === '1'")
        assert browser.js("document.getElementById('stepno').innerText") == str(steps)
        assert browser.js("document.getElementById('frame').src").startswith("data:image/png")
        assert browser.js("document.getElementById('frame').naturalWidth") > 0  # not broken
        assert browser.js("document.querySelectorAll('#steps tbody tr').length") == steps
        assert browser.js("document.querySelectorAll('#curve polyline.series').length") == 1
        data = browser.screenshot(shots / "dashboard-replay.png")
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    finally:
        browser.close()
        stop.set()
        stepper.join(10)
        env.close()


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)")
def test_the_dashboard_of_a_quiet_server(tmp_path: Path) -> None:
    """No sessions, no errors, recording off: every part says so, and no empty replay or
    broken image shows."""
    shots = artifacts(tmp_path / "screenshots")
    catalog = Catalog([parse_env_arg("CartPole-v1")])
    running = Server(catalog, Settings.of(gym_socket=0, http=0, grpc=None))
    running.start()
    browser = Browser(tmp_path / "profile")
    try:
        browser.go(url(running, "http", "dashboard"))
        browser.wait("document.getElementById('status').innerText.startsWith('updated')")
        for table, text in [("sessions", "no open sessions"), ("errors", "no errors yet"),
                            ("crashes", "no env crashes yet")]:  # fmt: skip
            rows = browser.js(
                f"[...document.querySelectorAll('#{table} tbody tr')].map((r) => r.innerText)"
            )
            assert rows == [text], (table, rows)
        assert browser.js("document.getElementById('episodes').innerText") == "recording is off"
        shown = "(id) => getComputedStyle(document.getElementById(id)).display !== 'none'"
        assert browser.js(f"({shown})('replay')") is False
        assert browser.js(f"({shown})('frame')") is False
        # images on the page that are shown but did not load (a broken image)
        broken = browser.js(
            "[...document.images].filter((i) => i.offsetParent !== null && "
            "!(i.complete && i.naturalWidth > 0)).length"
        )
        assert broken == 0
        browser.wait("document.querySelectorAll('#chart text.tick').length >= 2")
        data = browser.screenshot(shots / "dashboard-quiet.png")
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        browser.close()
        running.shutdown()


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)")
def test_closed_sessions_five_minutes_and_one_clock(server: Server, tmp_path: Path) -> None:
    """After its sessions closed the page says none is open (not "yet"); the chart spans the
    five minutes its title names, from its first samples on, and draws each sample as a level
    (no slope between two samples); every time on the page reads the same way, 24-hour."""
    shots = artifacts(tmp_path / "screenshots")
    env = envwire.make(url(server, "gym-socket", "CartPole-v1"))
    env.reset(seed=0)
    for _ in range(5):
        env.step(0)
    with pytest.raises(envwire.EnvwireError):
        env.step(7)  # an error, listed with its time
    env.close()
    browser = Browser(tmp_path / "profile")
    try:
        browser.go(url(server, "http", "dashboard"))
        browser.wait("Number(document.getElementById('chart').dataset.samples) >= 2")
        rows = browser.js("[...document.querySelectorAll('#sessions tbody tr')]"
                          ".map((r) => r.innerText)")  # fmt: skip
        assert rows == ["no open sessions"]
        ticks = browser.js(
            "[...document.querySelectorAll('#chart text.tick')].map((t) => t.textContent)"
        )
        times = [t for t in ticks if t.count(":") == 2]
        minutes = [int(t[:2]) * 60 + int(t[3:5]) for t in times]
        span = (minutes[-1] - minutes[0]) % (24 * 60)
        assert len(times) >= 4 and span >= 3, ticks  # 5 minutes: a tick each minute
        for polyline in browser.js(
            "[...document.querySelectorAll('#chart polyline.series')]"
            ".map((p) => p.getAttribute('points'))"
        ):
            ys = [point.split(",")[1] for point in polyline.split()]
            assert ys[0::2] == ys[1::2], polyline  # levels: each sample's two ends alike
        assert browser.js("document.querySelector('#chart text.y-label').textContent") == (
            "steps/s"
        )
        status = browser.js("document.getElementById('status').innerText")
        error_time = browser.js("document.querySelector('#errors tbody td').innerText")
        clock = re.compile(r"\d\d:\d\d:\d\d")
        assert clock.search(status) and clock.fullmatch(error_time), (status, error_time)
        assert not re.search(r"[AP]M", status + error_time)
        browser.screenshot(shots / "dashboard-closed.png")
    finally:
        browser.close()
