"""Requests passed between workers (:mod:`envwire.server.relay`) over a real worker's relay front
end on a Unix socket: the connections are kept and reused, their number stays bounded, and a
kept connection that the other worker closed is replaced.
"""

from __future__ import annotations

import dataclasses
import select
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from envwire.frontends.openenv import error_response
from envwire.protocols.http.http11 import Request, Response, json_response
from envwire.server.http import Guard, HttpFrontEnd, OnHang, PlainMount
from envwire.server.relay import RelayPool, relay_front_end
from envwire.server.security import Security
from envwire.settings import Settings
from envwire.testing import wait_until

pytestmark = pytest.mark.process


class _Echo(PlainMount):
    """Answers each request with its path and the client it was passed for; notes the paths."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.lock = threading.Lock()

    def respond(self, request: Request, on_hang: OnHang) -> Response | None:
        with self.lock:
            self.seen.append(request.path)
        return json_response(200, f'{{"path":"{request.path}","client":"{request.client}"}}')


def _connections(path: str) -> int:
    """Connections the worker listening on ``path`` holds now, as the kernel lists them (an
    accepted Unix socket shows its listener's path, in state 03: connected)."""
    lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    return sum(1 for line in lines if line.endswith(" " + path) and line.split()[5] == "03")


#: The relay front end's keep-alive time here: kept connections that it closes meanwhile.
KEEPALIVE = 0.5


Relay = tuple[str, _Echo]


@pytest.fixture
def start_relay(tmp_path: Path) -> Iterator[Callable[[float], Relay]]:
    """Starts a worker's relay front end on a Unix socket, with this keep-alive time."""
    fronts: list[HttpFrontEnd] = []

    def start(keepalive: float) -> Relay:
        path = str(tmp_path / f"worker-{len(fronts)}.sock")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        sock.listen(64)
        settings = Settings()
        echo = _Echo()
        guard = Guard(Security.from_settings(settings.security), "127.0.0.1", error_response)
        http = dataclasses.replace(settings.http, http_keepalive=keepalive)
        front = relay_front_end(sock, http, guard=guard, mounts=[echo])
        front.start()
        fronts.append(front)
        return path, echo

    yield start
    for front in fronts:
        front.stop()


def _request(n: int) -> Request:
    return Request("GET", f"/echo/{n}", headers={"host": "localhost"}, client="10.0.0.7")


def _fetch_all(pool: RelayPool, path: str, count: int) -> list[Response]:
    with ThreadPoolExecutor(6) as threads:  # six requests in flight at once
        return list(threads.map(lambda n: pool.fetch(path, _request(n), 30), range(count)))


def test_many_passed_requests_reuse_a_bounded_number_of_connections(
    start_relay: Callable[[float], Relay],
) -> None:
    path, echo = start_relay(60.0)
    pool = RelayPool(max_idle=6)
    try:
        answers = _fetch_all(pool, path, 300)
        assert [a.status for a in answers] == [200] * 300
        assert all(f'"path":"/echo/{n}"' in a.body.decode() for n, a in enumerate(answers))
        assert '"client":"10.0.0.7"' in answers[0].body.decode()
        assert sorted(echo.seen) == sorted(f"/echo/{n}" for n in range(300))
        # a new connection only when every kept one is in use: six at most, for 300 requests
        assert pool.opened <= 6, pool.opened
        for n in range(100):  # one at a time: each rides a kept connection
            assert pool.fetch(path, _request(n), 30).status == 200
        assert pool.opened <= 6, pool.opened
        assert _connections(path) == pool.idle(path) <= 6
    finally:
        pool.close()
    assert wait_until(lambda: _connections(path) == 0, 30)  # closed on the worker's side too


def test_the_idle_connections_kept_are_bounded(start_relay: Callable[[float], Relay]) -> None:
    path, _ = start_relay(60.0)
    pool = RelayPool(max_idle=2)
    try:
        assert [a.status for a in _fetch_all(pool, path, 120)] == [200] * 120
        assert pool.idle(path) <= 2
        # those beyond the two kept were closed: the worker holds no more than two
        assert wait_until(lambda: _connections(path) <= 2, 30), _connections(path)
    finally:
        pool.close()


def _closed_by_the_worker(pool: RelayPool, path: str) -> None:
    """Wait until the worker has closed the pool's kept connection (its keep-alive ran out)."""
    kept = pool._idle[path][0]
    assert kept.sock is not None
    assert select.select([kept.sock], [], [], 30)[0]  # EOF from the worker's side
    assert wait_until(lambda: _connections(path) == 0, 30)


def test_a_kept_connection_closed_by_the_other_worker_is_replaced(
    start_relay: Callable[[float], Relay],
) -> None:
    path, _ = start_relay(KEEPALIVE)
    pool = RelayPool(max_idle=2)
    try:
        assert pool.fetch(path, _request(0), 30).status == 200
        assert pool.opened == 1 and pool.idle(path) == 1
        _closed_by_the_worker(pool, path)
        answer = pool.fetch(path, _request(1), 30)
        assert answer.status == 200 and b"/echo/1" in answer.body
        assert pool.opened == 2 and pool.idle(path) == 1
    finally:
        pool.close()


def test_a_request_sent_on_a_connection_the_peer_just_closed_is_sent_again(
    start_relay: Callable[[float], Relay], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race the check before use cannot see: the worker closes the kept connection right
    after the check; the request goes again, once, on a new connection."""
    path, echo = start_relay(KEEPALIVE)
    pool = RelayPool()
    try:
        assert pool.fetch(path, _request(0), 30).status == 200
        _closed_by_the_worker(pool, path)
        monkeypatch.setattr("envwire.server.relay._closed", lambda conn: False)
        answer = pool.fetch(path, _request(1), 30)
        assert answer.status == 200 and b"/echo/1" in answer.body
        assert echo.seen == ["/echo/0", "/echo/1"] and pool.opened == 2
    finally:
        pool.close()


def test_a_worker_that_is_gone_is_an_oserror(tmp_path: Path) -> None:
    pool = RelayPool()
    with pytest.raises(OSError):
        pool.fetch(str(tmp_path / "nobody.sock"), _request(0), 5)
    assert pool.idle(str(tmp_path / "nobody.sock")) == 0
