"""envwire's request parser against h11 as the oracle (RFC 9112): on generated and mutated
requests, whatever h11 refuses envwire refuses too, and every request both accept is read the
same (method, target, headers, body).

envwire may refuse more than h11 (absolute-form targets, obs-fold, HTTP versions other than
1.0 and 1.1, Content-Length beside Transfer-Encoding, repeated Content-Length, control
characters h11 lets through). One deliberate difference is taken out before asking h11: blank
lines before a request line, which RFC 9112 2.2 says a server SHOULD ignore and h11 refuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

import h11
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envwire.protocols.http.http11 import HttpError, Request, RequestParser
from tests.budget import examples


@dataclass(frozen=True)
class Read:
    """A request as a parser read it, in a form both parsers can be compared in."""

    method: str
    path: str
    query: str
    headers: tuple[tuple[str, str], ...]
    body: bytes


def _headers(pairs: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    joined: dict[str, str] = {}
    for key, raw in pairs:
        # h11 lower-cases Transfer-Encoding; envwire keeps it as sent: compared lower-cased.
        value = raw.lower() if key == "transfer-encoding" else raw
        joined[key] = f"{joined[key]}, {value}" if key in joined else value
    return tuple(sorted(joined.items()))


def with_envwire(data: bytes) -> Read | None:
    """The first request envwire reads from ``data`` then EOF, or None (refused, or cut)."""
    parser = RequestParser(max_body=1 << 20)
    parser.receive_data(data)
    parser.receive_data(b"")
    try:
        request = parser.next_request()
    except HttpError:
        return None
    if not isinstance(request, Request):
        return None
    path, query = request.path, request.query
    return Read(request.method, path, query, _headers(list(request.headers.items())),
                request.body)  # fmt: skip


def with_h11(data: bytes) -> Read | None:
    """The first request h11 reads from ``data`` then EOF, or None (refused, or cut)."""
    while data.startswith(b"\r\n"):  # RFC 9112 2.2 (see the module docstring)
        data = data[2:]
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=1 << 20)
    conn.receive_data(data)
    conn.receive_data(b"")
    head: h11.Request | None = None
    body = bytearray()
    try:
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            else:  # NEED_DATA, PAUSED or ConnectionClosed before the end of the message
                return None
    except h11.RemoteProtocolError:
        return None
    assert head is not None
    target = head.target.decode("latin-1")
    path, _, query = target.partition("?")
    pairs = [(k.decode("ascii"), v.decode("latin-1")) for k, v in head.headers]
    return Read(head.method.decode("ascii"), unquote(path), query, _headers(pairs), bytes(body))


def agree(data: bytes) -> None:
    ours, oracle = with_envwire(data), with_h11(data)
    if oracle is None:
        assert ours is None, f"envwire accepted what h11 refuses: {data!r} -> {ours}"
    elif ours is not None:
        assert ours == oracle, f"read differently: {data!r}: envwire {ours}, h11 {oracle}"


# -- requests made of parts, many of them odd ------------------------------------------------

_METHODS = [b"GET", b"POST", b"PUT", b"get", b"M-SEARCH", b"GE T", b"G\x00T", b""]
_TARGETS = [b"/", b"/envs/a/step?x=1", b"/a%20b", b"*", b"http://h/", b"/a\tb", b"/\x7f",
            b"/\xff", b"", b"/a b"]  # fmt: skip
_VERSIONS = [b"HTTP/1.1", b"HTTP/1.0", b"HTTP/1.2", b"HTTP/2.0", b"http/1.1", b"HTTP/1.1 "]
_NAMES = [b"Host", b"host", b"X-A", b"Cookie", b"Connection", b"Expect", b"X A", b"X-A ",
          b" X-A", b"", b"X\x00"]  # fmt: skip
_VALUES = [b"h", b"", b" h ", b"a\tb", b"a\x00b", b"a\x01b", b"a\x7fb", b"\xe9t\xe9",
           b"a\rb", b"a\nb", b"close", b"keep-alive", b"100-continue"]  # fmt: skip
_LENGTHS = [b"0", b"3", b"03", b"+3", b"-3", b" 3", b"3 ", b"3, 3", b"3,4", b"\xb2", b"0x3",
            b"3_0", b"", b"99999999999999999999999"]  # fmt: skip
_ENCODINGS = [b"chunked", b"Chunked", b"chunked ", b"gzip", b"gzip, chunked", b"chunked, chunked"]
_SIZES = ["{:x}", "{:X}", "0{:x}", "0x{:x}", "0_{:x}", "+{:x}", "-{:x}", " {:x}", "{:x} ",
          "{:x};a=b", "{:x} ;a", "{:x}\t", "{:x}\x00"]  # fmt: skip
_EOLS = [b"\r\n"] * 8 + [b"\n", b"\r", b"\r\r\n"]


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    eol = st.sampled_from(_EOLS)
    line = b" ".join(
        [
            draw(st.sampled_from(_METHODS)),
            draw(st.sampled_from(_TARGETS)),
            draw(st.sampled_from(_VERSIONS)),
        ]
    )
    fields = draw(
        st.lists(st.tuples(st.sampled_from(_NAMES), st.sampled_from(_VALUES)), max_size=4)
    )
    if draw(st.booleans()):
        fields.insert(draw(st.integers(0, len(fields))), (b"Host", b"h"))
    body = draw(st.binary(max_size=12))
    framing = draw(st.sampled_from(["none", "length", "chunked", "both"]))
    payload = b""
    if framing in ("length", "both"):
        declared = draw(st.sampled_from([str(len(body)).encode(), *_LENGTHS]))
        fields.append((b"Content-Length", declared))
        payload = body
    if framing in ("chunked", "both"):
        fields.append((b"Transfer-Encoding", draw(st.sampled_from(_ENCODINGS))))
        payload = b""
        rest = body
        while rest:
            n = draw(st.integers(1, len(rest)))
            size = draw(st.sampled_from(_SIZES)).format(n).encode("latin-1")
            payload += size + draw(eol) + rest[:n] + draw(eol)
            rest = rest[n:]
        payload += b"0" + draw(eol)
        if draw(st.booleans()):  # a trailer
            payload += draw(st.sampled_from(_NAMES)) + b": " + draw(st.sampled_from(_VALUES))
            payload += draw(eol)
        payload += draw(eol)
    head = line + draw(eol)
    for name, value in fields:
        head += name + b":" + draw(st.sampled_from([b"", b" ", b"\t"])) + value + draw(eol)
    prefix = draw(st.sampled_from([b"", b"", b"", b"\r\n", b"\n"]))
    return prefix + head + draw(eol) + payload


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(requests()))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        byte = draw(st.sampled_from([0, 9, 10, 13, 32, 43, 44, 48, 58, 59, 120, 127, 178, 255]))
        match draw(st.sampled_from(["insert", "delete", "replace"])):
            case "insert":
                data.insert(at, byte)
            case "delete" if at < len(data):
                del data[at]
            case _ if at < len(data):
                data[at] = byte
    return bytes(data)


_FAST = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@_FAST
@given(requests())
def test_generated_requests(data: bytes) -> None:
    agree(data)


@_FAST
@given(mutated())
def test_mutated_requests(data: bytes) -> None:
    agree(data)


@_FAST
@given(st.binary(max_size=80).map(lambda tail: b"POST / HTTP/1.1\r\nHost: h\r\n" + tail))
def test_random_bytes_after_a_request_line(data: bytes) -> None:
    agree(data)


def test_the_oracle_sees_both_outcomes() -> None:
    """A check of the test itself: agreeing requests are compared, refusals are refusals."""
    good = b"POST /a?b=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\nhi"
    assert with_envwire(good) == with_h11(good) is not None
    for smuggled in (
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\nhi\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: \xb2\r\n\r\nhi",
    ):
        assert with_h11(smuggled) is None and with_envwire(smuggled) is None
