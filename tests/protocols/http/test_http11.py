"""The sans-IO HTTP/1.1 request parser: whole, byte by byte, pipelined, chunked, malformed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envwire.protocols.http.http11 import (
    NEED_DATA,
    HttpError,
    Request,
    RequestParser,
    Response,
    response_bytes,
)

POST = (
    b"POST /envs/a/step?x=1 HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
    b'Cookie: a=1\r\nCookie: b=2\r\nContent-Length: 7\r\n\r\n{"a":1}'
)


CHUNKED = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"


def test_chunk_sizes_in_hex_with_extensions_and_trailers() -> None:
    [request] = parse_all(CHUNKED + b"A;name=v\r\n0123456789\r\n1 \r\n!\r\n0\r\nX-T: 1\r\n\r\n")
    assert request.body == b"0123456789!"


def parse_all(data: bytes, step: int | None = None) -> list[Request]:
    parser = RequestParser(max_body=1000)
    chunks = [data] if step is None else [data[i : i + step] for i in range(0, len(data), step)]
    out = []
    for chunk in [*chunks, b""]:
        parser.receive_data(chunk)
        while True:
            request = parser.next_request()
            if request is NEED_DATA or request is None:
                break
            assert isinstance(request, Request)
            out.append(request)
    return out


def test_whole_and_byte_by_byte() -> None:
    for step in (None, 1, 5):
        [request] = parse_all(POST, step)
        assert (request.method, request.path, request.query) == ("POST", "/envs/a/step", "x=1")
        assert request.version == "HTTP/1.1"
        assert request.headers["content-type"] == "application/json"
        assert request.cookies == [("a", "1"), ("b", "2")] and request.body == b'{"a":1}'
        assert request.cookie_values("b") == ["2"] and request.base_url == "http://h/"
        assert request.keep_alive


def test_paths_are_percent_decoded_and_cookies_split() -> None:
    [request] = parse_all(b'GET /envs/my%2FEnv-v0/state HTTP/1.0\r\nCookie: s="x"; t=2\r\n\r\n')
    assert request.path == "/envs/my/Env-v0/state" and request.query == ""
    assert request.cookies == [("s", "x"), ("t", "2")]
    assert request.base_url == "http://127.0.0.1/"  # no Host header (HTTP/1.0 may omit it)


def test_pipelined_and_trailing_bytes() -> None:
    get = b"GET /health HTTP/1.1\r\nHost: h\r\n\r\n"
    requests = parse_all(POST + get + POST)
    assert [r.method for r in requests] == ["POST", "GET", "POST"]
    parser = RequestParser()
    parser.receive_data(b"GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n\x81\x05hello")
    assert isinstance(parser.next_request(), Request)
    assert bytes(parser.buffer) == b"\x81\x05hello"  # the WebSocket stream, untouched


def test_chunked_bodies() -> None:
    chunked = (
        b"POST /step HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    for step in (None, 1, 3):
        [request] = parse_all(chunked, step)
        assert request.body == b"Wikipedia"


def test_connection_semantics() -> None:
    [closing] = parse_all(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    assert not closing.keep_alive
    [old] = parse_all(b"GET / HTTP/1.0\r\n\r\n")
    assert not old.keep_alive
    [kept] = parse_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
    assert kept.keep_alive
    parser = RequestParser()
    parser.receive_data(
        b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"
    )
    assert parser.next_request() is NEED_DATA and parser.needs_continue()
    parser.continue_sent()
    assert not parser.needs_continue()
    parser.receive_data(b"{}")
    request = parser.next_request()
    assert isinstance(request, Request) and request.body == b"{}"


@pytest.mark.parametrize(
    ("data", "status"),
    [
        (b"GARBAGE\r\n\r\n", 400),
        (b"GET / HTTP/2.0\r\n\r\n", 505),
        (b"GET http://x/ HTTP/1.1\r\nHost: h\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: h\r\nno colon\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: h\r\nBad Name: x\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: x\r\n\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5000\r\n\r\n", 413),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        (b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 9\r\n\r\nshort", 400),
        # RFC 9112 strictness: each was accepted once (or raised ValueError, not HttpError).
        (b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: \xb2\r\n\r\nxx", 400),
        (b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nxx", 400),
        *[
            (CHUNKED + size + b"\r\nxx\r\n0\r\n\r\n", 400)
            for size in (b"0x2", b"0_2", b"+2", b"-2", b" 2", b"2 ;a", b"")
        ],
        (CHUNKED + b"2\r\nxx\r\n0\r\nBad Trailer\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\n\r\n", 400),  # no Host
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        (b"GET /a\tb HTTP/1.1\r\nHost: h\r\n\r\n", 400),
        (b"GET /\xff HTTP/1.1\r\nHost: h\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: h\r\nX: a\x00b\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nHost: h\nX: b\r\n\r\n", 400),  # a lone LF inside a value
    ],
)
def test_malformed_requests(data: bytes, status: int) -> None:
    with pytest.raises(HttpError) as caught:
        parse_all(data)
    assert caught.value.status == status


def test_header_limit() -> None:
    parser = RequestParser(max_header=100)
    parser.receive_data(b"GET / HTTP/1.1\r\nHost: h\r\n" + b"X: " + b"y" * 200)
    with pytest.raises(HttpError) as caught:
        parser.next_request()
    assert caught.value.status == 431


@given(st.binary(max_size=300))
def test_garbage_only_ever_raises_http_error(data: bytes) -> None:
    status = 200
    try:
        parse_all(data)
    except HttpError as exc:
        status = exc.status
    assert status == 200 or 400 <= status < 600


def test_response_bytes() -> None:
    data = response_bytes(Response(200, b"{}", headers=[("x-a", "1")]))
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-a: 1\r\ncontent-length: 2\r\n\r\n"
    )
    assert data == head + b"{}"
    closing = response_bytes(Response(404, b"x", "text/plain"), keep_alive=False, head=True)
    assert closing == (
        b"HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\ncontent-length: 1\r\n"
        b"connection: close\r\n\r\n"
    )


@pytest.mark.parametrize(
    "first",
    [
        b"\x01",  # a gym-socket handshake's flags byte
        b"\x16\x03\x01\x02\x00",  # a TLS ClientHello's record header
        b"\x00\x00\x00\x04",  # an HTTP/2 frame header
        b" GET",  # a space where the method starts
        b"\r\n\x16",  # after an empty line, which is allowed
        b"GET\x00",  # a method with a byte no token has
    ],
)
def test_bytes_that_cannot_start_a_request_line_are_refused_before_its_crlf(first: bytes) -> None:
    parser = RequestParser()
    parser.receive_data(first)
    with pytest.raises(HttpError) as refused:
        parser.next_request()
    assert refused.value.status == 400
    assert "expected a request line" in refused.value.message


@pytest.mark.parametrize(
    "prefix", [b"G", b"GE", b"GET", b"GET ", b"\r\n", b"\r\nPOST /x", b"M-SEARCH"]
)
def test_the_start_of_a_request_line_waits_for_more(prefix: bytes) -> None:
    parser = RequestParser()
    parser.receive_data(prefix)
    assert parser.next_request() is NEED_DATA
