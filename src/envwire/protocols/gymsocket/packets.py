"""gym-socket: the wire format both ends share.

Constants, framing (length-prefixed fields read from a growing buffer by absolute offsets),
the handshake events, typed tensors and the base both connections build on. The server's end
is :mod:`.server`, the client's :mod:`.client`; nothing here touches a socket.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from typing import Any, Final, Literal

import numpy as np
from gymnasium.spaces import Discrete, Space

from envwire import jsonio, tensor
from envwire.errors import EnvwireError, ProtocolError, TooLargeError, UsageError

__all__ = [
    "ACT_JSON",
    "ACT_TENSOR",
    "CODE_BY_DTYPE",
    "DTYPE_BY_CODE",
    "EMPTY_INFO",
    "F64",
    "KNOWN_FLAGS",
    "MAX_FIELD",
    "MAX_HANDSHAKE_TOKEN",
    "MAX_MONITOR_DIR",
    "MONITOR_LAYOUTS",
    "NEED_DATA",
    "OBS_BYTES",
    "OBS_JSON",
    "OBS_TENSOR",
    "STATUS_ERROR",
    "STATUS_OK",
    "STEP_EX_TAIL",
    "STEP_TAIL",
    "STEP_EX_TAIL_INFO",
    "TENSOR_HEADERS",
    "U8",
    "U32",
    "Buffer",
    "Flags",
    "Handshake",
    "HandshakeReply",
    "Invalid",
    "MonitorLayout",
    "NeedData",
    "Packet",
    "Side",
    "Upload",
    "decode_text",
    "info_field",
    "json_array",
    "json_bytes",
    "json_default",
    "monitor_has_video",
    "pack_column",
    "pack_field",
    "pack_tensor",
    "unpack_tensor",
]

MAX_FIELD: Final = 256 * 1024 * 1024  # no string or array field may exceed 256 MiB
#: The longest token a handshake may carry (AUTH), refused on its length prefix alone.
MAX_HANDSHAKE_TOKEN: Final = 1024
#: The longest Monitor directory the layout detection takes for a video-layout packet.
MAX_MONITOR_DIR: Final = 65536

#: How a server reads Monitor packets of clients without the MONITOR_REPLY flag: ``auto``
#: tells the layouts apart by their bytes; ``seed`` and ``video`` force one.
MonitorLayout = Literal["auto", "seed", "video"]
MONITOR_LAYOUTS: Final[tuple[MonitorLayout, ...]] = ("auto", "seed", "video")


class NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


#: Returned by ``next_event`` when more bytes are needed.
NEED_DATA: Final = NeedData()


class Flags(IntFlag):
    """Handshake flag bits (the original clients send 0)."""

    ERRORS = 0x01
    MONITOR_REPLY = 0x02
    EXTENDED = 0x04
    VECTOR = 0x08
    AUTH = 0x10
    FINAL_OBS = 0x20


KNOWN_FLAGS: Final = (
    Flags.ERRORS
    | Flags.MONITOR_REPLY
    | Flags.EXTENDED
    | Flags.VECTOR
    | Flags.AUTH
    | Flags.FINAL_OBS
)


class Packet(IntEnum):
    """Command packet types: 0-6 are the original protocol's, 7-8 are the EXTENDED flag's."""

    RESET = 0
    STEP = 1
    GET_SPACE = 2
    SAMPLE_ACTION = 3
    MONITOR = 4
    RENDER = 5
    UPLOAD = 6
    RESET_EX = 7
    STEP_EX = 8
    VECTOR_RESET = 9
    VECTOR_STEP = 10


OBS_JSON, OBS_BYTES, OBS_TENSOR = 0, 1, 2
ACT_JSON, ACT_TENSOR = 0, 1
STATUS_OK, STATUS_ERROR = 0, 1

U8 = struct.Struct("<B")
U32 = struct.Struct("<I")
F64 = struct.Struct("<d")
STEP_EX_TAIL = struct.Struct("<d??")
#: The seed's step reply after the observation: the reward and one done flag.
STEP_TAIL = struct.Struct("<d?")
STEP_EX_TAIL_INFO = struct.Struct("<d??I")


@dataclass(frozen=True, slots=True)
class Handshake:
    """The client's opening: flags and the env it wants ('' = no env)."""

    flags: Flags
    env_name: str
    vector: dict[str, Any] | None = None  # VECTOR: {"num_envs", "autoreset_mode", "workers"}
    token: str | None = field(default=None, repr=False)  # AUTH: never shown in logs


@dataclass(frozen=True, slots=True)
class HandshakeReply:
    """The server's answer to the handshake: '' means the session is open."""

    error: str


@dataclass(frozen=True, slots=True)
class Invalid:
    """A well-framed request the server must refuse (bad action, unknown packet, ...)."""

    error: EnvwireError


@dataclass(frozen=True, slots=True)
class Upload:
    """An Upload packet: upload a monitor directory to the OpenAI Gym scoreboard, which was shut
    down in 2017. gym-socket's own request, never a session's: the front end answers it."""

    directory: str
    api_key: str
    algorithm_id: str


json_default = jsonio.plain_default


# One encoder for the process (it holds no per-call state): json.dumps with options builds a
# new one per call, and the original JSON path encodes every observation.
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=json_default)


def json_bytes(value: object) -> bytes:
    return _ENCODER.encode(value).encode()


def json_array(array: np.ndarray[Any, Any]) -> bytes:
    """``json_bytes(array.tolist())`` for an array of ints or floats, in two C calls instead
    of the encoder's: a list's repr writes each number as JSON does (``float.__repr__``,
    ``int.__repr__``), with a space after each comma that these separators leave out. NaN
    and the infinities, which the repr spells ``nan`` and ``inf`` (JSON: ``NaN``,
    ``Infinity``), are the only texts with an ``n``: those go through the encoder."""
    text = repr(array.tolist())
    if "n" in text:
        return json_bytes(array.tolist())
    return text.replace(" ", "").encode()


def pack_field(data: bytes) -> bytes:
    return U32.pack(len(data)) + data


class Buffer:
    """Received bytes, read by absolute offsets so a short packet is retried from its start."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.eof = False

    def u8(self, pos: int) -> int | None:
        return self.data[pos] if pos < len(self.data) else None

    def u32(self, pos: int) -> int | None:
        if pos + 4 > len(self.data):
            return None
        return int(U32.unpack_from(self.data, pos)[0])

    def field(
        self, pos: int, limit: int = MAX_FIELD, what: str = "a field"
    ) -> tuple[bytes, int] | None:
        """A length-prefixed field at ``pos``: (bytes, next position), or None if incomplete.

        Raises:
            TooLargeError: the field's declared length is over ``limit`` (checked as soon as
                the length arrives, before its bytes are buffered).
        """
        size = self.u32(pos)
        if size is None:
            return None
        if size > limit:
            raise TooLargeError(f"{what} of {size} bytes is over the {limit}-byte limit")
        end = pos + 4 + size
        if end > len(self.data):
            return None
        return bytes(self.data[pos + 4 : end]), end


def monitor_has_video(data: bytes | bytearray, pos: int) -> bool | None:
    """Whether the Monitor packet whose body starts at ``pos`` has the later ``video`` byte.

    The original body is ``resume, force, u32 length, dir``; the later one (the Go client's, sent
    with flags 0) is ``resume, force, video, u32 length, dir``. Call the third byte ``v`` and
    the four after it ``n``: the body is the later layout exactly when ``v`` is 0 or 1 and ``n``
    is a plausible directory length, 1 to :data:`MAX_MONITOR_DIR` bytes. A seed packet can
    look like that only if its directory began with a NUL byte, which no path does: ``n``'s
    high byte is then the directory's first byte, so ``n`` would be at least 2**24.

    Returns:
        True (video layout), False (seed layout), or None while the bytes seen so far fit
        both. Every byte it looks at belongs to this packet under either layout, so a decision
        never waits for the next packet.
    """
    have = len(data) - pos
    if have < 3:
        return None
    if data[pos + 2] > 1:
        return False
    if have < 6:
        return None
    if not (data[pos + 3] or data[pos + 4] or data[pos + 5]):
        return False  # n is 0 or at least 2**24, whatever its fourth byte
    if have < 7:
        return None
    return 1 <= int(U32.unpack_from(data, pos + 3)[0]) <= MAX_MONITOR_DIR


def decode_text(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"{what} is not valid UTF-8: {exc}") from None


class Side:
    """What both ends share: the buffer, flags, spaces and the EOF rule."""

    def __init__(self) -> None:
        self._buf = Buffer()
        self._set_flags(Flags(0))
        self.action_space: Space[Any] | None = None
        self.observation_space: Space[Any] | None = None
        self._int_actions = False

    def _set_flags(self, flags: Flags) -> None:
        # Plain bools: IntFlag arithmetic costs a microsecond per test on the hot path.
        self.flags = flags
        self._errors = bool(flags & Flags.ERRORS)
        self._extended = bool(flags & Flags.EXTENDED)
        self._vector = bool(flags & Flags.VECTOR)
        # SameStep's final observations in a field of their own (a vector session's only)
        self._finals = self._vector and bool(flags & Flags.FINAL_OBS)
        if self._vector:
            self._fast_steps = frozenset({int(Packet.VECTOR_STEP)})
        elif self._extended:
            self._fast_steps = frozenset({int(Packet.STEP), int(Packet.STEP_EX)})
        else:
            self._fast_steps = frozenset({int(Packet.STEP)})

    def set_spaces(self, action_space: Space[Any], observation_space: Space[Any]) -> None:
        """Tell the codec the env's spaces (needed to decode actions/observations)."""
        self.action_space, self.observation_space = action_space, observation_space
        # Discrete(int64) actions are by far the most common: they skip the JSON machinery.
        self._int_actions = isinstance(action_space, Discrete) and action_space.dtype == np.int64

    @staticmethod
    def _known(space: Space[Any] | None, role: str) -> Space[Any]:
        """``space``, set by :meth:`set_spaces`.

        Raises:
            UsageError: it was not set (a session without an env has no spaces).
        """
        if space is None:
            raise UsageError(f"the {role} space is not known: set_spaces was not called")
        return space

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Feed bytes from the peer; ``b""`` means the peer closed its side."""
        if data:
            self._buf.data += data
        else:
            self._buf.eof = True

    def _consume(self, end: int) -> None:
        del self._buf.data[:end]

    def _incomplete(self) -> NeedData:
        if self._buf.eof and self._buf.data:
            raise ProtocolError(f"connection closed inside a packet ({len(self._buf.data)} bytes)")
        return NEED_DATA

    def discard(self) -> None:
        """Forget every buffered byte: the connection is over (its memory is freed now, not
        whenever the codec object goes)."""
        self._buf.data = bytearray()
        self._buf.eof = True

    @property
    def buffered(self) -> int:
        """How many received bytes wait to be parsed."""
        return len(self._buf.data)

    @property
    def closed(self) -> bool:
        """True when the peer closed and every complete packet has been read."""
        return self._buf.eof and not self._buf.data


EMPTY_INFO = pack_field(b"{}")


def info_field(info: dict[str, Any], typed: bool) -> bytes:
    return pack_field(jsonio.dumps_info(info, typed=typed)) if info else EMPTY_INFO


CODE_BY_DTYPE = {d.numpy: d.code for d in tensor.DTYPES}
DTYPE_BY_CODE = {d.code: d.numpy for d in tensor.DTYPES}
TENSOR_HEADERS = [struct.Struct(f"<BI{n}I") for n in range(33)]


def pack_tensor(array: np.ndarray[Any, Any]) -> bytes:
    """u8 dtype code, u32 ndim, u32 dims, raw C-order little-endian bytes."""
    code = CODE_BY_DTYPE.get(array.dtype)
    if code is None:  # a big-endian or unusual dtype: let the table convert it
        t = tensor.encode(array)
        array, code = np.frombuffer(t.data, t.dtype.numpy).reshape(t.shape), t.dtype.code
    return TENSOR_HEADERS[array.ndim].pack(code, array.ndim, *array.shape) + array.tobytes()


#: A one-dimensional tensor's field: the field's length, dtype code, ndim (1), its length.
_COLUMN_HEADER = struct.Struct("<IBII")


def pack_column(values: object, dtype: np.dtype[Any]) -> bytes:
    """``pack_field(pack_tensor(np.asarray(values, dtype)))``, the same bytes, for the
    per-copy columns of a vector step (rewards, terminations, truncations): a one-dimensional
    array of a table dtype gets its header from one struct. ``dtype`` must be in the table."""
    array = np.asarray(values, dtype)
    if array.ndim != 1:
        return pack_field(pack_tensor(array))
    data = array.tobytes()
    return _COLUMN_HEADER.pack(9 + len(data), CODE_BY_DTYPE[dtype], 1, len(array)) + data


def unpack_tensor(
    raw: bytes | bytearray | memoryview, pos: int = 0
) -> tuple[np.ndarray[Any, Any], int]:
    """The inverse of :func:`pack_tensor`: (a writable array, end offset)."""
    if len(raw) < pos + 5:
        raise ProtocolError("tensor header is truncated")
    dtype = DTYPE_BY_CODE.get(raw[pos])
    if dtype is None:
        tensor.dtype_by_code(raw[pos])  # raises the table's error
    ndim = U32.unpack_from(raw, pos + 1)[0]
    if ndim > 32 or len(raw) < pos + 5 + 4 * ndim:
        raise ProtocolError(f"tensor header with {ndim} dimensions is truncated or too deep")
    shape = TENSOR_HEADERS[ndim].unpack_from(raw, pos)[2:]
    start = pos + 5 + 4 * ndim
    count = 1
    for n in shape:
        count *= n
    assert dtype is not None
    end = start + count * dtype.itemsize
    if len(raw) < end:
        raise ProtocolError(f"tensor {dtype.name}{list(shape)} needs {end - start} bytes of data")
    # one call, over a copy of the data of its own (aligned and writable)
    array = np.ndarray(shape, dtype, bytearray(raw[start:end]))
    return array, end
