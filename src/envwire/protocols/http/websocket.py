"""The server side of WebSocket, sans-IO: the opening handshake (RFC 6455 section 4.2) and a
frame codec (section 5), no extensions.

:func:`handshake_problem` says why a :class:`~envwire.protocols.http.http11.Request` is not a valid
opening handshake, and :func:`accept_bytes` is the ``101 Switching Protocols`` answer to one.

:class:`FrameReader` turns received bytes into events: ``("text", str)`` for each complete text
message, ``("binary", bytes)`` for each binary one, ``("ping", payload)``, ``("pong",
payload)`` and ``("close", code, reason)``; a peer that breaks the protocol raises
:class:`FrameError` with the close code to answer (1002 protocol error, 1007 invalid UTF-8,
1009 message too big, or made of too many fragments). The ``*_frame`` functions build unmasked
server frames.

A fragmented message is gathered in one ``bytearray`` (no object per fragment), and each
fragment counts :data:`FRAGMENT_COST` bytes beyond its payload against the message's size
limit and :attr:`FrameReader.buffered` (so against the server's shared receive budget), at most
``max_fragments`` of them per message: a message that never ends, in empty or tiny fragments,
costs bounded memory and is closed with 1009.

It replaces the sans-IO core of ``websockets`` on the server's hot path, where that core's
generator-based parser cost about 12 µs per message; the client side still uses ``websockets``.
"""

from __future__ import annotations

import base64
import hashlib
import struct
from typing import Final

from envwire.protocols.http.http11 import Request

__all__ = [
    "CLOSE",
    "DEFAULT_MAX_FRAGMENTS",
    "FRAGMENT_COST",
    "PING",
    "PONG",
    "TEXT",
    "FrameError",
    "FrameReader",
    "accept_bytes",
    "close_frame",
    "control_frame",
    "handshake_problem",
    "text_frame",
]

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
_DATA: Final = frozenset({TEXT, BINARY})
_CONTROL: Final = frozenset({CLOSE, PING, PONG})
_NO_STATUS: Final = 1005
_VALID_CLOSE_CODES: Final = frozenset({1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011})

#: Fragments one message may have (``max_fragments``): clients that fragment at all send a
#: large message in a few dozen pieces.
DEFAULT_MAX_FRAGMENTS: Final = 4096
#: What a fragment costs beyond its payload (its parse, its header), counted in bytes against
#: the message's size limit and the receive budget.
FRAGMENT_COST: Final = 64

Event = tuple[str, str] | tuple[str, bytes] | tuple[str, int, str]

_GUID: Final = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _tokens(value: str) -> list[str]:
    return [token.strip().lower() for token in value.split(",")]


def handshake_problem(request: Request) -> str | None:
    """Why ``request`` is not a valid WebSocket opening handshake (None when it is)."""
    if request.method != "GET":
        return "a WebSocket handshake must be a GET request"
    if "websocket" not in _tokens(request.header("upgrade")):
        return "missing 'Upgrade: websocket'"
    if "upgrade" not in _tokens(request.header("connection")):
        return "missing 'Connection: Upgrade'"
    if request.header("sec-websocket-version") != "13":
        return "unsupported Sec-WebSocket-Version (13 is required)"
    try:
        if len(base64.b64decode(request.header("sec-websocket-key"), validate=True)) != 16:
            raise ValueError
    except ValueError:
        return "missing or invalid Sec-WebSocket-Key"
    return None


def accept_bytes(request: Request) -> bytes:
    """The ``101 Switching Protocols`` answer to a valid handshake (no extensions, no
    subprotocol)."""
    key = request.header("sec-websocket-key").encode("ascii")
    accept = base64.b64encode(hashlib.sha1(key + _GUID).digest()).decode("ascii")
    return (
        b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
        + f"sec-websocket-accept: {accept}\r\n\r\n".encode("ascii")
    )


class FrameError(Exception):
    """The peer broke the protocol; close the connection with ``code``."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def _unmask(mask: bytes, data: bytes) -> bytes:
    n = len(data)
    if not n:
        return b""
    key = int.from_bytes(mask * (n // 4 + 1), "little") & ((1 << (8 * n)) - 1)
    return (int.from_bytes(data, "little") ^ key).to_bytes(n, "little")


class FrameReader:
    """Parses the frames a client sends (they must be masked).

    Args:
        max_size: largest message (all fragments together, each counting
            :data:`FRAGMENT_COST` beyond its payload), in bytes; None for no limit.
        max_fragments: most fragments of one message (the first frame included).
    """

    def __init__(
        self,
        max_size: int | None = 100 * 1024 * 1024,
        *,
        max_fragments: int = DEFAULT_MAX_FRAGMENTS,
    ) -> None:
        self.max_size = max_size
        self.max_fragments = max_fragments
        self.buffer = bytearray()
        self._fragments: bytearray | None = None  # the fragmented message so far
        self._binary = False  # the fragmented message in progress is binary
        self._fragment_count = 0
        self._fragment_size = 0  # its payload plus FRAGMENT_COST per fragment

    @property
    def buffered(self) -> int:
        """Bytes held of messages not yet complete (a frame in progress, fragments so far at
        their cost)."""
        return len(self.buffer) + self._fragment_size

    def feed(self, data: bytes) -> list[Event]:
        """Add received bytes and return the events they complete.

        Raises:
            FrameError: a protocol violation (the connection must be closed with its code).
        """
        buffer = self.buffer
        buffer += data
        events: list[Event] = []
        at = 0
        size = len(buffer)
        while size - at >= 2:
            first, second = buffer[at], buffer[at + 1]
            if first & 0x70:
                raise FrameError(1002, "reserved bits set without a negotiated extension")
            if not second & 0x80:
                raise FrameError(1002, "client frames must be masked")
            opcode, fin, length = first & 0x0F, first & 0x80, second & 0x7F
            header = 6
            if length == 126:
                if size - at < 8:
                    break
                length = struct.unpack_from("!H", buffer, at + 2)[0]
                header = 8
            elif length == 127:
                if size - at < 14:
                    break
                length = struct.unpack_from("!Q", buffer, at + 2)[0]
                if length >> 63:
                    raise FrameError(1002, "payload length has its most significant bit set")
                header = 14
            if opcode in _CONTROL:
                if not fin or length > 125:
                    raise FrameError(1002, "control frames must be final and at most 125 bytes")
            elif opcode not in _DATA and opcode != CONTINUATION:
                raise FrameError(1002, f"unknown opcode {opcode:#x}")
            cost = length + (FRAGMENT_COST if self._fragments is not None else 0)
            if self.max_size is not None and cost + self._fragment_size > self.max_size:
                raise FrameError(1009, f"message larger than {self.max_size} bytes")
            end = at + header + length
            if size < end:
                break
            payload = _unmask(
                bytes(buffer[at + header - 4 : at + header]), bytes(buffer[at + header : end])
            )
            at = end
            self._frame(opcode, bool(fin), payload, events)
        if at:
            del buffer[:at]
        return events

    def _frame(self, opcode: int, fin: bool, payload: bytes, events: list[Event]) -> None:
        if opcode in _DATA:
            if self._fragments is not None:
                raise FrameError(1002, "a new message started inside a fragmented one")
            if fin:
                events.append(("binary", payload) if opcode == BINARY else ("text", _text(payload)))
            else:
                self._fragments = bytearray(payload)
                self._fragment_size = len(payload) + FRAGMENT_COST
                self._fragment_count = 1
                self._binary = opcode == BINARY
        elif opcode == CONTINUATION:
            fragments = self._fragments
            if fragments is None:
                raise FrameError(1002, "a continuation frame without a message to continue")
            self._fragment_count += 1
            if self._fragment_count > self.max_fragments:
                self._fragments, self._fragment_size = None, 0
                raise FrameError(1009, f"a message of more than {self.max_fragments} fragments")
            fragments += payload
            self._fragment_size += len(payload) + FRAGMENT_COST
            if fin:
                message = bytes(fragments)
                self._fragments, self._fragment_size = None, 0
                events.append(("binary", message) if self._binary else ("text", _text(message)))
        elif opcode == PING:
            events.append(("ping", payload))
        elif opcode == PONG:
            events.append(("pong", payload))
        else:
            events.append(("close", *_close_payload(payload)))


def _text(payload: bytes) -> str:
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError:
        raise FrameError(1007, "a message is not valid UTF-8") from None


def _close_payload(payload: bytes) -> tuple[int, str]:
    if not payload:
        return _NO_STATUS, ""
    if len(payload) == 1:
        raise FrameError(1002, "a close frame with a one-byte payload")
    code = struct.unpack_from("!H", payload)[0]
    if not (code in _VALID_CLOSE_CODES or 3000 <= code < 5000):
        raise FrameError(1002, f"invalid close code {code}")
    return code, _text(payload[2:])


def text_frame(payload: bytes) -> bytes:
    """An unmasked, unfragmented text frame."""
    n = len(payload)
    if n < 126:
        return bytes((0x81, n)) + payload
    if n < 65536:
        return struct.pack("!BBH", 0x81, 126, n) + payload
    return struct.pack("!BBQ", 0x81, 127, n) + payload


def control_frame(opcode: int, payload: bytes = b"") -> bytes:
    """A ping, pong or close frame (payload at most 125 bytes)."""
    return bytes((0x80 | opcode, len(payload[:125]))) + payload[:125]


def close_frame(code: int = 1000, reason: str = "") -> bytes:
    """A close frame; code 1005 (no status) sends an empty payload."""
    if code == _NO_STATUS:
        return control_frame(CLOSE)
    data = struct.pack("!H", code) + reason.encode("utf-8")[:123]
    return control_frame(CLOSE, data)
