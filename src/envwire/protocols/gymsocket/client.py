"""gym-socket: the client's end, sans-IO (requests out, replies in, pipelined in order)."""

from __future__ import annotations

import math
import struct
from collections import deque
from typing import Any

import numpy as np
import numpy.typing as npt

from envwire import jsonio, spacecodec
from envwire import messages as m
from envwire.errors import (
    EnvwireError,
    ProtocolError,
    RemoteError,
    UsageError,
    error_class_for_code,
)
from envwire.protocols.gymsocket.finals import merge_finals, read_finals
from envwire.protocols.gymsocket.lean import StepLayout, StepResult, VectorLayout, VectorStep
from envwire.protocols.gymsocket.packets import (
    ACT_JSON,
    CODE_BY_DTYPE,
    EMPTY_INFO,
    F64,
    MAX_FIELD,
    OBS_BYTES,
    OBS_JSON,
    OBS_TENSOR,
    STATUS_ERROR,
    STATUS_OK,
    STEP_EX_TAIL_INFO,
    TENSOR_HEADERS,
    U8,
    U32,
    Flags,
    HandshakeReply,
    NeedData,
    Packet,
    Side,
    Upload,
    decode_text,
    json_bytes,
    pack_field,
    pack_tensor,
    unpack_tensor,
)

__all__ = ["ClientConnection"]

_EMPTY_INFO_SIZE = len(EMPTY_INFO)
_STEP_BYTES = {p: U8.pack(p) for p in (Packet.STEP, Packet.STEP_EX)}
_UNSEEDED_RESET = U8.pack(Packet.RESET_EX) + pack_field(json_bytes({"seed": None, "options": None}))

#: What a reply parser returns: the event and the end offset (None: the reply is incomplete).
_Parsed = tuple[HandshakeReply | m.Reply | EnvwireError, int]
#: How many distinct actions' step requests a connection keeps (a Discrete space's actions).
_LEAN_ACTIONS = 1024
#: The integer actions' types (a tuple: ``int | np.integer`` would be built on every call).
_INTEGERS = (int, np.integer)


class ClientConnection(Side):
    """The client's end: encodes the handshake and commands, parses replies in order.

    Requests may be pipelined: each ``send_*`` queues the reply it expects, and
    ``next_event`` returns replies in the order the requests were sent.
    """

    def __init__(self, flags: Flags = Flags.ERRORS | Flags.MONITOR_REPLY | Flags.EXTENDED) -> None:
        super().__init__()
        self._set_flags(flags)
        self._expect: deque[Packet | str] = deque()
        #: The lean reads (:meth:`lean_step_reply`): the usual replies' layouts, once seen, and
        #: each action's step request.
        self._step_layout: StepLayout | None = None
        self._vector_layout: VectorLayout | None = None
        self._lean_requests: dict[object, bytes] = {}
        #: The lean vector step request (:meth:`lean_vector_request`): the last batch of
        #: actions' dtype and shape, and the bytes before the batch's own.
        self._vector_head: tuple[np.dtype[Any], tuple[int, ...], bytes] | None = None

    def send_handshake(
        self, env_name: str, vector: dict[str, Any] | None = None, token: str | None = None
    ) -> bytes:
        """The opening bytes; the first event will be a :class:`HandshakeReply`.

        With the VECTOR flag, ``vector`` is ``{"num_envs": N, "autoreset_mode": ..., "workers":
        K}``, and Reset/Step then travel as packets 9 and 10, carrying batches. With the AUTH
        flag, ``token`` is sent first.
        """
        self._expect.append("handshake")
        opening = U8.pack(int(self.flags))
        if self.flags & Flags.AUTH:
            opening += pack_field((token or "").encode())
        opening += pack_field(env_name.encode())
        if self._vector:
            opening += pack_field(json_bytes(vector or {}))
        return opening

    def send_request(self, request: m.Request | Upload) -> bytes:
        """Encode a request; its reply arrives through ``next_event`` in order."""
        extended = self._extended
        if self._vector and isinstance(request, m.Step | m.Reset):
            return self._vector_request(request)
        if type(request) is m.Step:
            packet = Packet.STEP_EX if extended else Packet.STEP
            self._expect.append(packet)
            return _STEP_BYTES[packet] + self._action(request.action)
        match request:
            case m.Reset(seed=None, options=None) if extended:  # the usual reset: bytes made once
                self._expect.append(Packet.RESET_EX)
                return _UNSEEDED_RESET
            case m.Reset(seed=seed, options=options) if extended:
                packet, body = (
                    Packet.RESET_EX,
                    pack_field(json_bytes({"seed": seed, "options": options})),
                )
            case m.Reset(seed=None, options=None):
                packet, body = Packet.RESET, b""
            case m.Reset():
                raise UsageError("seeded resets need the EXTENDED handshake flag")
            case m.Step(action=action):
                packet = Packet.STEP_EX if extended else Packet.STEP
                body = self._action(action)
            case m.GetSpace(which=which):
                packet, body = Packet.GET_SPACE, U8.pack(int(which))
            case m.SampleAction():
                packet, body = Packet.SAMPLE_ACTION, b""
            case m.Monitor() as mon:
                packet = Packet.MONITOR
                video = U8.pack(mon.video) if self.flags & Flags.MONITOR_REPLY else b""
                body = bytes([mon.resume, mon.force]) + video + pack_field(mon.directory.encode())
            case m.Render():
                packet, body = Packet.RENDER, b""
            case Upload() as up:
                packet = Packet.UPLOAD
                body = b"".join(
                    pack_field(s.encode()) for s in (up.directory, up.api_key, up.algorithm_id)
                )
            case _:
                raise UsageError(f"gym-socket has no packet for {type(request).__name__}")
        self._expect.append(packet)
        return U8.pack(packet) + body

    def _vector_request(self, request: m.Request) -> bytes:
        if isinstance(request, m.Reset):
            seed = request.seed
            if isinstance(seed, np.ndarray | tuple):
                seed = [None if s is None else int(s) for s in seed]
            body = pack_field(json_bytes({"seed": seed, "options": request.options}))
            packet = Packet.VECTOR_RESET
        else:
            assert isinstance(request, m.Step)
            packet, body = Packet.VECTOR_STEP, self._action(request.action)
        self._expect.append(packet)
        return U8.pack(packet) + body

    def _action(self, action: object) -> bytes:
        if self._int_actions and isinstance(action, _INTEGERS):
            return b"\x00" + pack_field(b"%d" % action)
        if self._extended and isinstance(action, np.ndarray) and action.dtype in CODE_BY_DTYPE:
            return b"\x01" + pack_field(pack_tensor(action))
        space = self._known(self.action_space, "action")
        return b"\x00" + pack_field(json_bytes(spacecodec.to_json(space, action)))

    def receive_view(self, view: memoryview) -> None:
        """Feed received bytes without copying them when nothing is buffered: the next
        :meth:`next_event` parses them where they are (an observation's bytes are then copied
        once, into its array) and keeps a copy only of what it leaves unparsed. ``view`` must
        stay unchanged until that call returns; an empty view means the peer closed."""
        if isinstance(self._buf.data, memoryview):  # fed twice without a parse between
            self._buf.data = bytearray(self._buf.data)
        if self._buf.data or not view:
            self.receive_data(view)
        else:
            self._buf.data = view  # type: ignore[assignment]

    def _consume(self, end: int) -> None:
        data = self._buf.data
        if isinstance(data, memoryview):
            self._buf.data = data[end:]
        else:
            del data[:end]

    def next_event(self) -> HandshakeReply | m.Reply | EnvwireError | NeedData:
        """The next reply, in request order; an error reply comes as an exception instance.

        Raises:
            ProtocolError: the server's bytes cannot be parsed (the only exception any
                malformed reply raises).
        """
        if not isinstance(self._buf.data, memoryview):
            return self._next_event()
        try:
            return self._next_event()
        finally:  # what is left of a borrowed view is copied before its owner reuses it
            self._buf.data = bytearray(self._buf.data)

    def _next_event(self) -> HandshakeReply | m.Reply | EnvwireError | NeedData:
        if not self._expect:
            if self._buf.data:
                raise ProtocolError(f"{len(self._buf.data)} unexpected bytes from the server")
            return self._incomplete()
        expect = self._expect[0]
        try:
            parsed: _Parsed | None = None
            if expect is Packet.STEP_EX:
                parsed = self._parse_step_ex()
            elif expect is Packet.VECTOR_STEP and self._errors and self._buf.u8(0) == STATUS_OK:
                parsed = self._parse_vector_step(1)  # the common case, past the match below
            if parsed is None:
                parsed = self._parse_reply(expect)
        except ProtocolError:
            raise
        except (EnvwireError, ValueError, TypeError, KeyError, IndexError, struct.error) as exc:
            # The one boundary where what the decoders below raise on malformed bytes (JSON,
            # struct, reshape, space errors) becomes the protocol's own error.
            name = expect if isinstance(expect, str) else expect.name.lower().replace("_", " ")
            raise ProtocolError(
                f"malformed {name} reply from the server: {type(exc).__name__}: {exc}"
            ) from exc
        if parsed is None:
            return self._incomplete()
        event, end = parsed
        self._consume(end)
        self._expect.popleft()
        return event

    def _parse_step_ex(self) -> tuple[m.StepReply, int] | None:
        """The common case, parsed in one go: an OK extended step reply with an array."""
        data = self._buf.data
        if not self._errors or len(data) < 6 or data[0] != STATUS_OK:
            return None
        if data[1] not in (OBS_TENSOR, OBS_BYTES):
            return None
        got = self._read_array(data[1], 2)
        if got is None:
            return None
        obs, tail = got
        if len(data) < tail + 14:
            return None
        reward, terminated, truncated, info_size = STEP_EX_TAIL_INFO.unpack_from(data, tail)
        end = tail + 14 + info_size
        if len(data) < end:
            return None
        info = jsonio.loads_info(bytes(data[tail + 14 : end]))
        if not info:
            self._step_layout = StepLayout.learn(data, obs, tail, end)
        return m.StepReply(obs, reward, terminated, truncated, info), end

    # -- the lean reads: one step in flight, its usual reply read in one go ----------------

    def lean_step_request(self, action: object) -> bytes | None:
        """The bytes of a step whose reply :meth:`lean_step_reply` may read, or None where
        only :meth:`send_request` applies: a one-env connection with error replies and the
        extended packets, nothing else in flight or buffered, and an integer action of a
        ``Discrete`` space (each action's bytes are made once). The step's reply is then
        expected as with :meth:`send_request`.
        """
        if (
            not self._int_actions
            or self._expect
            or self._buf.data
            or not isinstance(action, _INTEGERS)
            or not (self._errors and self._extended)
            or self._vector
        ):
            return None
        request = self._lean_requests.get(action)
        if request is None:
            request = _STEP_BYTES[Packet.STEP_EX] + self._action(action)
            if len(self._lean_requests) < _LEAN_ACTIONS:
                self._lean_requests[action] = request
        self._expect.append(Packet.STEP_EX)
        return request

    def lean_reset_request(self, seed: object, options: object) -> bytes | None:
        """:meth:`send_request`'s bytes of the usual reset (no seed, no options), whose reply
        :meth:`lean_reset_reply` may read; None where :meth:`lean_step_request` is."""
        if (
            seed is not None
            or options is not None
            or self._expect
            or self._buf.data
            or not (self._errors and self._extended)
            or self._vector
        ):
            return None
        self._expect.append(Packet.RESET_EX)
        return _UNSEEDED_RESET

    def lean_reset_reply(self, view: memoryview, size: int) -> tuple[Any, dict[str, Any]] | None:
        """:meth:`lean_step_reply` for the one reset in flight: its observation and info,
        when its reply is the usual step reply's head and observation, then the empty info."""
        expect, layout = self._expect, self._step_layout
        if layout is None or len(expect) != 1 or expect[0] is not Packet.RESET_EX or self._buf.data:
            return None
        result = layout.read_reset(view, size)
        if result is not None:
            expect.popleft()
        return result

    def lean_vector_request(self, actions: object) -> bytes | None:
        """The bytes of a vector step, as :meth:`send_request` makes them, for a batch of
        actions that is an array of a tensor dtype, on a vector connection with error replies
        and the extended packets, nothing in flight or buffered (so that its reply may be read
        by :meth:`lean_vector_step`); None for anything else. The bytes before the batch's own
        are made once per dtype and shape. The step's reply is then expected as with
        :meth:`send_request`.
        """
        if (
            type(actions) is not np.ndarray
            or not self._vector
            or self._expect
            or self._buf.data
            or not (self._errors and self._extended)
        ):
            return None
        dtype, shape = actions.dtype, actions.shape
        head = self._vector_head
        if head is None or head[0] is not dtype or head[1] != shape:
            code = CODE_BY_DTYPE.get(dtype)
            if code is None or len(shape) > 32:
                return None
            tensor = TENSOR_HEADERS[len(shape)].pack(code, len(shape), *shape)
            size = len(tensor) + actions.nbytes
            packet = U8.pack(Packet.VECTOR_STEP) + b"\x01" + U32.pack(size) + tensor
            head = self._vector_head = (dtype, shape, packet)
        self._expect.append(Packet.VECTOR_STEP)
        return head[2] + actions.tobytes()

    def lean_vector_step(self, view: memoryview, size: int) -> VectorStep | None:
        """:meth:`lean_vector_reply`'s arrays and info as a vector env's step returns them,
        without the reply object."""
        layout = self._lean_layout()
        if not isinstance(layout, VectorLayout):
            return None
        arrays = layout.read(view, size)
        if arrays is not None:
            self._expect.popleft()
        return arrays

    def _lean_layout(self) -> StepLayout | VectorLayout | None:
        """The layout the reply to the one request in flight may have, if it may be lean."""
        if len(self._expect) != 1 or self._buf.data:
            return None
        expect = self._expect[0]
        if expect is Packet.STEP_EX:
            return self._step_layout
        return self._vector_layout if expect is Packet.VECTOR_STEP else None

    def lean_wants(self, view: memoryview, size: int) -> int:
        """How many bytes the reply to the one request in flight has in all, as far as its
        first ``size`` bytes in ``view`` tell, when they begin as its usual layout; 0 when
        they do not, or are too few to tell: then only the general path applies."""
        layout = self._lean_layout()
        return 0 if layout is None else layout.wants(view, size)

    def lean_step_reply(self, view: memoryview, size: int) -> StepResult | None:
        """The step's result from the first ``size`` bytes of ``view``, when they are the
        whole reply to the one step in flight (:meth:`lean_step_request`) in its usual layout
        (taught by the first usual reply :meth:`next_event` parsed); else None, and nothing is
        consumed: feed the bytes to :meth:`receive_view` and read with :meth:`next_event`.
        The observation is a copy, as :meth:`next_event`'s is; the info a fresh ``{}``.
        """
        # _lean_layout(), inlined: the read of every step
        expect, layout = self._expect, self._step_layout
        if layout is None or len(expect) != 1 or expect[0] is not Packet.STEP_EX or self._buf.data:
            return None
        result = layout.read(view, size)
        if result is not None:
            self._expect.popleft()
        return result

    def lean_vector_reply(self, view: memoryview, size: int) -> m.VectorStepReply | None:
        """:meth:`lean_step_reply` for the one vector step in flight: its reply, when
        ``view[:size]`` is all of it in its usual layout; else None, nothing consumed."""
        layout = self._lean_layout()
        if not isinstance(layout, VectorLayout):
            return None
        step = layout.read(view, size)
        if step is None:
            return None
        self._expect.popleft()
        return m.VectorStepReply(*step)

    def _parse_reply(self, expect: Packet | str) -> _Parsed | None:
        buf = self._buf
        if expect == "handshake":
            got = buf.field(0)
            return None if got is None else (HandshakeReply(decode_text(got[0], "error")), got[1])
        pos = 0
        if self._errors:
            status = buf.u8(0)
            if status is None:
                return None
            if status == STATUS_ERROR:
                got = buf.field(1)
                code = buf.field(got[1]) if got is not None else None
                if got is None or code is None:
                    return None
                return _remote_error(
                    decode_text(got[0], "error"), decode_text(code[0], "code")
                ), code[1]
            if status != STATUS_OK:
                raise ProtocolError(f"unknown reply status {status}")
            pos = 1
        return self._parse_body(expect, pos)

    def _parse_body(self, expect: Packet | str, pos: int) -> _Parsed | None:
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
                return m.ResetReply(obs[0], jsonio.loads_info(info[0])), info[1]
            case Packet.STEP | Packet.STEP_EX:
                obs = self._read_observation(pos)
                if obs is None:
                    return None
                flag_count = 2 if expect is Packet.STEP_EX else 1
                end = obs[1] + 8 + flag_count
                if len(buf.data) < end:
                    return None
                reward = F64.unpack_from(buf.data, obs[1])[0]
                flags = buf.data[obs[1] + 8 : end]
                info = buf.field(end)
                if info is None:
                    return None
                terminated, truncated = bool(flags[0]), bool(flags[1]) if flag_count == 2 else False
                return m.StepReply(
                    obs[0], reward, terminated, truncated, jsonio.loads_info(info[0])
                ), info[1]
            case Packet.VECTOR_RESET:
                obs = self._read_observation(pos)
                info = buf.field(obs[1]) if obs is not None else None
                if obs is None or info is None:
                    return None
                return m.ResetReply(obs[0], jsonio.loads_info(info[0])), info[1]
            case Packet.VECTOR_STEP:
                return self._parse_vector_step(pos)
            case Packet.GET_SPACE:
                got = buf.field(pos)
                if got is None:
                    return None
                return m.SpaceReply(spacecodec.from_description(jsonio.loads(got[0]))), got[1]
            case Packet.SAMPLE_ACTION:
                kind = buf.u8(pos)
                got = buf.field(pos + 1) if kind is not None else None
                if got is None:
                    return None
                if kind != ACT_JSON:
                    raise ProtocolError(f"sampled action of unknown type {kind} (known: 0 JSON)")
                space = self._known(self.action_space, "action")
                return m.SampleReply(spacecodec.from_json(space, jsonio.loads(got[0]))), got[1]
            case Packet.MONITOR if self.flags & Flags.MONITOR_REPLY:
                got = buf.field(pos)
                if got is None:
                    return None
                error = decode_text(got[0], "error")
                return (_remote_error(error) if error else m.MonitorReply("")), got[1]
            case Packet.MONITOR:
                return m.MonitorReply(""), pos
            case Packet.RENDER:
                return m.RenderReply(None), pos
            case Packet.UPLOAD:
                got = buf.field(pos)
                if got is None:
                    return None
                error = decode_text(got[0], "error")
                return (_remote_error(error) if error else m.Ok()), got[1]
        raise ProtocolError(f"no reply format for {expect!r}")  # pragma: no cover

    def _parse_vector_step(self, pos: int) -> tuple[m.VectorStepReply, int] | None:
        """Observations, then rewards, terminations and truncations (each a tensor field,
        read where it lies), then the vector info (the usual empty one without JSON)."""
        obs = self._read_observation(pos)
        if obs is None:
            return None
        arrays, end = [], obs[1]
        placed = [(obs[0], end)] if isinstance(obs[0], np.ndarray) else []
        for _ in range(3):
            got = self._read_array(OBS_TENSOR, end)
            if got is None:
                return None
            arrays.append(got[0])
            placed.append(got)
            end = got[1]
        data = self._buf.data
        if data[end : end + _EMPTY_INFO_SIZE] == EMPTY_INFO:
            infos: dict[str, Any] = {}
            end += _EMPTY_INFO_SIZE
            if len(placed) == 4 and not self._finals:
                self._vector_layout = VectorLayout.learn(data, placed, end)
        else:
            info = self._buf.field(end)
            if info is None:
                return None
            infos, end = jsonio.loads_info(info[0]), info[1]
        if self._finals:  # FINAL_OBS: the final observations' field follows the info
            finals = read_finals(data, end, len(data), len(arrays[0]))
            if finals is None:
                return None
            if not finals[0] and not infos and len(placed) == 4:
                self._vector_layout = VectorLayout.learn(data, placed, finals[3], finals=True)
            infos, end = merge_finals(infos, *finals[:3]), finals[3]
        return m.VectorStepReply(obs[0], arrays[0], arrays[1], arrays[2], infos), end

    def _read_observation(self, pos: int) -> tuple[object, int] | None:
        kind = self._buf.u8(pos)
        if kind in (OBS_TENSOR, OBS_BYTES):
            return self._read_array(kind, pos + 1)
        got = self._buf.field(pos + 1) if kind is not None else None
        if kind is None or got is None:
            return None
        raw, end = got
        if kind == OBS_JSON:
            space = self._known(self.observation_space, "observation")
            return spacecodec.from_json(space, jsonio.loads(raw)), end
        raise ProtocolError(f"unknown observation type {kind}")

    def _read_array(self, kind: int, pos: int) -> tuple[npt.NDArray[Any], int] | None:
        """A tensor or byte-list field at ``pos``, read in place from the receive buffer: the
        array's bytes are copied once, into the (writable) array returned."""
        data = self._buf.data
        if len(data) < pos + 4:
            return None
        size = U32.unpack_from(data, pos)[0]
        if size > MAX_FIELD:
            raise ProtocolError(f"field of {size} bytes exceeds the {MAX_FIELD}-byte limit")
        start, end = pos + 4, pos + 4 + size
        if len(data) < end:
            return None
        if kind == OBS_TENSOR:
            array, stop = unpack_tensor(data, start)
            if stop != end:
                raise ProtocolError(f"tensor of {stop - start} bytes in a field of {size}")
            return array, end
        ndim = U32.unpack_from(data, start)[0] if size >= 4 else None
        if ndim is None or ndim > 32 or size < 4 + 4 * ndim:
            raise ProtocolError(f"byte list observation of {size} bytes has no whole header")
        shape = struct.unpack_from(f"<{ndim}I", data, start + 4)
        count = size - 4 - 4 * ndim
        if math.prod(shape) != count:
            raise ProtocolError(f"byte list observation of shape {list(shape)} has {count} bytes")
        array = np.frombuffer(data, np.uint8, count, start + 4 + 4 * ndim).reshape(shape)
        return array.copy(), end


def _remote_error(message: str, code: str | None = None) -> EnvwireError:
    """The error the server reported, as the envwire error class its code names."""
    cls = error_class_for_code(code) if code else RemoteError
    if cls is RemoteError or not issubclass(cls, EnvwireError):
        return RemoteError(message, code)
    return cls(message)
