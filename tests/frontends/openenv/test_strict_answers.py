"""``--openenv-compat strict`` answers byte for byte as openenv-core's own server does.

The same app (:mod:`tests.openenv_envs.faulty`, whose env raises on request) runs on
openenv-core's server (in this process, through Starlette's test client) and on ``envwire
serve`` in strict mode; every request below gets the same status, content type and body from
both. A default-mode server shows the differences envwire keeps on purpose.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.frontends.openenv.conftest import http_server
from tests.openenv_envs.faulty import app

ENV = "oe/Faulty-v0=tests.openenv_envs.faulty:app"
#: Seconds to wait for a server: the env's module imports openenv-core first.
START = 300.0
pytestmark = pytest.mark.timeout(START + 120)

#: curl's content type for ``-d``.
FORM = "application/x-www-form-urlencoded"

#: (path, content type, body) of each HTTP request; all are POSTs.
REQUESTS = [
    # The env's exceptions: Starlette's plain-text 500.
    ("/step", "application/json", b'{"action": {"message": "raise"}}'),
    ("/reset", "application/json", b'{"seed": 13}'),
    # JSON under another content type: FastAPI validates the body's text, which is no object.
    ("/step", FORM, b'{"action": {"message": "hi"}}'),
    ("/reset", FORM, b"a=b"),
    ("/reset", "text/plain", b"{}"),
    ("/step", "multipart/form-data; boundary=x", b"[1]"),
    ("/step", FORM, '{"action": {"message": "é\\u00e9</\\n"}}'.encode()),
    # Unchanged by this: a JSON body, an empty form body.
    ("/step", "application/json", b'{"action": {"message": "hi"}}'),
    ("/step", "application/vnd.api+json", b'{"action": {"message": "hi"}}'),
    ("/reset", FORM, b""),
    ("/step", FORM, b""),
]

#: Each WebSocket conversation: the frames sent, one reply awaited after each.
CONVERSATIONS = [
    ["[1, 2]", '{"type": "reset", "data": {}}'],
    ['"reset"'],
    ["7"],
    ["1.5"],
    ["true"],
    ["null"],
    [
        '{"type": "reset", "data": {}}',
        '{"type": "step", "data": {"message": "raise"}}',
        '{"type": "step", "data": {"message": "hi"}}',
    ],
    ['{"type": "reset", "data": {"seed": 13}}', '{"type": "reset", "data": {}}'],
]


@pytest.fixture(scope="module")
def core() -> Iterator[TestClient]:
    """openenv-core's own server, as an env's exception reaches it (no re-raising)."""
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("strict-answers")
    with http_server(tmp, (ENV,), ("--openenv-compat", "strict"), start_timeout=START) as proc:
        yield f"http://{proc.host}:{proc.ports['http']}"


@pytest.fixture(scope="module")
def default(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("default-answers")
    with http_server(tmp, (ENV,), start_timeout=START) as proc:
        yield f"http://{proc.host}:{proc.ports['http']}"


def _answer(response: httpx.Response) -> tuple[int, str, bytes]:
    return response.status_code, response.headers.get("content-type", ""), response.content


@pytest.mark.parametrize(("path", "content_type", "body"), REQUESTS)
def test_http_answers_are_openenv_cores(
    core: TestClient, strict: str, path: str, content_type: str, body: bytes
) -> None:
    headers = {"content-type": content_type}
    theirs = _answer(core.post(path, content=body, headers=headers))
    ours = _answer(httpx.post(strict + path, content=body, headers=headers, timeout=30))
    assert ours == theirs


def test_the_answers_compared_are_the_ones_meant(core: TestClient) -> None:
    """What openenv-core answers, so that a change of its own shows here first."""
    raised = core.post("/step", json={"action": {"message": "raise"}})
    assert (raised.status_code, raised.text) == (500, "Internal Server Error")
    form = core.post("/step", content=b'{"action": {}}', headers={"content-type": FORM})
    assert form.status_code == 422
    assert form.json()["detail"][0]["type"] == "model_attributes_type"


def _core_conversation(core: TestClient, frames: list[str]) -> list[str]:
    replies: list[str] = []
    with core.websocket_connect("/ws") as ws:
        for frame in frames:
            ws.send_text(frame)
            try:
                replies.append(ws.receive_text())
            except WebSocketDisconnect:
                replies.append("closed")
                break
    return replies


def _our_conversation(base: str, frames: list[str]) -> list[str]:
    replies: list[str] = []
    with connect(base.replace("http://", "ws://") + "/ws", proxy=None) as ws:
        for frame in frames:
            try:
                ws.send(frame)
                reply = ws.recv(timeout=30)
            except ConnectionClosed:
                replies.append("closed")
                break
            assert isinstance(reply, str)
            replies.append(reply)
    return replies


@pytest.mark.parametrize("frames", CONVERSATIONS)
def test_websocket_answers_are_openenv_cores(
    core: TestClient, strict: str, frames: list[str]
) -> None:
    assert _our_conversation(strict, frames) == _core_conversation(core, frames)


def test_the_websocket_answers_compared_are_the_ones_meant(core: TestClient) -> None:
    ending, closed = _core_conversation(core, CONVERSATIONS[0])
    assert json.loads(ending)["data"] == {
        "message": "'list' object has no attribute 'get'",
        "code": "SESSION_ERROR",
    }
    assert closed == "closed"
    _, raised, went_on = _core_conversation(core, CONVERSATIONS[6])
    assert json.loads(raised)["data"]["message"] == "asked to raise: 'raise'"
    assert json.loads(went_on)["type"] == "observation"


# --- default mode keeps its differences -----------------------------------------------------


def test_default_mode_names_the_env_and_refuses_forms(default: str) -> None:
    raised = httpx.post(f"{default}/reset", json={"seed": 13}, timeout=30)
    assert raised.status_code == 500
    assert raised.json() == {
        "detail": "oe/Faulty-v0: reset raised ValueError: seed 13 is unlucky",
        "code": "env_error",
        "openenv_code": "EXECUTION_ERROR",
    }
    form = httpx.post(f"{default}/reset", content=b"{}", headers={"content-type": FORM})
    assert form.status_code == 415
    assert "Content-Type: application/json" in form.json()["detail"]
    replies = _our_conversation(default, [*CONVERSATIONS[0], CONVERSATIONS[6][1]])
    not_object, reset, raised_ws = (json.loads(reply)["data"] for reply in replies)
    assert not_object["code"] == "VALIDATION_ERROR"  # and the session went on
    assert not_object["message"] == "a message must be a JSON object, got list"
    assert "observation" in reset
    assert raised_ws["message"] == "oe/Faulty-v0: step raised ValueError: asked to raise: 'raise'"


def test_strict_mode_still_refuses_forms_on_mcp(strict: str) -> None:
    """openenv-core's /mcp reads any body as JSON, so a cross-site form could call tools:
    envwire refuses it in both modes."""
    rpc = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'
    refused = httpx.post(f"{strict}/mcp", content=rpc, headers={"content-type": FORM})
    assert refused.status_code == 415
    listed = httpx.post(f"{strict}/mcp", content=rpc, headers={"content-type": "application/json"})
    assert listed.status_code == 200


# --- a session refused at capacity ----------------------------------------------------------


def _core_refusal(core: TestClient, held: int) -> tuple[str, int | None]:
    with ExitStack() as stack:
        for _ in range(held):
            stack.enter_context(core.websocket_connect("/ws"))
        with core.websocket_connect("/ws") as ws:
            said = ws.receive_text()
            with pytest.raises(WebSocketDisconnect) as closed:
                ws.receive_text()
    return said, closed.value.code


def _our_refusal(base: str, held: int) -> tuple[str, int | None, str]:
    url = base.replace("http://", "ws://") + "/ws"
    with ExitStack() as stack:
        for _ in range(held):
            opened = stack.enter_context(connect(url, proxy=None))
            opened.send('{"type": "state"}')  # the session is open once it answers
            opened.recv(timeout=30)
        with connect(url, proxy=None) as ws:
            said = ws.recv(timeout=30)
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=30)
    assert isinstance(said, str) and closed.value.rcvd is not None
    return said, closed.value.rcvd.code, closed.value.rcvd.reason


def test_a_session_refused_at_capacity_closes_as_openenv_cores(
    core: TestClient, strict: str
) -> None:
    said, code = _core_refusal(core, 8)  # the app allows 8 sessions at once
    assert json.loads(said)["data"]["code"] == "CAPACITY_REACHED" and code == 1000
    assert _our_refusal(strict, 8) == (said, code, "")


def test_default_mode_refuses_at_capacity_naming_the_env(default: str) -> None:
    said, code, reason = _our_refusal(default, 8)
    assert json.loads(said)["data"]["message"].startswith(
        "Server at capacity: 8/8 sessions of oe/Faulty-v0 active."
    )
    assert (code, reason) == (1013, "EnvCapacityError")
