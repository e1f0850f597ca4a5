"""What answers on a port: the clients' words for a first contact that failed.

A client pointed at another front end's port, or with TLS on one side only, would otherwise
report what its protocol library saw ("did not receive a valid HTTP response", a field of
1347703880 bytes, a closed connection, a wait until its timeout). Instead, each client says
what it found there, in one line:

- :func:`recognize` names the protocol of a server's first bytes (it does no I/O);
- :func:`probe` opens one short connection more to a server whose first contact failed, sends
  an HTTP request that every envwire front end answers at once (gym-socket with a handshake
  error, HTTP with a status line, gRPC with HTTP/2 frames it sends before reading anything),
  and recognizes the answer; when the server closes without a word it tries a TLS handshake,
  which a TLS port answers;
- :func:`explain` turns a :class:`Finding` into that line: the front end's ``envwire serve``
  flag and the client's default port for another protocol, the URL scheme to use for TLS on
  one side only.

A probe carries no token and nothing of the client's; what it finds only chooses the words of
an error. It verifies certificates as the clients do (a certificate it cannot verify still
shows that the port speaks TLS), and it takes at most :data:`PROBE_TIMEOUT` seconds.
"""

from __future__ import annotations

import contextlib
import enum
import socket
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from envwire.ports import FRONT_ENDS
from envwire.sockets.tls import client_context

__all__ = [
    "PROBE_TIMEOUT",
    "Expecting",
    "Finding",
    "Found",
    "diagnose",
    "explain",
    "not_tls",
    "probe",
    "recognize",
    "untrusted",
]

#: The longest a probe takes, connection and TLS handshake included.
PROBE_TIMEOUT = 1.0
#: The longest handshake error a gym-socket server sends; a longer length prefix is not one.
MAX_GYM_SOCKET_ANSWER = 64 * 1024
#: TLS record types a server sends first: alert (refusing), handshake (ServerHello).
_TLS_RECORDS = frozenset({0x15, 0x16})
#: HTTP/2 frame types a gRPC server sends a stranger first: SETTINGS, then GOAWAY.
_HTTP2_FRAMES = frozenset({0x04, 0x07})
#: What :func:`probe` reads at most: enough to recognize any answer.
_HEAD = 64
#: The URL schemes of each front end, without TLS and with.
_SECURE = {plain: secure for row in FRONT_ENDS for plain, secure in row.schemes}
_PLAIN = {secure: plain for plain, secure in _SECURE.items()}
#: ssl's reasons for a handshake whose answer was not TLS at all (OpenSSL names it by the
#: record header it could not read; BoringSSL, in gRPC, the same).
_NOT_TLS_REASONS = frozenset(
    {"WRONG_VERSION_NUMBER", "UNKNOWN_PROTOCOL", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG"}
)


class Found(enum.Enum):
    """What answered on a port."""

    HTTP = "HTTP"
    HTTP2 = "HTTP/2 (gRPC)"
    GYM_SOCKET = "gym-socket"
    TLS = "TLS"
    NOT_TLS = "not TLS"  # a TLS handshake got an answer in another protocol
    UNTRUSTED = "an untrusted certificate"
    CLOSED = "a close"  # the connection closed before any byte came
    SILENT = "silence"
    UNREACHABLE = "no connection"
    OTHER = "another protocol"


#: The ``envwire serve`` flag of the front end that answers each protocol (each row names its
#: answer by its member's name here).
_FLAGS = {Found[row.answer]: row.flag for row in FRONT_ENDS}


@dataclass(frozen=True)
class Finding:
    """What answered, and a detail for the message (first bytes, an ssl reason); ``untrusted``:
    why its certificate was not trusted, where a TLS server was still recognized (gRPC's,
    which chooses ``h2`` before its certificate is judged)."""

    found: Found
    detail: str = ""
    untrusted: str = ""


@dataclass(frozen=True)
class Expecting:
    """What a client expects to reach.

    Attributes:
        protocol: its name in messages.
        answer: how its server answers :func:`probe`.
        default_port: the port of its URLs that name none.
    """

    protocol: str
    answer: Found
    default_port: int


def recognize(head: bytes) -> Found | None:
    """The protocol whose server sends ``head`` first: HTTP (a status line), HTTP/2 (a
    SETTINGS or GOAWAY frame on stream 0), TLS (an alert or handshake record of TLS 1.0 to
    1.3), gym-socket (a handshake answer: a u32 length of at most 64 KiB, then text); OTHER
    for 9 bytes or more of none of these; None while too few bytes have come to tell.
    """
    if head.startswith(b"HTTP/"):
        return Found.HTTP
    if len(head) >= 3 and head[0] in _TLS_RECORDS and head[1] == 3 and 1 <= head[2] <= 4:
        # Record version 3.1-3.4; SSL 3.0's 3.0 is left out: its header could be a gym-socket
        # answer of 789 or 790 bytes.
        return Found.TLS
    if len(head) >= 9 and head[3] in _HTTP2_FRAMES and not int.from_bytes(head[5:9]) & 0x7FFFFFFF:
        return Found.HTTP2
    if len(head) >= 4 and not b"HTTP/".startswith(head[:5]):
        size = int.from_bytes(head[:4], "little")
        if size <= MAX_GYM_SOCKET_ANSWER:
            text = head[4 : 4 + min(size, 8)]
            if len(text) < min(size, 8):
                return None
            if all(byte >= 0x20 or byte in b"\t\n\r" for byte in text):
                return Found.GYM_SOCKET
    return Found.OTHER if len(head) >= 9 else None


def untrusted(exc: ssl.SSLCertVerificationError) -> str:
    """Why a certificate was not trusted, in OpenSSL's words (``unable to get local issuer
    certificate``, ``Hostname mismatch, ...``)."""
    return exc.verify_message or str(exc)


def not_tls(exc: BaseException) -> bool:
    """Whether a TLS handshake failed with ``exc`` because the peer answered in plain bytes."""
    return isinstance(exc, ssl.SSLError) and exc.reason in _NOT_TLS_REASONS


def explain(finding: Finding, expecting: Expecting, scheme: str) -> str | None:
    """The line a client of ``scheme`` reports for ``finding``; None when the finding explains
    nothing (the port answers as the client's own server does, or TLS as the client speaks it).
    """
    secure = scheme in _PLAIN
    match finding.found:
        case expecting.answer:
            return None
        case found if found in _FLAGS:
            return (
                f"the server answered {finding.found.value}: is this the "
                f"{_FLAGS[finding.found]} port? {expecting.protocol}'s default port is "
                f"{expecting.default_port}"
            )
        case Found.TLS:
            return None if secure else f"the server speaks TLS: use {_SECURE[scheme]}://"
        case Found.NOT_TLS:
            return f"the server does not speak TLS: use {_PLAIN[scheme]}://" if secure else None
        case Found.UNTRUSTED:
            return (
                f"the server's TLS certificate is not trusted ({finding.detail}): give the CA "
                "that signed it with ca= or ENVWIRE_CA"
            )
        case Found.CLOSED:
            article = "an" if expecting.protocol[:1].lower() in "aeiou" else "a"
            return (
                f"the server closed the connection without answering: is this {article} "
                f"{expecting.protocol} port? {expecting.protocol}'s default port is "
                f"{expecting.default_port}"
            )
        case Found.SILENT:
            return f"the server sent nothing within {PROBE_TIMEOUT:g} s"
        case Found.UNREACHABLE:
            return finding.detail
        case _:
            return (
                f"the server answered something that is not {expecting.protocol}: {finding.detail}"
            )


def probe(
    host: str, port: int, *, tls: bool, ca: str | None = None, timeout: float = PROBE_TIMEOUT
) -> Finding:
    """What answers at ``host:port`` (see the module docstring), within ``timeout`` seconds.

    Args:
        host, port: the server.
        tls: probe inside a TLS connection (verified against ``ca``, else the system's CAs),
            as a client of a TLS scheme connects.
        ca: a PEM file of CA certificates.
        timeout: seconds for the whole probe.
    """
    deadline = time.monotonic() + timeout
    if tls:
        return _probe_tls(host, port, ca, deadline)
    plain = _probe_plain(host, port, deadline)
    if plain.found is Found.CLOSED:  # a TLS server closes on a plain request without a word
        secure = _probe_tls(host, port, ca, deadline)
        if secure.found not in (Found.NOT_TLS, Found.CLOSED, Found.SILENT, Found.UNREACHABLE):
            return Finding(Found.TLS, secure.detail)
    return plain


def diagnose(
    exc: BaseException, url: str, expecting: Expecting, ca: str | None = None
) -> str | None:
    """The line to report for a first contact with ``url`` that failed with ``exc`` (an
    exception of a protocol library, or one raised from it): what answered, when that explains
    the failure; None when it does not (the caller keeps its own words).
    """
    parts = urlsplit(url)
    scheme, host = parts.scheme, parts.hostname or ""
    causes = list(_chain(exc))
    for cause in causes:
        if isinstance(cause, ssl.SSLCertVerificationError):  # read and judged: say what to do
            return explain(Finding(Found.UNTRUSTED, untrusted(cause)), expecting, scheme)
    if any(not_tls(cause) for cause in causes):
        return explain(Finding(Found.NOT_TLS), expecting, scheme)
    if any(isinstance(cause, ConnectionRefusedError | socket.gaierror) for cause in causes):
        return None  # nothing listens there, or no such host: the message says so already
    port = parts.port or (443 if scheme in _PLAIN else 80)
    return explain(probe(host, port, tls=scheme in _PLAIN, ca=ca), expecting, scheme)


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or during, nearest first."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _connect(host: str, port: int, deadline: float) -> socket.socket | Finding:
    try:
        return socket.create_connection((host, port), timeout=max(deadline - time.monotonic(), 0))
    except OSError as exc:
        return Finding(Found.UNREACHABLE, str(exc))


def _hello(host: str, port: int) -> bytes:
    return f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode()


def _answer(sock: socket.socket | ssl.SSLSocket, deadline: float) -> Finding:
    """Read the server's first bytes until they are recognized, it closes, or ``deadline``."""
    head = b""
    while (found := recognize(head)) is None:
        left = deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            sock.settimeout(left)
            data = sock.recv(_HEAD - len(head))
        except TimeoutError:
            return Finding(Found.SILENT if not head else Found.OTHER, repr(head))
        except OSError as exc:
            return Finding(Found.CLOSED if not head else Found.OTHER, repr(head) or str(exc))
        if not data:
            return Finding(Found.CLOSED if not head else Found.OTHER, repr(head))
        head += data
    return Finding(found, repr(head[:24]))


def _probe_plain(host: str, port: int, deadline: float) -> Finding:
    sock = _connect(host, port, deadline)
    if isinstance(sock, Finding):
        return sock
    with sock:
        # A server that speaks first (HTTP/2) may close before it reads this: read it anyway.
        with contextlib.suppress(OSError):
            sock.sendall(_hello(host, port))
        return _answer(sock, deadline)


def _probe_tls(host: str, port: int, ca: str | None, deadline: float) -> Finding:
    sock = _connect(host, port, deadline)
    if isinstance(sock, Finding):
        return sock
    try:
        context = client_context(ca)
        # gRPC's TLS servers choose h2 here, before any byte of HTTP/2; the others choose none.
        context.set_alpn_protocols(["h2", "http/1.1"])
        tls_sock = context.wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False)
    except BaseException:  # a CA file that cannot be read, say: the probe's socket goes too
        sock.close()
        raise
    with tls_sock as tls:
        try:
            tls.settimeout(max(deadline - time.monotonic(), 0))
            tls.do_handshake()
        except ssl.SSLCertVerificationError as exc:  # it spoke TLS far enough to show it
            if tls.selected_alpn_protocol() == "h2":
                return Finding(Found.HTTP2, untrusted=untrusted(exc))
            return Finding(Found.UNTRUSTED, untrusted(exc))
        except (ssl.SSLEOFError, ssl.SSLZeroReturnError) as exc:  # closed before a TLS word
            return Finding(Found.CLOSED, str(exc))
        except ssl.SSLError as exc:
            return Finding(Found.NOT_TLS if not_tls(exc) else Found.TLS, str(exc))
        except TimeoutError:
            return Finding(Found.SILENT)
        except OSError as exc:
            return Finding(Found.CLOSED, str(exc))
        if tls.selected_alpn_protocol() == "h2":
            return Finding(Found.HTTP2)
        with contextlib.suppress(OSError):
            tls.sendall(_hello(host, port))
        return _answer(tls, deadline)
