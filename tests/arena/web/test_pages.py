"""The arena's web pages, loaded by a real headless browser (Debian's ``chromium``)."""

from __future__ import annotations

import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest

from envwire.arena.admin import ArenaAdmin
from envwire.arena.store import Store
from envwire.client import arena
from envwire.envs.nim import strong_move
from tests.arena.web.conftest import ArenaServer, put
from tests.observe.browser import artifacts

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH: install Debian's browser (apt-get install -y chromium) to "
    "check the arena's pages in a real browser",
)
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def browse(url: str, profile: Path, *extra: str) -> str:
    """The DOM chromium built for ``url`` (after loading it)."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *extra, "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    )
    return done.stdout


class Tables(HTMLParser):
    """The text of every table cell, by table id; and every script element."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.scripts = 0
        self.title = ""
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._in_title = False
        #: Inline SVG charts by id: how many of each drawn element they hold.
        self.svgs: dict[str, dict[str, int]] = {}
        self._svg: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._table = dict(attrs).get("id") or ""
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "script":
            self.scripts += 1
        elif tag == "svg":
            self._svg = dict(attrs).get("id") or ""
            self.svgs[self._svg] = {}
        elif self._svg is not None:
            shapes = self.svgs[self._svg]
            shapes[tag] = shapes.get(tag, 0) + 1
        elif tag == "title":
            self._in_title = True

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag == "svg":
            self._svg = None
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._in_title:
            self.title += data


def parse(dom: str) -> Tables:
    tables = Tables()
    tables.feed(dom)
    return tables


@pytest.fixture(scope="module")
def played(arena_server: ArenaServer) -> dict[str, str]:
    """Alice plays perfectly, bob badly; the nim env gets a hostile description."""
    arena.run(arena_server.config("alice"), lambda p: strong_move(p) or 1, run_limit=6)
    bob = arena.run(arena_server.config("bob"), lambda p: 1, run_limit=5)
    admin = ArenaAdmin(Store(arena_server.db))
    admin.create_env(
        "nim",
        "envwire/Nim-v0",
        {"rating_runs": 4},
        display_name="Nim <b>bold</b>",
        description="<script>document.title='pwned'</script> take the last object",
        replace=True,
    )
    admin.store.close()
    alice = arena_server.config("alice")
    reply = put(arena_server.act_url("nim"),
                {"protocol_version": 1, "agent": "alice", "pwd": alice["pwd"]}).json()  # fmt: skip
    request = reply["action_requests"][0]
    put(arena_server.act_url("nim"), {"protocol_version": 1, "agent": "alice", "pwd": alice["pwd"],
        "actions": [{**request, "action": 9}]})  # fmt: skip
    return {"active": request["run"], "unplayed": ",".join(bob.unplayed)}


def test_pages_in_a_browser(
    arena_server: ArenaServer, played: dict[str, str], tmp_path: Path
) -> None:
    base = arena_server.url + "arena/"
    finished = arena_server.api("arena/api/results/nim")
    assert finished
    alice_runs = httpx.get(base + "agent/nim/alice", timeout=30)
    assert alice_runs.status_code == 200
    urls = {
        "index": base,
        "env": base + "env/nim",
        "agent": base + "agent/nim/alice",
        "bob": base + "agent/nim/bob",
        "active": base + f"run/nim/{played['active']}",
        "missing": base + "run/nim/999999",
        "redirect": arena_server.url + f"run/nim/{played['active']}",
    }
    with ThreadPoolExecutor(len(urls)) as pool:
        futures = {k: pool.submit(browse, u, tmp_path / k) for k, u in urls.items()}
        raw = {k: f.result() for k, f in futures.items()}
    doms = {k: parse(dom) for k, dom in raw.items()}

    index = doms["index"].tables["envs"]
    assert index[0] == ["arena env", "name", "catalog id", "agents", "runs", "finished"]
    names = {row[1]: row for row in index[1:]}
    assert names["nim"][0] == "Nim <b>bold</b>"  # shown as text, not markup
    assert names["nim-random"][0] == "Nim against a random opponent"

    env = doms["env"]
    assert env.scripts == 0 and env.title == "Nim <b>bold</b>"  # the description stayed text
    board = env.tables["leaderboard"]
    assert board[0][:3] == ["rank", "agent", "rating"]
    ranks = {row[1]: row for row in board[1:]}
    assert ranks["alice"][0] == "1" and ranks["alice"][2] == "1.000"
    assert ranks["alice"][4] == "yes"
    assert ranks["bob"][2] == "0.000" and ranks["bob"][4] == "yes"
    assert ranks["blocked"][6] == "blocked" and ranks["blocked"][4] == "no (0/4)"
    assert len(env.tables["runs"]) > 10
    ratings = env.svgs["ratings"]  # alice's and bob's ratings over time: a line, or a dot
    assert ratings.get("polyline", 0) + ratings.get("circle", 0) == 2  # for runs of one moment
    assert 'transform="rotate(-90 12 104)">rating</text>' in raw["env"]  # the y-axis's label

    agent = doms["agent"]
    facts = {row[0]: row[1] for row in agent.tables["agent"]}
    assert next(iter(facts)) == "arena env"  # no empty header row above the facts
    assert facts["rating"] == "1.000" and int(facts["finished runs"]) >= 6
    statuses = [row[1] for row in agent.tables["runs"][1:]]
    # and the run whose first action was refused waits for it
    assert statuses.count("finished") == int(facts["finished runs"]) and (
        "waiting for its first action" in statuses
    )
    assert agent.svgs["rating"].get("polyline") == 1  # her rating over her runs
    assert agent.svgs["outcomes"].get("rect", 0) >= 1  # the outcomes of her recent runs

    for key in ("active", "redirect"):
        run = doms[key]
        history = run.tables["history"]
        assert history[0] == ["#", "percept", "action", "reward", "messages"]
        assert history[1][1] == "10"  # the first percept
        assert "waiting for action" in history[-1][2]
        messages = " ".join(row[4] for row in history[1:])
        assert "action 9 rejected" in messages
        facts = {row[0]: row[1] for row in run.tables["run"]}
        assert next(iter(facts)) == "arena env" and facts["agent"] == "alice"  # no header
        assert facts["status"] == "waiting for its first action"
        timeline = run.svgs["timeline"]  # a bar per accepted action, a dot per message
        assert timeline.get("rect", 0) == len(history) - 2 and timeline.get("circle", 0) >= 1

    assert doms["missing"].title == "404 Not Found"
    _unplayed_runs_wait(doms["bob"], played["unplayed"])


def _unplayed_runs_wait(bob: Tables, unplayed_runs: str) -> None:
    """Bob stopped at his run limit: the runs the server started for his last reply are shown
    as waiting for him, none as active with no action."""
    unplayed = unplayed_runs.split(",") if unplayed_runs else []
    runs = {row[0]: row for row in bob.tables["runs"][1:]}
    assert unplayed and all(runs[r][1:3] == ["waiting for its first action", "0"] for r in unplayed)
    assert not [row for row in runs.values() if row[1:3] == ["active", "0"]]


@pytest.mark.parametrize(
    ("name", "path"),
    [("leaderboard", "env/nim"), ("agent", "agent/nim/alice"), ("run", "run/nim/{active}")],
)
def test_screenshots_render(
    arena_server: ArenaServer, played: dict[str, str], tmp_path: Path, name: str, path: str
) -> None:
    assert CHROMIUM is not None
    shot = artifacts(tmp_path) / f"arena-{name}.png"
    page = arena_server.url + "arena/" + path.format(active=played["active"])
    subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,1400",
         f"--screenshot={shot}", page],
        capture_output=True, timeout=90, check=True,
    )  # fmt: skip
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
