"""gym-socket (seed 000): a sans-IO codec for both ends of the binary TCP protocol.

Feed received bytes with ``receive_data`` (``b""`` means EOF), take events with
``next_event`` (``NEED_DATA`` when a packet is incomplete), and turn replies or requests into
bytes with ``send_*``. Nothing here touches a socket.

The seed's wire format is kept byte for byte for clients that send handshake flags 0. The flag
bits are our extensions (documented in ``docs/gym-socket.md``):

- ``ERRORS`` (0x01): every command gets a reply that starts with a status byte: 0 and the usual
  payload, or 1 and an error string, after which the session goes on.
- ``MONITOR_REPLY`` (0x02): the Monitor packet carries a ``video`` byte after ``force`` and is
  answered with an error string ("" = ok), as the Go client of gym-socket's later revision does.
- ``EXTENDED`` (0x04): Reset-with-options (packet 7), Step-with-truncation (packet 8), typed
  tensor observations (type 2) and actions (type 1), and envwire's exact space descriptions.
"""

from __future__ import annotations

import json
import struct
from collections import deque
from dataclasses import dataclass
from enum import IntEnum, IntFlag
from typing import Any, Final

import numpy as np
from gymnasium.spaces import Discrete

from envwire import infojson, spacecodec, tensor
from envwire import messages as m
from envwire.errors import (
    EnvwireError,
    InvalidActionError,
    ProtocolError,
    RemoteError,
    UsageError,
    error_class_for_code,
)

__all__ = [
    "MAX_FIELD",
    "NEED_DATA",
    "ClientConnection",
    "Flags",
    "Handshake",
    "HandshakeReply",
    "Invalid",
    "Packet",
    "ServerConnection",
    "json_default",
]

MAX_FIELD: Final = 256 * 1024 * 1024  # no string or array field may exceed 256 MiB


class _NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


#: Returned by ``next_event`` when more bytes are needed.
NEED_DATA: Final = _NeedData()


class Flags(IntFlag):
    """Handshake flag bits (the seed sends 0)."""

    ERRORS = 0x01
    MONITOR_REPLY = 0x02
    EXTENDED = 0x04
    VECTOR = 0x08


KNOWN_FLAGS: Final = Flags.ERRORS | Flags.MONITOR_REPLY | Flags.EXTENDED | Flags.VECTOR


class Packet(IntEnum):
    """Command packet types: 0-6 are the seed's, 7-8 are the EXTENDED flag's."""

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


_OBS_JSON, _OBS_BYTES, _OBS_TENSOR = 0, 1, 2
_ACT_JSON, _ACT_TENSOR = 0, 1
_OK, _ERROR = 0, 1

_U8 = struct.Struct("<B")
_U32 = struct.Struct("<I")
_F64 = struct.Struct("<d")
_STEP_EX_TAIL = struct.Struct("<d??")
_STEP_EX_TAIL_INFO = struct.Struct("<d??I")


@dataclass(frozen=True, slots=True)
class Handshake:
    """The client's opening: flags and the env it wants ('' = no env)."""

    flags: Flags
    env_name: str
    vector: dict[str, Any] | None = None  # VECTOR: {"num_envs", "autoreset_mode", "workers"}


@dataclass(frozen=True, slots=True)
class HandshakeReply:
    """The server's answer to the handshake: '' means the session is open."""

    error: str


@dataclass(frozen=True, slots=True)
class Invalid:
    """A well-framed request the server must refuse (bad action, unknown packet, ...)."""

    error: EnvwireError


json_default = infojson.plain_default


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), default=json_default).encode()


def _field(data: bytes) -> bytes:
    return _U32.pack(len(data)) + data


class _Buffer:
    """Received bytes, read by absolute offsets so a short packet is retried from its start."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.eof = False

    def u8(self, pos: int) -> int | None:
        return self.data[pos] if pos < len(self.data) else None

    def u32(self, pos: int) -> int | None:
        if pos + 4 > len(self.data):
            return None
        return int(_U32.unpack_from(self.data, pos)[0])

    def field(self, pos: int) -> tuple[bytes, int] | None:
        """A length-prefixed field at ``pos``: (bytes, next position), or None if incomplete."""
        size = self.u32(pos)
        if size is None:
            return None
        if size > MAX_FIELD:
            raise ProtocolError(f"field of {size} bytes exceeds the {MAX_FIELD}-byte limit")
        end = pos + 4 + size
        if end > len(self.data):
            return None
        return bytes(self.data[pos + 4 : end]), end


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"{what} is not valid UTF-8: {exc}") from None


class _Side:
    """What both ends share: the buffer, flags, spaces and the EOF rule."""

    def __init__(self) -> None:
        self._buf = _Buffer()
        self._set_flags(Flags(0))
        self.action_space: Any = None
        self.observation_space: Any = None
        self._int_actions = False

    def _set_flags(self, flags: Flags) -> None:
        # Plain bools: IntFlag arithmetic costs a microsecond per test on the hot path.
        self.flags = flags
        self._errors = bool(flags & Flags.ERRORS)
        self._extended = bool(flags & Flags.EXTENDED)
        self._vector = bool(flags & Flags.VECTOR)
        if self._vector:
            self._fast_steps = frozenset({int(Packet.VECTOR_STEP)})
        elif self._extended:
            self._fast_steps = frozenset({int(Packet.STEP), int(Packet.STEP_EX)})
        else:
            self._fast_steps = frozenset({int(Packet.STEP)})

    def set_spaces(self, action_space: Any, observation_space: Any) -> None:
        """Tell the codec the env's spaces (needed to decode actions/observations)."""
        self.action_space, self.observation_space = action_space, observation_space
        # Discrete(int64) actions are by far the most common: they skip the JSON machinery.
        self._int_actions = isinstance(action_space, Discrete) and action_space.dtype == np.int64

    def receive_data(self, data: bytes) -> None:
        """Feed bytes from the peer; ``b""`` means the peer closed its side."""
        if data:
            self._buf.data += data
        else:
            self._buf.eof = True

    def _consume(self, end: int) -> None:
        del self._buf.data[:end]

    def _incomplete(self) -> _NeedData:
        if self._buf.eof and self._buf.data:
            raise ProtocolError(f"connection closed inside a packet ({len(self._buf.data)} bytes)")
        return NEED_DATA

    @property
    def buffered(self) -> int:
        """How many received bytes wait to be parsed."""
        return len(self._buf.data)

    @property
    def closed(self) -> bool:
        """True when the peer closed and every complete packet has been read."""
        return self._buf.eof and not self._buf.data


class ServerConnection(_Side):
    """The server's end: parses the handshake and commands, encodes replies.

    Args:
        legacy_monitor_reply: treat flags-0 clients as sending the later Monitor layout (a
            ``video`` byte, answered with an error string), as the Go reference client does.
    """

    def __init__(self, *, legacy_monitor_reply: bool = False) -> None:
        super().__init__()
        self.handshake: Handshake | None = None
        self._legacy_monitor_reply = legacy_monitor_reply
        self._pending: deque[Packet | None] = deque()  # one entry per request awaiting a reply

    @property
    def monitor_reply(self) -> bool:
        """Whether Monitor packets carry a video byte and get a string reply."""
        return bool(self.flags & Flags.MONITOR_REPLY) or self._legacy_monitor_reply

    def next_event(self) -> Handshake | m.Request | Invalid | _NeedData:
        """The next complete event.

        Raises:
            ProtocolError: the byte stream cannot be parsed any further (fatal: close).
        """
        if self.handshake is None:
            return self._handshake()
        buf = self._buf
        data = buf.data
        if not data:
            return self._incomplete()
        kind = data[0]
        if (
            kind in self._fast_steps and len(data) >= 6 and self.action_space is not None
        ):  # the hot path: one step, parsed inline
            end = 6 + _U32.unpack_from(data, 2)[0]
            if len(data) >= end and end - 6 <= MAX_FIELD:
                action_kind, raw = data[1], bytes(data[6:end])
                del data[:end]
                self._pending.append(_PACKETS[kind])
                try:
                    return m.Step(self._decode_action(action_kind, raw))
                except EnvwireError as exc:
                    return Invalid(InvalidActionError(str(exc)))
        packet = _PACKETS.get(kind)
        if packet is None:
            self._consume(1)
            self._pending.append(None)
            return Invalid(
                ProtocolError(f"unknown packet type {kind} (known: 0-6, 7-8 extended, 9-10 vector)")
            )
        refusal = self._refusal(packet)
        if refusal is not None:
            self._consume(1)
            self._pending.append(None)
            return Invalid(ProtocolError(refusal))
        parsed = _PARSERS[packet](self, 1)
        if parsed is None:
            return self._incomplete()
        event, end = parsed
        self._consume(end)
        self._pending.append(packet)
        return event  # type: ignore[no-any-return]

    def _refusal(self, packet: Packet) -> str | None:
        """Why this connection's flags rule the packet out, if they do."""
        if packet in _VECTOR_PACKETS:
            return None if self._vector else f"packet {int(packet)} needs the VECTOR handshake flag"
        if self._vector and packet in _EPISODE_PACKETS:
            return f"packet {int(packet)} steps one env: a vector session uses packets 9 and 10"
        if packet >= Packet.RESET_EX and not self._extended:
            return f"packet {int(packet)} needs the EXTENDED handshake flag"
        return None

    def _handshake(self) -> Handshake | _NeedData:
        buf = self._buf
        flags = buf.u8(0)
        name = buf.field(1) if flags is not None else None
        if flags is None or name is None:
            return self._incomplete()
        end, vector = name[1], None
        if flags & Flags.VECTOR:
            options = buf.field(end)
            if options is None:
                return self._incomplete()
            end = options[1]
            try:
                vector = json.loads(options[0])
            except ValueError as exc:
                raise ProtocolError(f"vector options are not JSON: {exc}") from None
            if not isinstance(vector, dict):
                raise ProtocolError("vector options must be a JSON object")
        self._consume(end)
        self._set_flags(Flags(flags & KNOWN_FLAGS))
        self.handshake = Handshake(Flags(flags), _text(name[0], "env name"), vector)
        return self.handshake

    def unknown_flags(self) -> int:
        """Flag bits the client set that this server does not know."""
        return int(self.handshake.flags) & ~int(KNOWN_FLAGS) & 0xFF if self.handshake else 0

    def send_handshake_reply(self, error: str) -> bytes:
        """The handshake answer ('' = ok; anything else: close after sending it)."""
        return _field(error.encode())

    # -- parsing of each packet: (event, end offset) or None when incomplete ---------------

    def _parse_action(self, pos: int) -> tuple[Any, int] | None:
        kind = self._buf.u8(pos)
        body = self._buf.field(pos + 1) if kind is not None else None
        if kind is None or body is None:
            return None
        raw, end = body
        try:
            return self._decode_action(kind, raw), end
        except EnvwireError as exc:
            return Invalid(InvalidActionError(str(exc))), end

    def _decode_action(self, kind: int, raw: bytes) -> Any:
        if self.action_space is None:
            raise UsageError("this session has no env, so it takes no actions")
        if kind == _ACT_JSON:
            if self._int_actions and raw.isdigit() and len(raw) < 18:
                return np.int64(int(raw))
            try:
                value = json.loads(raw)
            except ValueError as exc:
                raise InvalidActionError(f"action is not valid JSON: {exc}") from None
            return spacecodec.from_json(self.action_space, value)
        if kind == _ACT_TENSOR and self._extended:
            return _unpack_tensor(raw)[0]
        raise InvalidActionError(f"unknown action type {kind} (known: 0 JSON, 1 tensor)")

    def _p_step(self, pos: int) -> tuple[Any, int] | None:
        parsed = self._parse_action(pos)
        if parsed is None:
            return None
        action, end = parsed
        return (action if isinstance(action, Invalid) else m.Step(action)), end

    def _p_reset(self, pos: int) -> tuple[Any, int]:
        return m.Reset(), pos

    def _p_reset_ex(self, pos: int) -> tuple[Any, int] | None:
        body = self._buf.field(pos)
        if body is None:
            return None
        raw, end = body
        try:
            opts = json.loads(raw) if raw else {}
            if not isinstance(opts, dict):
                raise TypeError("expected a JSON object")
            options = opts.get("options")
            if options is not None and not isinstance(options, dict):
                raise TypeError("'options' must be an object or null")
            return m.Reset(seed=opts.get("seed"), options=options), end
        except (ValueError, TypeError) as exc:
            return Invalid(ProtocolError(f"reset options: {exc}")), end

    def _p_get_space(self, pos: int) -> tuple[Any, int] | None:
        which = self._buf.u8(pos)
        if which is None:
            return None
        if which not in (0, 1):
            return Invalid(
                ProtocolError(f"space id {which} is neither 0 (action) nor 1 (observation)")
            ), pos + 1
        return m.GetSpace(m.SpaceKind(which)), pos + 1

    def _p_sample(self, pos: int) -> tuple[Any, int]:
        return m.SampleAction(), pos

    def _p_monitor(self, pos: int) -> tuple[Any, int] | None:
        buf = self._buf
        resume, force = buf.u8(pos), buf.u8(pos + 1)
        pos += 2
        video = 1
        if self.monitor_reply:
            video_byte = buf.u8(pos)
            if video_byte is None:
                return None
            video, pos = video_byte, pos + 1
        directory = buf.field(pos)
        if resume is None or force is None or directory is None:
            return None
        path = _text(directory[0], "monitor directory")
        return m.Monitor(
            path, resume=bool(resume), force=bool(force), video=bool(video)
        ), directory[1]

    def _p_render(self, pos: int) -> tuple[Any, int]:
        return m.Render(), pos

    def _p_upload(self, pos: int) -> tuple[Any, int] | None:
        fields = []
        for _ in range(3):
            got = self._buf.field(pos)
            if got is None:
                return None
            fields.append(_text(got[0], "upload field"))
            pos = got[1]
        return m.Upload(*fields), pos

    # -- replies ---------------------------------------------------------------------------

    def send_reply(self, reply: m.Reply) -> bytes:
        """Encode the reply to the oldest request still waiting for one.

        If encoding fails (an EnvwireError), the request still waits: answer it with
        :meth:`send_error`.
        """
        packet = self._pending[0]
        if packet is Packet.STEP_EX and type(reply) is m.StepReply:
            body: bytes | None = (
                self._observation(reply.observation)
                + _STEP_EX_TAIL.pack(reply.reward, reply.terminated, reply.truncated)
                + _info(reply.info, self._extended)
            )
        else:
            body = self._reply_body(packet, reply)
        self._pending.popleft()
        if self._errors:
            return b"\x00" + body if body is not None else b"\x00"
        return body or b""

    def send_error(self, error: EnvwireError) -> bytes | None:
        """Encode an error for the oldest waiting request.

        Returns None when the client has no way to hear it (flags 0): the front end must then
        close the connection, as the original server did.
        """
        packet = self._pending.popleft()
        message = str(error).encode()
        if self._errors:
            return b"\x01" + _field(message) + _field(error.code.encode())
        if packet is Packet.UPLOAD or (packet is Packet.MONITOR and self.monitor_reply):
            return _field(message)
        return None

    def _reply_body(self, packet: Packet | None, reply: m.Reply) -> bytes | None:
        match packet, reply:
            case Packet.RESET, m.ResetReply(observation=obs):
                return self._observation(obs)
            case Packet.RESET_EX, m.ResetReply(observation=obs, info=info):
                return self._observation(obs) + _info(info, self._extended)
            case Packet.STEP, m.StepReply() as r:
                return b"".join(
                    (
                        self._observation(r.observation),
                        _F64.pack(r.reward),
                        b"\x01" if r.done else b"\x00",
                        _info(r.info, self._extended),
                    )
                )
            case Packet.STEP_EX, m.StepReply() as r:
                return b"".join(
                    (
                        self._observation(r.observation),
                        _F64.pack(r.reward),
                        b"\x01" if r.terminated else b"\x00",
                        b"\x01" if r.truncated else b"\x00",
                        _info(r.info, self._extended),
                    )
                )
            case Packet.VECTOR_RESET, m.ResetReply(observation=obs, info=info):
                return self._batch(obs) + _info(info, self._extended)
            case Packet.VECTOR_STEP, m.VectorStepReply() as v:
                return b"".join(
                    (
                        self._batch(v.observations),
                        _field(_pack_tensor(np.asarray(v.rewards, np.float64))),
                        _field(_pack_tensor(np.asarray(v.terminations, np.bool_))),
                        _field(_pack_tensor(np.asarray(v.truncations, np.bool_))),
                        _info(v.infos, self._extended),
                    )
                )
            case Packet.GET_SPACE, m.SpaceReply(space=space):
                style: spacecodec.Style = "envwire" if self._extended else "gym-socket"
                return _field(_dumps(spacecodec.describe(space, style=style)))
            case Packet.SAMPLE_ACTION, m.SampleReply(action=action):
                return b"\x00" + _field(_dumps(spacecodec.to_json(self.action_space, action)))
            case Packet.MONITOR, m.MonitorReply():
                return _field(b"") if self.monitor_reply else None
            case Packet.RENDER, m.RenderReply():
                return None
        raise ProtocolError(f"cannot answer packet {packet!r} with {type(reply).__name__}")

    def _batch(self, obs: Any) -> bytes:
        """A batch of observations: a tensor when it is one array, else JSON."""
        if isinstance(obs, np.ndarray) and obs.dtype in _CODE_BY_DTYPE:
            return b"\x02" + _field(_pack_tensor(obs))
        return b"\x00" + _field(_dumps(spacecodec.to_json(self.observation_space, obs)))

    def _observation(self, obs: Any) -> bytes:
        if isinstance(obs, np.ndarray):
            if obs.dtype == np.uint8:
                data = np.ascontiguousarray(obs)
                dims = b"".join(_U32.pack(n) for n in data.shape)
                return b"\x01" + _field(_U32.pack(data.ndim) + dims + data.tobytes())
            if self._extended and obs.dtype in _CODE_BY_DTYPE:
                return b"\x02" + _field(_pack_tensor(obs))
        return b"\x00" + _field(_dumps(spacecodec.to_json(self.observation_space, obs)))


_VECTOR_PACKETS = frozenset({Packet.VECTOR_RESET, Packet.VECTOR_STEP})
_EPISODE_PACKETS = frozenset({Packet.RESET, Packet.STEP, Packet.RESET_EX, Packet.STEP_EX})

_PARSERS = {
    Packet.RESET: ServerConnection._p_reset,
    Packet.STEP: ServerConnection._p_step,
    Packet.GET_SPACE: ServerConnection._p_get_space,
    Packet.SAMPLE_ACTION: ServerConnection._p_sample,
    Packet.MONITOR: ServerConnection._p_monitor,
    Packet.RENDER: ServerConnection._p_render,
    Packet.UPLOAD: ServerConnection._p_upload,
    Packet.RESET_EX: ServerConnection._p_reset_ex,
    Packet.STEP_EX: ServerConnection._p_step,
    Packet.VECTOR_RESET: ServerConnection._p_reset_ex,
    Packet.VECTOR_STEP: ServerConnection._p_step,
}

_TENSOR_NAMES = frozenset(d.name for d in tensor.DTYPES)
_PACKETS = {int(p): p for p in Packet}
_STEP_BYTES = {p: _U8.pack(p) for p in (Packet.STEP, Packet.STEP_EX)}
_EMPTY_INFO = _field(b"{}")


def _info(info: dict[str, Any], typed: bool) -> bytes:
    return _field(infojson.dumps(info, typed=typed)) if info else _EMPTY_INFO


_CODE_BY_DTYPE = {d.numpy: d.code for d in tensor.DTYPES}
_DTYPE_BY_CODE = {d.code: d.numpy for d in tensor.DTYPES}
_TENSOR_HEADERS = [struct.Struct(f"<BI{n}I") for n in range(33)]


def _pack_tensor(array: np.ndarray[Any, Any]) -> bytes:
    """u8 dtype code, u32 ndim, u32 dims, raw C-order little-endian bytes."""
    code = _CODE_BY_DTYPE.get(array.dtype)
    if code is None:  # a big-endian or unusual dtype: let the table convert it
        t = tensor.encode(array)
        array, code = np.frombuffer(t.data, t.dtype.numpy).reshape(t.shape), t.dtype.code
    return _TENSOR_HEADERS[array.ndim].pack(code, array.ndim, *array.shape) + array.tobytes()


def _unpack_tensor(raw: bytes, pos: int = 0) -> tuple[np.ndarray[Any, Any], int]:
    """The inverse of :func:`_pack_tensor`: (a writable array, end offset)."""
    if len(raw) < pos + 5:
        raise ProtocolError("tensor header is truncated")
    dtype = _DTYPE_BY_CODE.get(raw[pos])
    if dtype is None:
        tensor.dtype_by_code(raw[pos])  # raises the table's error
    ndim = _U32.unpack_from(raw, pos + 1)[0]
    if ndim > 32 or len(raw) < pos + 5 + 4 * ndim:
        raise ProtocolError(f"tensor header with {ndim} dimensions is truncated or too deep")
    shape = _TENSOR_HEADERS[ndim].unpack_from(raw, pos)[2:]
    start = pos + 5 + 4 * ndim
    count = 1
    for n in shape:
        count *= n
    assert dtype is not None
    end = start + count * dtype.itemsize
    if len(raw) < end:
        raise ProtocolError(f"tensor {dtype.name}{list(shape)} needs {end - start} bytes of data")
    array = np.frombuffer(raw, dtype, count, start).reshape(shape).copy()
    return array, end


class ClientConnection(_Side):
    """The client's end: encodes the handshake and commands, parses replies in order.

    Requests may be pipelined: each ``send_*`` queues the reply it expects, and
    ``next_event`` returns replies in the order the requests were sent.
    """

    def __init__(self, flags: Flags = Flags.ERRORS | Flags.MONITOR_REPLY | Flags.EXTENDED) -> None:
        super().__init__()
        self._set_flags(flags)
        self._expect: deque[Packet | str] = deque()

    def send_handshake(self, env_name: str, vector: dict[str, Any] | None = None) -> bytes:
        """The opening bytes; the first event will be a :class:`HandshakeReply`.

        With the VECTOR flag, ``vector`` is ``{"num_envs": N, "autoreset_mode": ..., "workers":
        K}``, and Reset/Step then travel as packets 9 and 10, carrying batches.
        """
        self._expect.append("handshake")
        opening = _U8.pack(int(self.flags)) + _field(env_name.encode())
        if self._vector:
            opening += _field(_dumps(vector or {}))
        return opening

    def send_request(self, request: m.Request) -> bytes:
        """Encode a request; its reply arrives through ``next_event`` in order."""
        extended = self._extended
        if self._vector and type(request) in (m.Step, m.Reset):
            return self._vector_request(request)
        if type(request) is m.Step:
            packet = Packet.STEP_EX if extended else Packet.STEP
            self._expect.append(packet)
            return _STEP_BYTES[packet] + self._action(request.action)
        match request:
            case m.Reset(seed=seed, options=options) if extended:
                packet, body = Packet.RESET_EX, _field(_dumps({"seed": seed, "options": options}))
            case m.Reset(seed=None, options=None):
                packet, body = Packet.RESET, b""
            case m.Reset():
                raise UsageError("seeded resets need the EXTENDED handshake flag")
            case m.Step(action=action):
                packet = Packet.STEP_EX if extended else Packet.STEP
                body = self._action(action)
            case m.GetSpace(which=which):
                packet, body = Packet.GET_SPACE, _U8.pack(int(which))
            case m.SampleAction():
                packet, body = Packet.SAMPLE_ACTION, b""
            case m.Monitor() as mon:
                packet = Packet.MONITOR
                video = _U8.pack(mon.video) if self.flags & Flags.MONITOR_REPLY else b""
                body = bytes([mon.resume, mon.force]) + video + _field(mon.directory.encode())
            case m.Render():
                packet, body = Packet.RENDER, b""
            case m.Upload() as up:
                packet = Packet.UPLOAD
                body = b"".join(
                    _field(s.encode()) for s in (up.directory, up.api_key, up.algorithm_id)
                )
            case _:
                raise UsageError(f"gym-socket has no packet for {type(request).__name__}")
        self._expect.append(packet)
        return _U8.pack(packet) + body

    def _vector_request(self, request: m.Request) -> bytes:
        if isinstance(request, m.Reset):
            seed = request.seed
            if isinstance(seed, np.ndarray | tuple):
                seed = [None if s is None else int(s) for s in seed]
            body = _field(_dumps({"seed": seed, "options": request.options}))
            packet = Packet.VECTOR_RESET
        else:
            assert isinstance(request, m.Step)
            packet, body = Packet.VECTOR_STEP, self._action(request.action)
        self._expect.append(packet)
        return _U8.pack(packet) + body

    def _action(self, action: Any) -> bytes:
        if self._int_actions and isinstance(action, int | np.integer):
            return b"\x00" + _field(b"%d" % action)
        if self._extended and isinstance(action, np.ndarray) and action.dtype in _CODE_BY_DTYPE:
            return b"\x01" + _field(_pack_tensor(action))
        return b"\x00" + _field(_dumps(spacecodec.to_json(self.action_space, action)))

    def next_event(self) -> HandshakeReply | m.Reply | EnvwireError | _NeedData:
        """The next reply, in request order; an error reply comes as an exception instance.

        Raises:
            ProtocolError: the server's bytes cannot be parsed.
        """
        if not self._expect:
            if self._buf.data:
                raise ProtocolError(f"{len(self._buf.data)} unexpected bytes from the server")
            return self._incomplete()
        expect = self._expect[0]
        parsed = self._parse_step_ex() if expect is Packet.STEP_EX else None
        if parsed is None:
            parsed = self._parse_reply(expect)
        if parsed is None:
            return self._incomplete()
        event, end = parsed
        self._consume(end)
        self._expect.popleft()
        return event  # type: ignore[no-any-return]

    def _parse_step_ex(self) -> tuple[Any, int] | None:
        """The common case, parsed in one go: an OK extended step reply with a tensor."""
        data = self._buf.data
        if not self._errors or len(data) < 6 or data[0] != _OK or data[1] != _OBS_TENSOR:
            return None
        size = _U32.unpack_from(data, 2)[0]
        tail = 6 + size
        if len(data) < tail + 14:
            return None
        reward, terminated, truncated, info_size = _STEP_EX_TAIL_INFO.unpack_from(data, tail)
        end = tail + 14 + info_size
        if len(data) < end:
            return None
        obs = _unpack_tensor(bytes(data[6:tail]))[0]
        info_raw = data[tail + 14 : end]
        info = infojson.loads(bytes(info_raw))
        return m.StepReply(obs, reward, terminated, truncated, info), end

    def _parse_reply(self, expect: Packet | str) -> tuple[Any, int] | None:
        buf = self._buf
        if expect == "handshake":
            got = buf.field(0)
            return None if got is None else (HandshakeReply(_text(got[0], "error")), got[1])
        pos = 0
        if self._errors:
            status = buf.u8(0)
            if status is None:
                return None
            if status == _ERROR:
                got = buf.field(1)
                code = buf.field(got[1]) if got is not None else None
                if got is None or code is None:
                    return None
                return _remote_error(_text(got[0], "error"), _text(code[0], "code")), code[1]
            if status != _OK:
                raise ProtocolError(f"unknown reply status {status}")
            pos = 1
        return self._parse_body(expect, pos)

    def _parse_body(self, expect: Packet | str, pos: int) -> tuple[Any, int] | None:
        buf = self._buf
        match expect:
            case Packet.RESET:
                obs = self._read_observation(pos)
                return None if obs is None else (m.ResetReply(obs[0], {}), obs[1])
            case Packet.RESET_EX:
                obs = self._read_observation(pos)
                info = buf.field(obs[1]) if obs is not None else None
                if obs is None or info is None:
                    return None
                return m.ResetReply(obs[0], infojson.loads(info[0])), info[1]
            case Packet.STEP | Packet.STEP_EX:
                obs = self._read_observation(pos)
                if obs is None:
                    return None
                flag_count = 2 if expect is Packet.STEP_EX else 1
                end = obs[1] + 8 + flag_count
                if len(buf.data) < end:
                    return None
                reward = _F64.unpack_from(buf.data, obs[1])[0]
                flags = buf.data[obs[1] + 8 : end]
                info = buf.field(end)
                if info is None:
                    return None
                terminated, truncated = bool(flags[0]), bool(flags[1]) if flag_count == 2 else False
                return m.StepReply(
                    obs[0], reward, terminated, truncated, infojson.loads(info[0])
                ), info[1]
            case Packet.VECTOR_RESET:
                obs = self._read_observation(pos)
                info = buf.field(obs[1]) if obs is not None else None
                if obs is None or info is None:
                    return None
                return m.ResetReply(obs[0], infojson.loads(info[0])), info[1]
            case Packet.VECTOR_STEP:
                return self._parse_vector_step(pos)
            case Packet.GET_SPACE:
                got = buf.field(pos)
                if got is None:
                    return None
                return m.SpaceReply(spacecodec.from_description(json.loads(got[0]))), got[1]
            case Packet.SAMPLE_ACTION:
                got = buf.field(pos + 1) if buf.u8(pos) is not None else None
                if got is None:
                    return None
                return m.SampleReply(
                    spacecodec.from_json(self.action_space, json.loads(got[0]))
                ), got[1]
            case Packet.MONITOR if self.flags & Flags.MONITOR_REPLY:
                got = buf.field(pos)
                if got is None:
                    return None
                error = _text(got[0], "error")
                return (_remote_error(error) if error else m.MonitorReply("")), got[1]
            case Packet.MONITOR:
                return m.MonitorReply(""), pos
            case Packet.RENDER:
                return m.RenderReply(None), pos
            case Packet.UPLOAD:
                got = buf.field(pos)
                if got is None:
                    return None
                error = _text(got[0], "error")
                return (_remote_error(error) if error else m.Ok()), got[1]
        raise ProtocolError(f"no reply format for {expect!r}")  # pragma: no cover

    def _parse_vector_step(self, pos: int) -> tuple[Any, int] | None:
        obs = self._read_observation(pos)
        if obs is None:
            return None
        arrays, end = [], obs[1]
        for _ in range(3):
            got = self._buf.field(end)
            if got is None:
                return None
            arrays.append(_unpack_tensor(got[0])[0])
            end = got[1]
        info = self._buf.field(end)
        if info is None:
            return None
        infos = infojson.loads(info[0])
        return m.VectorStepReply(obs[0], arrays[0], arrays[1], arrays[2], infos), info[1]

    def _read_observation(self, pos: int) -> tuple[Any, int] | None:
        kind = self._buf.u8(pos)
        got = self._buf.field(pos + 1) if kind is not None else None
        if kind is None or got is None:
            return None
        raw, end = got
        if kind == _OBS_JSON:
            return spacecodec.from_json(self.observation_space, json.loads(raw)), end
        if kind == _OBS_BYTES:
            ndim = _U32.unpack_from(raw, 0)[0]
            shape = struct.unpack_from(f"<{ndim}I", raw, 4)
            data = np.frombuffer(raw, np.uint8, offset=4 + 4 * ndim).reshape(shape).copy()
            return data, end
        if kind == _OBS_TENSOR:
            return _unpack_tensor(raw)[0], end
        raise ProtocolError(f"unknown observation type {kind}")


def _remote_error(message: str, code: str | None = None) -> EnvwireError:
    """The error the server reported, as the envwire error class its code names."""
    cls = error_class_for_code(code) if code else RemoteError
    if cls is RemoteError or not issubclass(cls, EnvwireError):
        return RemoteError(message, code)
    return cls(message)
