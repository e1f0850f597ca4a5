"""The HTTP connection's reads against a handshake deadline: what arrived is served even when
the server comes to it late; a request still incomplete at the deadline gets 408."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from envwire.protocols.http.http11 import Request, Response
from envwire.sockets.http import HttpConnection

REQUEST = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
Pair = tuple[HttpConnection, socket.socket]


@pytest.fixture
def pair() -> Iterator[Pair]:
    server, client = socket.socketpair()
    yield HttpConnection(server, max_body=1024), client
    server.close()
    client.close()


def test_a_request_that_arrived_in_time_is_read_after_the_deadline(pair: Pair) -> None:
    conn, client = pair
    client.sendall(REQUEST)
    time.sleep(0.05)
    request = conn.next_request(0.5, deadline=time.monotonic() - 5)  # the server is late
    assert isinstance(request, Request) and request.path == "/health"


def test_a_request_incomplete_at_the_deadline_gets_408(pair: Pair) -> None:
    conn, client = pair
    client.sendall(REQUEST[:20])
    started = time.monotonic()
    # The deadline, not the read's minute of patience, ends the wait (a loaded machine may
    # take seconds to get there; it never takes the minute).
    reply = conn.next_request(60.0, deadline=started + 0.2)
    assert isinstance(reply, Response) and reply.status == 408
    assert time.monotonic() - started < 30
    assert not conn.keep_alive


def test_nothing_by_the_deadline_is_closed_without_an_answer(pair: Pair) -> None:
    conn, _ = pair
    assert conn.next_request(5.0, deadline=time.monotonic() + 0.2) is None
    assert conn.close_reason == "the request did not arrive whole in time"
