"""The AISysProj server's routes on a live envwire: each request as that server's AdminClient
and pages send it (its paths, methods, bodies and password forms), and the answers it reads.

The plugin env is the test's own (``tests/arena/aisys/plugin_env.py``), uploaded as the
AdminClient uploads plugins.
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from envwire.arena.admin import ArenaAdmin
from envwire.arena.store import Store
from envwire.arena.web.aisys import ErrorLog
from envwire.testing import ServerProcess
from tests.arena.aisys.plugin_env import zipped_plugin
from tests.arena.web.conftest import ArenaServer, put, start_server

PASSWORD = "the-course-admin-password"


@dataclass
class Course:
    """A live server with plugins, and the admin password the course's AdminClient uses."""

    process: ServerProcess
    db: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.process.ports['http']}/"

    def send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """As ``AdminClient.send_request``: ``base_url + path``."""
        return httpx.request(method, self.url + path, timeout=30, **kwargs)

    def admin(self, method: str, path: str, **body: Any) -> httpx.Response:
        """An admin request with the password in the JSON body, as the AdminClient sends it."""
        return self.send(method, path, json={**body, "admin-pwd": PASSWORD})


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Course]:
    root = tmp_path_factory.mktemp("course")
    db = root / "course.sqlite3"
    store = Store(db)
    ArenaAdmin(store).add_admin_password(PASSWORD)
    store.close()
    plugins = root / "plugins"
    process = start_server(db, "--arena-plugins", str(plugins), "--arena-plugin-upload")
    try:
        yield Course(process, db)
    finally:
        process.stop()


def error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["errorcode"] == status and set(body) == {"errorcode", "errorname", "description"}
    return str(body["description"])


def act(course: Course, config: dict[str, str], **body: Any) -> dict[str, Any]:
    request = {"agent": config["agent"], "pwd": config["pwd"], "protocol_version": 1, **body}
    response = put(f"{course.url}/act/{config['env']}", request)
    assert response.status_code == 200, response.text
    reply: dict[str, Any] = response.json()
    return reply


def make_env(course: Course, name: str = "cd", overwrite: bool = False) -> httpx.Response:
    return course.admin("PUT", f"makeenv/{name}", env_class="countdown.env:Countdown",
                        display_name="Countdown", config={"start": 4}, display_group="",
                        overwrite=overwrite)  # fmt: skip


def test_admin_client_requests(course: Course) -> None:
    # AdminClient.upload_plugin: a zip body, the password as Basic credentials
    basic = base64.encodebytes(PASSWORD.encode()).decode().replace("\n", "")
    response = course.send("PUT", "/uploadplugin", content=zipped_plugin(),
                           headers={"Authorization": f"Basic {basic}"})  # fmt: skip
    assert response.status_code == 200 and response.json() == {"status": "success"}
    # make_env, twice
    assert make_env(course).json() == {"success": True}
    assert "already exists" in error(make_env(course), 400)
    assert make_env(course, overwrite=True).json() == {"success": True}
    # new_user, twice (the original's own test_overwrite)
    created = course.admin("POST", "makeagent/cd/alice", overwrite=False)
    assert created.status_code == 200
    config = created.json()
    assert set(config) == {"agent", "pwd", "env"} and config["env"] == "cd"
    assert "already exists" in error(course.admin("POST", "makeagent/cd/alice"), 400)
    assert "No such environment" in error(course.admin("POST", "makeagent/nope/x"), 400)
    assert "Illegal agent name" in error(course.admin("POST", "makeagent/cd/!!"), 400)
    team = course.admin("POST", "makeagent/cd/team [3]").json()
    # the agent plays the plugin env
    reply = act(course, config)
    assert len(reply["action_requests"]) == 2
    assert reply["action_requests"][0]["percept"] == {"left": 4, "history": 0}
    # an env of the catalog, with arena settings as its config
    response = course.admin("PUT", "makeenv/nim", env_class="envwire/Nim-v0",
                            display_name="Nim", config={"rating_runs": 3})  # fmt: skip
    assert response.json() == {"success": True}
    unknown = course.admin("PUT", "makeenv/x", env_class="countdown.env:Nope",
                           display_name="x", config={})  # fmt: skip
    assert "countdown.env:Nope" in error(unknown, 400)
    assert "config: missing" in error(
        course.admin("PUT", "makeenv/x", env_class="envwire/Nim-v0", display_name="x"), 400
    )
    # passwords: none, wrong, Bearer, a Basic user:password pair
    assert "required" in error(course.send("GET", "getenvs"), 401)
    assert "wrong admin password" in error(
        course.send("GET", "getenvs", json={"admin-pwd": "wrong"}), 401
    )
    bearer = course.send("GET", "getenvs", headers={"Authorization": f"Bearer {PASSWORD}"})
    assert bearer.status_code == 200
    pair = base64.b64encode(f"admin:{PASSWORD}".encode()).decode()
    assert course.send("GET", "getenvs", headers={"Authorization": f"Basic {pair}"}).is_success
    # blocking: the agent's own password will do; unblocking takes the admin's
    blocked = course.send("PUT", "blockagent/cd/team [3]", json={"pwd": team["pwd"]})
    assert blocked.json() == {"success": True}
    assert error(put(f"{course.url}act/cd", {"agent": "team [3]", "pwd": team["pwd"]}), 401)
    assert error(course.send("PUT", "unblockagent/cd/team [3]", json={"pwd": team["pwd"]}), 401)
    assert course.admin("PUT", "unblockagent/cd/team [3]").json() == {"success": True}
    assert act(course, team)["action_requests"]


def test_groups_and_pages(course: Course) -> None:
    if not course.admin("GET", "getenvs").json():
        test_admin_client_requests(course)
    make = course.admin("PUT", "groupmanagement/make/ss25", title="Summer 2025",
                        description="<i>welcome</i>")  # fmt: skip
    assert make.json() == {"success": True}
    assert "exists" in error(
        course.admin("PUT", "groupmanagement/make/ss25", title="x", description=""), 400
    )
    assert course.admin("PUT", "groupmanagement/addenv/ss25/cd").json() == {"success": True}
    assert course.admin("PUT", "groupmanagement/addsubgroup/main/ss25").is_success
    assert "no group 'nope'" in error(course.admin("PUT", "groupmanagement/addenv/nope/cd"), 400)
    assert course.admin("GET", "getenvs").json() == {"cd": ["Summer 2025"], "nim": []}
    page = httpx.get(course.url + "group/ss25", timeout=30)
    assert page.status_code == 200 and "Summer 2025" in page.text
    assert "&lt;i&gt;welcome&lt;/i&gt;" in page.text  # shown as text
    assert "/arena/env/cd" in page.text
    assert "ss25" in httpx.get(course.url + "group/main", timeout=30).text
    assert httpx.get(course.url + "group/nope", timeout=30).status_code == 404
    assert course.admin("DELETE", "groupmanagement/delete/ss25").json() == {"success": True}
    assert course.admin("GET", "getenvs").json() == {"cd": [], "nim": []}


def test_results_and_public_pages(course: Course) -> None:
    created = course.admin("POST", "makeagent/cd/bob", overwrite=True)
    if created.status_code == 400:  # the env comes from the first test
        test_admin_client_requests(course)
        created = course.admin("POST", "makeagent/cd/bob", overwrite=True)
    bob = created.json()
    finished: dict[str, Any] = {}
    reply = act(course, bob)
    while len(finished) < 3:  # rating_runs of the plugin: 3
        actions = [{"run": r["run"], "act_no": r["act_no"], "action": 2}
                   for r in reply["action_requests"]]  # fmt: skip
        reply = act(course, bob, actions=actions)
        finished.update(reply["finished_runs"])
    results = httpx.get(course.url + "results/cd", timeout=30).json()
    outcomes = list(finished.values())[-3:]
    assert results["bob"] == {"rating": sum(outcomes) / 3, "fully-evaluated": True,
                              "total-runs": len(finished)}  # fmt: skip
    everything = httpx.get(course.url + "results", timeout=30).json()
    assert everything["cd"]["bob"] == results["bob"] and "nim" in everything
    assert "no arena env 'nope'" in error(httpx.get(course.url + "results/nope", timeout=30),
                                          404)  # fmt: skip
    for path in ("env/cd", "agent/cd/bob", f"run/cd/{next(iter(finished))}"):
        # /run/... redirects to the arena's run page, as a browser follows it
        page = httpx.get(course.url + path, timeout=30, follow_redirects=True)
        assert page.status_code == 200 and "bob" in page.text, path
    assert httpx.get(course.url + "agent/cd/nobody", timeout=30).status_code == 404


def test_housekeeping(course: Course) -> None:
    assert isinstance(course.admin("GET", "errors").json(), list)
    usage = course.admin("GET", "diskusage").json()
    assert "course.sqlite3" in usage and "plugins" in usage
    assert course.admin("GET", "removenonrecentruns", **{"just-vacuum": True}).json() == {
        "result": "done"
    }
    assert course.admin("GET", "removenonrecentruns").json() == {"result": "done"}
    course.admin("PUT", "makeenv/empty", env_class="envwire/Nim-v0", display_name="e", config={})
    course.admin("POST", "makeagent/empty/idle")
    assert course.admin("GET", "deleteunusedagents/empty").json() == {"result": "done"}
    assert "unknown agent" in error(put(f"{course.url}act/empty", {"agent": "idle", "pwd": "x"}),
                                    401)  # fmt: skip
    assert "No such environment" in error(course.admin("GET", "deleteunusedagents/nope"), 400)


def test_a_plugin_that_raises_is_in_errors(course: Course) -> None:
    created = course.admin("POST", "makeagent/cd/carol", overwrite=True)
    if created.status_code != 200:
        test_admin_client_requests(course)
        created = course.admin("POST", "makeagent/cd/carol", overwrite=True)
    carol = created.json()
    run = act(course, carol)["action_requests"][0]
    reply = act(course, carol, actions=[{"run": run["run"], "act_no": 0, "action": "explode"}])
    assert any("RuntimeError: boom" in m["content"] for m in reply["messages"])
    errors = course.admin("GET", "errors").json()
    assert any("RuntimeError: boom" in e and "Traceback" in e for e in errors)


def test_uploads_are_off_by_default(arena_server: ArenaServer) -> None:
    auth = {"Authorization": f"Bearer {arena_server.admin_token}"}
    response = httpx.put(
        arena_server.url + "uploadplugin", content=zipped_plugin(), timeout=30, headers=auth
    )
    assert "--arena-plugin-upload" in error(response, 403)


def _raw(port: int, head: bytes, body: bytes = b"") -> tuple[bytes, float]:
    """Send a request head (and body) on a raw socket; the whole answer and how long it took."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head + body)
        data = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return data, time.monotonic() - started


def test_oversized_bodies_are_refused_before_they_are_read(arena_server: ArenaServer) -> None:
    port = arena_server.process.ports["http"]
    declared = (b"PUT /act/nim HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 200000000\r\n\r\n")  # fmt: skip
    answer, took = _raw(port, declared)  # nothing of the body is sent
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413") and took < 5
    refused = json.loads(body)
    assert refused["errorcode"] == 413 and "200000000 bytes" in refused["description"]
    for path in (b"/makeenv/x", b"//act/nim", b"/uploadplugin"):
        answer, _ = _raw(port, declared.replace(b"/act/nim", path))
        assert json.loads(answer.partition(b"\r\n\r\n")[2])["errorcode"] == 413, path
    chunked = (b"PUT /act/nim HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n" + b"%x\r\n" % (2 << 20))  # fmt: skip
    answer, took = _raw(port, chunked)  # a chunk over the limit: refused before it arrives
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["errorcode"] == 413 and took < 5
    # other routes keep the front end's own limit and format
    answer, _ = _raw(port, declared.replace(b"/act/nim", b"/step"))
    assert answer.startswith(b"HTTP/1.1") and b"errorcode" not in answer


def test_lax_fields_over_http(arena_server: ArenaServer) -> None:
    config = arena_server.config("bob")
    url = arena_server.act_url("nim")
    first = put(url, {"protocol_version": True, "agent": "bob", "pwd": config["pwd"],
                      "parallel_runs": "false"}).json()  # fmt: skip
    (request,) = first["action_requests"]
    reply = put(url, {"protocol_version": 1.0, "agent": "bob", "pwd": config["pwd"],
                      "parallel_runs": "0", "actions": [{"run": request["run"],
                      "act_no": str(request["act_no"]), "action": 1}]}).json()  # fmt: skip
    assert not [m for m in reply["messages"] if m["type"] == "error"]
    assert error(put(url, {"agent": "bob", "pwd": config["pwd"], "single_request": "maybe"}), 400)


def test_add_agent_writes_the_served_url(arena_server: ArenaServer) -> None:
    store = Store(arena_server.db)
    try:
        config = ArenaAdmin(store).add_agent("nim", "late", replace=True)
    finally:
        store.close()
    assert config["url"] == arena_server.url


def test_the_error_log_is_bounded() -> None:
    errors = ErrorLog(capacity=3, max_chars=40)
    logger = logging.getLogger("envwire.tests.errorlog")
    logger.propagate = False
    logger.addHandler(errors)
    try:
        logger.warning("not an error")  # below ERROR: not kept
        for number in range(5):
            try:
                raise ValueError("x" * 100)
            except ValueError:
                logger.exception("error %d", number)
    finally:
        logger.removeHandler(errors)
    entries = errors.entries()
    assert [entry[:7] for entry in entries] == ["error 2", "error 3", "error 4"]
    assert all(len(entry) == 40 and "Traceback" in entry for entry in entries)
