"""gym-socket: the server's end, sans-IO (handshake and commands in, replies out).

Every field a client sends has a size limit by kind, checked as soon as its length arrives
(before its bytes are buffered); a field over its limit is a :class:`TooLargeError` that ends
the connection (``docs/protocols/gym-socket.md``, "Limits"). JSON fields may nest at most
:data:`envwire.jsonio.MAX_DEPTH` levels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import numpy as np
from gymnasium.spaces import Box, Space

from envwire import jsonio, spacecodec
from envwire import messages as m
from envwire.errors import (
    EnvwireError,
    InvalidActionError,
    ProtocolError,
    TooLargeError,
    UsageError,
)
from envwire.protocols.gymsocket.packets import (
    ACT_JSON,
    ACT_TENSOR,
    KNOWN_FLAGS,
    MAX_HANDSHAKE_TOKEN,
    MAX_MONITOR_DIR,
    MONITOR_LAYOUTS,
    U32,
    Flags,
    Handshake,
    Invalid,
    MonitorLayout,
    NeedData,
    Packet,
    Upload,
    decode_text,
    json_bytes,
    monitor_has_video,
    pack_field,
    unpack_tensor,
)
from envwire.protocols.gymsocket.replies import GATHER_MIN, ReplyWriter
from envwire.tensor import NDARRAY

__all__ = [
    "DEFAULT_MAX_ACTION",
    "GATHER_MIN",
    "MAX_ENV_NAME",
    "MAX_RESET_OPTIONS",
    "MAX_UPLOAD_FIELD",
    "MAX_VECTOR_OPTIONS",
    "ServerConnection",
]

#: The largest action field (packets 1, 8 and 10) by default: the server's max_message_size.
DEFAULT_MAX_ACTION: Final = 16 * 1024 * 1024
#: The largest env name in a handshake.
MAX_ENV_NAME: Final = 4096
#: The largest VECTOR handshake options (JSON).
MAX_VECTOR_OPTIONS: Final = 64 * 1024
#: The largest Reset options (packets 7 and 9, JSON).
MAX_RESET_OPTIONS: Final = 1024 * 1024
#: The largest field of an Upload packet (directory, API key, algorithm id).
MAX_UPLOAD_FIELD: Final = 64 * 1024

#: What a packet parser returns: the event and the end offset (None: the packet is incomplete).
_Parsed = tuple[m.Request | Upload | Invalid, int]


#: The first bytes of what other protocols' clients send first: an HTTP/1.1 request line (its
#: method), HTTP/2's connection preface (gRPC), a TLS ClientHello record.
_HTTP_METHODS = (b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC", b"CONN", b"TRAC")


def _stranger(head: bytes | bytearray) -> str:
    """What a refused handshake's first bytes were, when another protocol's client sent them
    (for the refusal and the server's log); "" when they are no protocol envwire knows."""
    if bytes(head[:4]) == b"PRI ":
        return ": that is HTTP/2's preface (a gRPC client?), not a gym-socket handshake"
    if bytes(head[:4]) in _HTTP_METHODS:
        return ": that is an HTTP request (an HTTP client?), not a gym-socket handshake"
    if head[:1] == b"\x16" and head[1:2] == b"\x03":
        return ": that is a TLS ClientHello (a TLS client?), and this port does not speak TLS"
    return ""


class ServerConnection(ReplyWriter):
    """The server's end: parses the handshake and commands, encodes replies.

    Args:
        monitor_layout: how to read Monitor packets from clients without the MONITOR_REPLY
            flag: ``auto`` (the default) tells the original layout from the later one by the
            bytes (:func:`~.wire.monitor_has_video`); ``seed`` or ``video`` forces one. A packet
            in the later layout carries a ``video`` byte and is answered with an error string.

        max_action: the largest action field, in bytes (:data:`DEFAULT_MAX_ACTION`).

    Raises:
        UsageError: an unknown ``monitor_layout``.
    """

    def __init__(
        self, *, monitor_layout: MonitorLayout | str = "auto", max_action: int = DEFAULT_MAX_ACTION
    ) -> None:
        super().__init__()
        if monitor_layout not in MONITOR_LAYOUTS:
            raise UsageError(
                f"monitor_layout must be one of {MONITOR_LAYOUTS}, not {monitor_layout!r}"
            )
        self.max_action = max_action
        self.handshake: Handshake | None = None
        #: The requests of the packets :meth:`lean_step` saw before, by their bytes.
        self._lean: dict[bytes, tuple[Packet, m.Step | m.Reset]] = {}
        #: The layout of the last step packet whose tensor action filled it, which
        #: :meth:`lean_step` reads the next steps of without parsing them: the packet's
        #: length, its bytes up to the tensor's data (its head, the tensor's header), the
        #: tensor's shape and dtype, where its data starts, the packet. A length no packet has,
        #: before the first.
        self._tensor: tuple[int, bytes, tuple[int, ...], np.dtype[Any], int, Packet] = (
            -1, b"", (), np.dtype(np.uint8), 0, Packet.VECTOR_STEP
        )  # fmt: skip
        self.monitor_layout = monitor_layout

    def set_spaces(self, action_space: Space[Any], observation_space: Space[Any]) -> None:
        """Tell the codec the env's spaces (needed to decode actions/observations)."""
        super().set_spaces(action_space, observation_space)
        box = type(observation_space) is Box and observation_space.dtype.kind in "iuf"
        self._json_box = observation_space.dtype if box else None
        # The seed's lean step reply: a numeric Box's observations but byte ones (those
        # may be gathered from the array's memory instead).
        self._seed_box = None if not box or self._json_box == np.uint8 else self._json_box

    def next_event(self) -> Handshake | m.Request | Upload | Invalid | NeedData:
        """The next complete event.

        Raises:
            ProtocolError: the byte stream cannot be parsed any further (fatal: answer with
                :meth:`send_fatal`, then close); :class:`TooLargeError` for a field over its
                limit.
        """
        if self.handshake is None:
            try:
                return self._handshake()
            except TooLargeError as exc:
                raise TooLargeError(f"{exc}{_stranger(self._buf.data)}") from None
        buf = self._buf
        data = buf.data
        if not data:
            return self._incomplete()
        kind = data[0]
        if (
            kind in self._fast_steps and len(data) >= 6 and self.action_space is not None
        ):  # the hot path: one step, parsed inline
            end = 6 + U32.unpack_from(data, 2)[0]
            if len(data) >= end and end - 6 <= self.max_action:
                step = self._step(data, end)
                del data[:end]
                return step
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
        return event

    def lean_step(self, data: bytes) -> m.Step | m.Reset | Invalid | None:
        """``data``, just received, when it is one whole step packet and nothing else, with no
        bytes buffered before it: the step, parsed as :meth:`next_event` parses it, without
        the buffer (the request then waits for its reply as from :meth:`next_event`); the
        same for a reset without a seed or options (the seed's packet 0, or the extended one's
        usual packet 7). None for anything else: feed ``data`` to :meth:`receive_data` and
        read with :meth:`next_event`.

        A packet seen before (the steps of a ``Discrete`` space's integer actions, the usual
        reset) is found whole, with its request (immutable, so shared).
        """
        known = self._lean.get(data)
        if known is not None and not self._buf.data:
            self._pending.append(known[0])
            return known[1]
        tensor = self._tensor
        if len(data) == tensor[0] and data.startswith(tensor[1]) and not self._buf.data:
            # a step of the last tensor action's layout (its packet's head and the tensor's
            # header read before): unpack_tensor's array, over a copy of its own
            self._pending.append(tensor[5])
            step = _new(m.Step)  # m.Step(action), by the slot's own setter
            _SET_ACTION(step, NDARRAY(tensor[2], tensor[3], bytearray(data[tensor[4] :])))
            return step
        if data == _UNSEEDED_PACKET and self._extended and not self._vector and not self._buf.data:
            self._pending.append(Packet.RESET_EX)
            return self._keep(data, Packet.RESET_EX, m.Reset())
        if data == _SEED_RESET and not self._vector and not self._buf.data:  # the seed's reset
            self._pending.append(Packet.RESET)
            return self._keep(data, Packet.RESET, m.Reset())
        if (
            (size := len(data)) < 6
            or self._buf.data
            or (packet := data[0]) not in self._fast_steps
            or self.action_space is None
            or size != 6 + U32.unpack_from(data, 2)[0]
            or size - 6 > self.max_action
        ):
            return None
        # _step(), inlined with _decode_action's integer and tensor cases
        self._pending.append(_PACKETS[packet])
        if data[1] == ACT_TENSOR and self._extended:
            try:
                action, end = unpack_tensor(data, 6)
            except EnvwireError as exc:
                return Invalid(InvalidActionError(str(exc)))
            if end == size:  # the layout for the next steps (see _tensor)
                start = end - action.nbytes
                self._tensor = (
                    size,
                    bytes(data[:start]),
                    action.shape,
                    action.dtype,
                    start,
                    _PACKETS[packet],
                )
            step = _new(m.Step)  # m.Step(action), by the slot's own setter
            _SET_ACTION(step, action)
            return step
        raw = data[6:]
        if data[1] == ACT_JSON and self._int_actions and size < 24 and raw.isdigit():
            return self._keep(data, _PACKETS[packet], m.Step(np.int64(int(raw))))
        try:
            return m.Step(self._decode_action(data[1], raw))
        except EnvwireError as exc:
            return Invalid(InvalidActionError(str(exc)))

    def _keep(self, data: bytes, packet: Packet, request: m.Step | m.Reset) -> m.Step | m.Reset:
        """``request``, kept for :meth:`lean_step` to find by its packet's bytes (up to
        :data:`_LEAN_PACKETS` of them: a ``Discrete`` space's actions)."""
        if type(data) is bytes and len(self._lean) < _LEAN_PACKETS:
            self._lean[data] = (packet, request)
        return request

    def _step(self, data: bytes | bytearray, end: int) -> m.Step | Invalid:
        """The step packet that ends at ``end`` (its action's length already checked)."""
        self._pending.append(_PACKETS[data[0]])
        try:
            return m.Step(self._decode_action(data[1], bytes(data[6:end])))
        except EnvwireError as exc:
            return Invalid(InvalidActionError(str(exc)))

    def _refusal(self, packet: Packet) -> str | None:
        """Why this connection's flags rule the packet out, if they do."""
        if packet in _VECTOR_PACKETS:
            return None if self._vector else f"packet {int(packet)} needs the VECTOR handshake flag"
        if self._vector and packet in _EPISODE_PACKETS:
            return f"packet {int(packet)} steps one env: a vector session uses packets 9 and 10"
        if packet >= Packet.RESET_EX and not self._extended:
            return f"packet {int(packet)} needs the EXTENDED handshake flag"
        return None

    def _handshake(self) -> Handshake | NeedData:
        # Another protocol's first bytes read as flags and a length over its limit: the
        # refusal comes at once, and next_event names what they were.
        buf = self._buf
        flags = buf.u8(0)
        if flags is None:
            return self._incomplete()
        end, token, vector = 1, None, None
        if flags & Flags.AUTH:
            presented = buf.field(end, MAX_HANDSHAKE_TOKEN, "the token")
            if presented is None:
                return self._incomplete()
            token, end = decode_text(presented[0], "the token"), presented[1]
        name = buf.field(end, MAX_ENV_NAME, "the env name")
        if name is None:
            return self._incomplete()
        end = name[1]
        if flags & Flags.VECTOR:
            options = buf.field(end, MAX_VECTOR_OPTIONS, "the vector options")
            if options is None:
                return self._incomplete()
            end = options[1]
            try:
                decoded = jsonio.loads(options[0])
            except ValueError as exc:
                raise ProtocolError(f"vector options are not JSON: {exc}") from None
            if not isinstance(decoded, dict):
                raise ProtocolError("vector options must be a JSON object")
            vector = decoded
        self._consume(end)
        self._set_flags(Flags(flags & KNOWN_FLAGS))
        env_name = decode_text(name[0], "env name")
        self.handshake = Handshake(Flags(flags), env_name, vector, token)
        return self.handshake

    def unknown_flags(self) -> int:
        """Flag bits the client set that this server does not know."""
        return int(self.handshake.flags) & ~int(KNOWN_FLAGS) & 0xFF if self.handshake else 0

    def send_handshake_reply(self, error: str) -> bytes:
        """The handshake answer ('' = ok; anything else: close after sending it)."""
        return pack_field(error.encode())

    def send_fatal(self, error: EnvwireError) -> bytes | None:
        """The last bytes for a client whose stream cannot be parsed further (``next_event``
        raised ``error``): the handshake's answer while the handshake is being read, else an
        error reply to the request being read (ERRORS flag). None when the client has no way
        to hear it (flags 0): the front end just closes, as the original server did.
        """
        if self.handshake is None:
            return self.send_handshake_reply(str(error))
        if self._errors:
            return b"\x01" + pack_field(str(error).encode()) + pack_field(error.code.encode())
        return None

    # -- parsing of each packet: (event, end offset) or None when incomplete ---------------

    def _parse_action(self, pos: int) -> tuple[object, int] | None:
        """(the action, or an :class:`Invalid` refusing it; the end offset)."""
        kind = self._buf.u8(pos)
        body = self._buf.field(pos + 1, self.max_action, "an action") if kind is not None else None
        if kind is None or body is None:
            return None
        raw, end = body
        try:
            return self._decode_action(kind, raw), end
        except EnvwireError as exc:
            return Invalid(InvalidActionError(str(exc))), end

    def _decode_action(self, kind: int, raw: bytes) -> object:
        if self.action_space is None:
            raise UsageError("this session has no env, so it takes no actions")
        if kind == ACT_JSON:
            if self._int_actions and raw.isdigit() and len(raw) < 18:
                return np.int64(int(raw))
            try:
                value = jsonio.loads(raw)
            except ValueError as exc:
                raise InvalidActionError(f"action is not valid JSON: {exc}") from None
            return spacecodec.from_json(self.action_space, value)
        if kind == ACT_TENSOR and self._extended:
            return unpack_tensor(raw)[0]
        raise InvalidActionError(f"unknown action type {kind} (known: 0 JSON, 1 tensor)")

    def _p_step(self, pos: int) -> _Parsed | None:
        parsed = self._parse_action(pos)
        if parsed is None:
            return None
        action, end = parsed
        return (action if isinstance(action, Invalid) else m.Step(action)), end

    def _p_reset(self, pos: int) -> _Parsed:
        return m.Reset(), pos

    def _p_reset_ex(self, pos: int) -> _Parsed | None:
        body = self._buf.field(pos, MAX_RESET_OPTIONS, "the reset options")
        if body is None:
            return None
        raw, end = body
        if raw == _UNSEEDED:  # the usual reset's options, as clients write them: no JSON parse
            return m.Reset(), end
        try:
            opts = jsonio.loads(raw) if raw else {}
            if not isinstance(opts, dict):
                raise TypeError("expected a JSON object")
            options = opts.get("options")
            if options is not None and not isinstance(options, dict):
                raise TypeError("'options' must be an object or null")
            return m.Reset(seed=opts.get("seed"), options=options), end
        except (ValueError, TypeError) as exc:
            return Invalid(ProtocolError(f"reset options: {exc}")), end

    def _p_get_space(self, pos: int) -> _Parsed | None:
        which = self._buf.u8(pos)
        if which is None:
            return None
        if which not in (0, 1):
            return Invalid(
                ProtocolError(f"space id {which} is neither 0 (action) nor 1 (observation)")
            ), pos + 1
        return m.GetSpace(m.SpaceKind(which)), pos + 1

    def _p_sample(self, pos: int) -> _Parsed:
        return m.SampleAction(), pos

    def _p_monitor(self, pos: int) -> _Parsed | None:
        buf = self._buf
        if self.flags & Flags.MONITOR_REPLY or self.monitor_layout == "video":
            later: bool | None = True
        elif self.monitor_layout == "seed":
            later = False
        else:
            later = monitor_has_video(buf.data, pos)
        if later is None:
            return None
        resume, force = buf.u8(pos), buf.u8(pos + 1)
        video = buf.u8(pos + 2) if later else 1  # the original Monitor always records video
        directory = buf.field(pos + 3 if later else pos + 2, MAX_MONITOR_DIR, "the directory")
        if resume is None or force is None or video is None or directory is None:
            return None
        path = decode_text(directory[0], "monitor directory")
        self._monitor_replies.append(later)
        return m.Monitor(
            path, resume=bool(resume), force=bool(force), video=bool(video)
        ), directory[1]

    def _p_render(self, pos: int) -> _Parsed:
        return m.Render(), pos

    def _p_upload(self, pos: int) -> _Parsed | None:
        fields = []
        for _ in range(3):
            got = self._buf.field(pos, MAX_UPLOAD_FIELD, "an upload field")
            if got is None:
                return None
            fields.append(decode_text(got[0], "upload field"))
            pos = got[1]
        return Upload(*fields), pos


_VECTOR_PACKETS = frozenset({Packet.VECTOR_RESET, Packet.VECTOR_STEP})
_EPISODE_PACKETS = frozenset({Packet.RESET, Packet.STEP, Packet.RESET_EX, Packet.STEP_EX})

_PARSERS: dict[Packet, Callable[[ServerConnection, int], _Parsed | None]] = {
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

_PACKETS = {int(p): p for p in Packet}
#: How many packets' requests a connection keeps for lean_step (a Discrete space's steps).
_LEAN_PACKETS = 1024
# A Step made by its slot's own setter (see m.slot_setters)
_new = object.__new__
(_SET_ACTION,) = m.slot_setters(m.Step, "action")
# RESET_EX's options of a reset with no seed and no options, as json_bytes writes them
_UNSEEDED = json_bytes({"seed": None, "options": None})
_UNSEEDED_PACKET = bytes([Packet.RESET_EX]) + pack_field(_UNSEEDED)
_SEED_RESET = bytes([Packet.RESET])
