"""The WebSocket session's two paths: the lean step and the general path answer every step
message with the same bytes and the same errors, and count the same steps."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from envwire.app import Server
from envwire.frontends.openenv import wsession
from envwire.frontends.openenv.mount import OpenEnvMount
from envwire.frontends.openenv.wsession import WsSession
from envwire.protocols.openenv import parse_client_message
from envwire.registry import Catalog, parse_env_arg
from envwire.settings import Settings


class _Channel:
    """What a session sends, kept."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send_text(self, text: str) -> bool:
        self.sent.append(text)
        return True

    def receive(self, wait: float | None = None) -> None:
        return None

    def close(self, code: int = 1000, reason: str = "", linger: float = 1.0) -> None:
        return None


ENVS = ("envwire/Echo-v0", "CartPole-v1", "envwire/Connect4-v0")


@pytest.fixture(scope="module", params=["default", "strict"])
def mount(request: pytest.FixtureRequest) -> Iterator[OpenEnvMount]:
    catalog = Catalog([parse_env_arg(env) for env in ENVS])
    settings = Settings.of(
        gym_socket=None, http=0, grpc=None, monitor_root=None, openenv_compat=request.param
    )
    with Server(catalog, settings) as server:
        [front] = server.front_ends
        [found] = [m for m in front.mounts if isinstance(m, OpenEnvMount)]  # type: ignore[attr-defined]
        yield found


def _session(mount: OpenEnvMount, env_id: str) -> tuple[WsSession, _Channel]:
    session = WsSession(mount.service, env_id, "ws", "test", "127.0.0.1")
    channel = _Channel()
    assert session.opened(channel, lambda: None)  # type: ignore[arg-type]
    return session, channel


#: Step messages per env: well formed and not, before and after a reset; the lean path takes
#: the compact, well-formed ones.
MESSAGES = {
    "envwire/Echo-v0": [
        '{"type":"step","data":{"message":"early"}}',  # before any reset
        '{"type":"reset","data":{"seed":3}}',
        '{"type":"step","data":{"message":"hi"}}',
        '{"type":"step","data":{"message":"h\\u00e9 \\ud800"}}',  # a lone surrogate, echoed
        '{"type":"step","data":{"message":5}}',
        '{"type":"step","data":{"nope":1}}',
        '{"type":"step","data":{"message":"x","metadata":{"a":[1,2]}}}',
        '{"type":"step","data":{"type":"list_tools"}}',  # a tool action: the general path's
        '{"type":"step","data":{"type":"call_tool","tool_name":"echo_message","arguments":{}}}',
        '{ "type": "step", "data": {"message": "spaced"} }',
        '{"type":"step","data":{"message":"x"},"extra":1}',
        '{"type":"step","data":[]}',
        '{"type":"step","data":{"message":"NaN"}}',
    ],
    "CartPole-v1": [
        '{"type":"reset","data":{"seed":7}}',
        *['{"type":"step","data":{"action":1}}'] * 12,
        '{"type":"step","data":{"action":7}}',
        '{"type":"step","data":{}}',
        '{"type":"step","data":{"action":0,"other":1}}',
        '{"type":"step","data":{"action":[0]}}',
        *['{"type":"step","data":{"action":0}}'] * 30,  # past the episode's end
    ],
    "envwire/Connect4-v0": [
        '{"type":"reset","data":{"seed":1}}',
        *[f'{{"type":"step","data":{{"column":{c}}}}}' for c in (0, 1, 0, 1, 0, 1, 0, 9, 0)],
    ],
}


@pytest.mark.parametrize("env_id", ENVS)
def test_lean_and_general_paths_answer_the_same(
    mount: OpenEnvMount, env_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    general_calls = 0
    parse = parse_client_message

    def counted(text: str | bytes) -> object:
        nonlocal general_calls
        general_calls += 1
        return parse(text)

    # One after the other: strict mode holds one session per env.
    monkeypatch.setattr(wsession, "parse_client_message", counted)
    lean, lean_channel = _session(mount, env_id)
    try:
        for text in MESSAGES[env_id]:
            lean.message(text)
        assert lean.record is not None
        lean_steps = lean.record.session.step_count
        lean_id = lean.record.session.id[:8]
    finally:
        lean.closed()
    taken = general_calls
    plain, plain_channel = _session(mount, env_id)
    try:
        for text in MESSAGES[env_id]:
            plain._ws_general(text)
        assert plain.record is not None
        assert plain.record.session.step_count == lean_steps
        plain_id = plain.record.session.id[:8]
    finally:
        plain.closed()
    # The same bytes, but for the session's own id in errors that name it.
    assert [t.replace(lean_id, "<id>") for t in lean_channel.sent] == [
        t.replace(plain_id, "<id>") for t in plain_channel.sent
    ]
    assert taken < len(MESSAGES[env_id]) // 2, "the lean path took no step"
    assert any('"type":"observation"' in reply for reply in lean_channel.sent)
    assert any('"type":"error"' in reply for reply in lean_channel.sent)


def test_both_paths_count_the_same_steps_in_the_metrics(mount: OpenEnvMount) -> None:
    observe = mount.router.observe
    lean, _ = _session(mount, "envwire/Echo-v0")
    try:
        lean.message('{"type":"reset","data":{}}')
        before = observe.metrics.render().decode()
        lean.message('{"type":"step","data":{"message":"a"}}')
        lean._ws_general('{"type":"step","data":{"message":"a"}}')
        observe.tell_kept()  # (as the /metrics route does before it reads)
        after = observe.metrics.render().decode()
    finally:
        lean.closed()
    assert _steps(after) - _steps(before) == 2


def _steps(exposition: str) -> float:
    """The sum of the step counters of the OpenEnv front end in a Prometheus exposition."""
    total = 0.0
    for line in exposition.splitlines():
        if line.startswith("envwire_steps_total{") and 'front_end="openenv"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total
