"""gym-socket: the client's end's reply parsing, sans-IO (the general path: every reply
packet, error replies, vector steps and their final observations)."""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np
import numpy.typing as npt

from envwire import jsonio, spacecodec
from envwire import messages as m
from envwire.errors import EnvwireError, ProtocolError, RemoteError, error_class_for_code
from envwire.protocols.gymsocket.finals import merge_finals, read_finals
from envwire.protocols.gymsocket.lean import VectorLayout
from envwire.protocols.gymsocket.packets import (
    ACT_JSON,
    EMPTY_INFO,
    F64,
    MAX_FIELD,
    OBS_BYTES,
    OBS_JSON,
    OBS_TENSOR,
    STATUS_ERROR,
    STATUS_OK,
    U32,
    Flags,
    HandshakeReply,
    Packet,
    Side,
    decode_text,
    unpack_tensor,
)

__all__ = ["Parsed", "ReplyParser"]

_EMPTY_INFO_SIZE = len(EMPTY_INFO)

#: What a reply parser returns: the event and the end offset (None: the reply is incomplete).
Parsed = tuple[HandshakeReply | m.Reply | EnvwireError, int]


class ReplyParser(Side):
    """The replies' parsers of :class:`~envwire.protocols.gymsocket.client.ClientConnection`
    (its base): each reads one reply from the receive buffer, where it lies."""

    #: The usual vector step reply's layout, once seen (for the lean reads).
    _vector_layout: VectorLayout | None

    def _parse_reply(self, expect: Packet | str) -> Parsed | None:
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

    def _parse_body(self, expect: Packet | str, pos: int) -> Parsed | None:
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
