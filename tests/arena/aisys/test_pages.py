"""The pages of a migrated database: what the original kept is shown (rebuilt percepts, the
env's extra information, the order runs finished in), what it did not keep says so, and the
rating chart ends at the leaderboard's ratings. Checked as HTML, and in headless Chromium with
screenshots in the tests' artefacts."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from envwire.arena.aisys.database import read_database
from envwire.arena.aisys.migrate import migrate
from envwire.arena.aisys.plugins import PluginFolder
from envwire.arena.core import Arena
from envwire.arena.store import Store
from envwire.arena.web.routes import ArenaWeb
from envwire.protocols.http.http11 import Request
from envwire.runtime import make_worker
from tests.arena.aisys.original_db import OriginalDB
from tests.arena.web.test_pages import CHROMIUM, FLAGS, parse
from tests.observe.browser import artifacts

NOT_KEPT = "not kept by the original server"


@pytest.fixture
def pages(tmp_path: Path, folder: PluginFolder) -> dict[str, str]:
    """The HTML of a migrated arena's pages, by name."""
    db = OriginalDB(tmp_path / "aisysprojserver.db")
    db.env("cd", "countdown.env:Countdown", {"start": 5}, "Countdown (course)")
    for agent in ("alice", "bob"):
        db.account("cd", agent, "pw")
    # alice wins every run, bob loses every run; the runs finish out of id order
    win, lose = [(2, 1), (2, None)], [(1, 1), (2, 1)]
    won, lost = {"left": 0, "moves": 2}, {"left": 0, "moves": 2}
    for run_id in (2, 1, 3, 5, 4, 6):
        db.finish(run_id, "cd", "alice", won, win, outcome=1, window=3)
    for run_id in (8, 7, 9, 10):
        db.finish(run_id, "cd", "bob", lost, lose, outcome=0, window=3)
    db.run(11, "cd", "bob", {"left": 5, "moves": 0}, [(1, 2)], outcome=0, finished=True)  # bad
    db.close()
    store = Store(tmp_path / "arena.sqlite3")
    migrate(read_database(db.path), store, now=1_700_000_000.0)
    arena = Arena(store, worker_factory=make_worker)
    web = ArenaWeb(arena)
    try:
        paths = {"env": "/arena/env/cd", "agent": "/arena/agent/cd/alice",
                 "run": "/arena/run/cd/1", "unknown": "/arena/run/cd/11"}  # fmt: skip
        found = {}
        for name, path in paths.items():
            response = web.handle(Request("GET", path))
            assert response is not None and response.status == 200
            found[name] = response.body.decode()
        return found
    finally:
        arena.close()


def test_what_the_original_kept_and_what_it_did_not(pages: dict[str, str]) -> None:
    run = parse(pages["run"])
    assert run.tables["history"][0] == ["#", "percept", "action", "extra info", "reward",
                                        "messages"]  # fmt: skip
    # rebuilt by replaying the run through its plugin; the env's answer beside each action
    assert [row[1:4] for row in run.tables["history"][1:3]] == [
        ['{"left":5,"history":0}', "2", "1"], ['{"left":2,"history":1}', "2", ""],
    ]  # fmt: skip
    facts = {row[0]: row[1] for row in run.tables["run"][1:]}
    assert facts["started"] == f"{NOT_KEPT} (carried over on 2023-11-14 22:13:20 UTC)"
    assert facts["ended"] == NOT_KEPT
    unknown = parse(pages["unknown"])  # its history does not replay: no percepts
    assert [row[1] for row in unknown.tables["history"][1:]] == [NOT_KEPT, NOT_KEPT]
    env = parse(pages["env"])
    assert {row[-1] for row in env.tables["runs"][1:]} == {"not known (carried over)"}
    assert "finished runs of the env, in the order they finished" in pages["env"]


def _end_heights(svg: str) -> dict[str, float]:
    """The y of each series' last point, by the series' name."""
    found = re.findall(r'points="([^"]+)"><title>([^<]+)</title></polyline>', svg)
    return {name: float(points.split()[-1].split(",")[1]) for points, name in found}


def test_the_rating_chart_ends_at_the_leaderboard(pages: dict[str, str]) -> None:
    board = {row[1]: float(row[2]) for row in parse(pages["env"]).tables["leaderboard"][1:]}
    assert board == {"alice": 1.0, "bob": 0.0}
    ends = _end_heights(pages["env"])
    axis = dict(re.findall(r'y="([\d.]+)" font-size="11" fill="#666" text-anchor="end">([^<]+)<',
                           pages["env"]))  # fmt: skip
    by_value = {float(v): float(y) - 4 for y, v in axis.items()}  # tick label -> its line
    assert ends["alice"] == pytest.approx(by_value[1.0] - 0, abs=0.2)
    assert ends["bob"] == pytest.approx(by_value[0.0], abs=0.2)


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (apt-get install chromium)")
def test_migrated_pages_in_a_browser(pages: dict[str, str], tmp_path: Path) -> None:
    shots = artifacts(tmp_path / "screenshots")
    assert CHROMIUM is not None
    for name, html in pages.items():
        page = tmp_path / f"{name}.html"
        page.write_text(html)
        shot = shots / f"arena-migrated-{name}.png"
        subprocess.run(
            [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
             "--window-size=1100,1100", f"--screenshot={shot}", page.as_uri()],
            capture_output=True, timeout=90, check=True,
        )  # fmt: skip
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
