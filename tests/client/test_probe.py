"""What the clients tell from a server's first bytes (:mod:`envwire.client.probe`), without
I/O: each protocol's first answer recognized whole, byte by byte and with trailing bytes, and
the line each finding becomes."""

from __future__ import annotations

import ssl
import struct

import pytest

from envwire.client.probe import Expecting, Finding, Found, diagnose, explain, not_tls, recognize

#: The first bytes each kind of server sends a stranger (the gRPC one: an empty SETTINGS frame).
ANSWERS = {
    Found.HTTP: b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n",
    Found.HTTP2: b"\x00\x00\x00\x04\x00\x00\x00\x00\x00",
    Found.TLS: b"\x15\x03\x03\x00\x02\x02\x46",  # an alert record: protocol_version
    Found.GYM_SOCKET: struct.pack("<I", 19) + b"unknown handshake flags",
}
GYM_SOCKET = Expecting("gym-socket", Found.GYM_SOCKET, 5001)


@pytest.mark.parametrize("found", list(ANSWERS))
def test_each_first_answer_is_recognized(found: Found) -> None:
    answer = ANSWERS[found]
    assert recognize(answer) is found
    assert recognize(answer + b"trailing bytes") is found


@pytest.mark.parametrize("found", list(ANSWERS))
def test_a_prefix_is_never_taken_for_another_protocol(found: Found) -> None:
    """Fed byte by byte, the answer is undecided (None) until it is recognized as itself."""
    answer = ANSWERS[found]
    seen = [recognize(answer[:size]) for size in range(len(answer) + 1)]
    assert set(seen) <= {None, found}
    assert seen[-1] is found


def test_an_http_status_line_is_not_read_as_a_length() -> None:
    # b"HTTP" as a little-endian u32: the length the gym-socket codec would have read.
    assert int.from_bytes(b"HTTP", "little") == 1347703880
    assert recognize(b"HTTP") is None  # not yet told: it could still be a status line
    assert recognize(b"HTTP/") is Found.HTTP


def test_bytes_of_no_known_protocol_are_other_once_nine_came() -> None:
    assert recognize(b"\xff" * 8) is None
    assert recognize(b"\xff" * 9) is Found.OTHER
    # a gym-socket length with binary text after it is no handshake answer
    assert recognize(struct.pack("<I", 12) + b"\x00\x01\x02\x03\x04\x05\x06\x07") is Found.OTHER


@pytest.mark.parametrize(
    ("finding", "scheme", "line"),
    [
        (Found.HTTP, "gym-socket", "the server answered HTTP: is this the --http port? "
         "gym-socket's default port is 5001"),
        (Found.HTTP2, "gym-socket", "the server answered HTTP/2 (gRPC): is this the --grpc port? "
         "gym-socket's default port is 5001"),
        (Found.TLS, "gym-socket", "the server speaks TLS: use gym-sockets://"),
        (Found.NOT_TLS, "gym-sockets", "the server does not speak TLS: use gym-socket://"),
        (Found.CLOSED, "gym-socket", "the server closed the connection without answering: is "
         "this a gym-socket port? gym-socket's default port is 5001"),
    ],
)  # fmt: skip
def test_findings_become_one_line(finding: Found, scheme: str, line: str) -> None:
    assert explain(Finding(finding), GYM_SOCKET, scheme) == line


@pytest.mark.parametrize(
    ("finding", "scheme"),
    [
        (Found.GYM_SOCKET, "gym-socket"),  # its own server: the failure is something else
        (Found.TLS, "gym-sockets"),  # TLS, as the client speaks it
        (Found.NOT_TLS, "gym-socket"),  # a plain client never tries TLS
    ],
)
def test_findings_that_explain_nothing_leave_the_message_alone(finding: Found, scheme: str) -> None:
    assert explain(Finding(finding), GYM_SOCKET, scheme) is None


def test_a_handshake_answered_in_plain_bytes_is_not_tls() -> None:
    wrong = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    wrong.reason = "WRONG_VERSION_NUMBER"
    other = ssl.SSLError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    other.reason = "CERTIFICATE_VERIFY_FAILED"
    assert not_tls(wrong)
    assert not not_tls(other)
    assert not not_tls(OSError("wrong version number"))  # only ssl's own reason counts


def test_diagnose_reads_the_cause_chain_and_leaves_refusals_alone() -> None:
    wrong = ssl.SSLError(1, "wrong version number")
    wrong.reason = "WRONG_VERSION_NUMBER"
    try:
        try:
            raise wrong
        except ssl.SSLError as exc:
            raise RuntimeError("a library's own words") from exc
    except RuntimeError as outer:
        line = diagnose(outer, "wss://127.0.0.1:1/x", Expecting("OpenEnv", Found.HTTP, 8000))
    assert line == "the server does not speak TLS: use ws://"
    refused = ConnectionRefusedError(111, "Connection refused")
    assert diagnose(refused, "ws://127.0.0.1:1/x", Expecting("OpenEnv", Found.HTTP, 8000)) is None
