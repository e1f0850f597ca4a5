"""gym-socket: the server's replies, sans-IO (the half of :class:`.server.ServerConnection`
that encodes), with the lean step reply beside the general one."""

from __future__ import annotations

import base64
import functools
import struct
import sys
from collections import deque
from typing import Any, Final, NamedTuple

import numpy as np

from envwire import messages as m
from envwire import spacecodec
from envwire.errors import EnvwireError, ProtocolError
from envwire.protocols.gymsocket.finals import NO_FINALS, split_finals
from envwire.protocols.gymsocket.packets import (
    CODE_BY_DTYPE,
    EMPTY_INFO,
    OBS_BYTES,
    STEP_EX_TAIL,
    STEP_TAIL,
    TENSOR_HEADERS,
    U32,
    Packet,
    Side,
    info_field,
    json_array,
    json_bytes,
    pack_column,
    pack_field,
    pack_tensor,
)
from envwire.tensor import NDARRAY

__all__ = ["GATHER_MIN", "ReplyWriter"]

# Hot-path packets as globals (an enum member's load from its class: ~900 instructions)
_STEP, _STEP_EX = Packet.STEP, Packet.STEP_EX
_RESET_EX, _VECTOR_STEP = Packet.RESET_EX, Packet.VECTOR_STEP

#: The size from which a step's byte observation is handed out uncopied by
#: :meth:`ReplyWriter.send_reply_buffers`: below it one join costs less than a gathered
#: write's list and ``sendmsg`` setup (an 84x84x4 frame is 28,224 bytes).
GATHER_MIN: Final = 16 * 1024


class ReplyWriter(Side):
    """Encodes the replies to the requests a server's end has read, in order: each request
    read queues its packet in ``_pending`` (None for one answered only by an error)."""

    def __init__(self) -> None:
        super().__init__()
        self._pending: deque[Packet | None] = deque()  # one entry per request awaiting a reply
        self._monitor_replies: deque[bool] = deque()  # per waiting Monitor: answered by a string?
        # A numeric Box's dtype: its observations of that dtype are written as JSON directly.
        self._json_box: np.dtype[Any] | None = None
        self._seed_box: np.dtype[Any] | None = None  # _json_box, unless it is uint8
        # The lean step reply (_lean_reply): the last array layout seen, and its reply's head.
        self._lean_dtype: np.dtype[Any] | None = None
        self._lean_shape: tuple[int, ...] | None = None
        self._lean_head = b""
        # The lean vector step reply (_vector_reply): the layout of the last usual one.
        self._vector_layout: _VectorLayout | None = None
        # The lean gathered step reply (a frame's): the shape of the last large byte array
        # sent from its own memory, and its reply's bytes before the array.
        self._frame_shape: tuple[int, ...] | None = None
        self._frame_head = b""

    def send_reply(self, reply: m.Reply) -> bytes:
        """Encode the reply to the oldest request still waiting for one.

        If encoding fails (an EnvwireError), the request still waits: answer it with
        :meth:`send_error`.
        """
        packet = self._pending[0]
        # The hot paths first, without the match over the packets below: a step's
        # observation's bytes are copied once, by this join.
        if isinstance(reply, m.StepReply) and (packet is _STEP_EX or packet is _STEP):
            joined = b"".join(self._step_parts(packet, reply))
            self._pending.popleft()
            return joined
        if packet is _VECTOR_STEP and isinstance(reply, m.VectorStepReply):
            return self._vector_reply(reply)
        body = self._reply_body(packet, reply)
        self._pending.popleft()
        if self._errors:
            return b"\x00" + body if body is not None else b"\x00"
        return body or b""

    def send_reply_buffers(self, reply: m.Reply) -> bytes | list[bytes | memoryview]:
        """:meth:`send_reply`, for a writer that can gather buffers (``socket.sendmsg``).

        An extended step reply whose observation is a uint8 array of at least
        :data:`GATHER_MIN` bytes comes as a list of buffers to write in order, one of them the
        array's own memory, not copied: the caller must write them before the env may change
        that array again, that is before the next request is handled (an env may return the
        same array, updated in place, from every step). Any other reply comes as the bytes
        :meth:`send_reply` returns (the usual step's and reset's, an array of the layout the
        last usual step taught and no info, joined from that layout's head).
        """
        if type(reply) is m.VectorStepReply and self._pending[0] is _VECTOR_STEP:
            return self._vector_reply(reply)  # (send_reply's, without its checks before it)
        if type(reply) is m.StepReply and self._pending[0] is _STEP:
            obs = reply.observation
            box = self._seed_box
            if (  # the seed's step of a numeric Box (send_reply's bytes, inlined)
                type(obs) is np.ndarray
                and box is not None
                and ((dtype := obs.dtype) is box or dtype == box)
                and not self._extended
                and not reply.info
            ):
                self._pending.popleft()
                listed = repr(obs.tolist())  # json_array(), inlined: the reply of every step
                text = (
                    json_bytes(obs.tolist()) if "n" in listed else listed.replace(" ", "").encode()
                )
                return b"".join(
                    (
                        b"\x00\x00" if self._errors else b"\x00",
                        U32.pack(len(text)),
                        text,
                        STEP_TAIL.pack(reply.reward, reply.terminated or reply.truncated),
                        EMPTY_INFO,
                    )
                )
        elif type(reply) is m.StepReply and self._pending[0] is _STEP_EX:
            obs = reply.observation
            if type(obs) is np.ndarray and not reply.info:
                if obs.dtype is self._lean_dtype and obs.shape == self._lean_shape:
                    # the usual reply (_lean_reply's), inlined: the reply of every step
                    self._pending.popleft()
                    tail = STEP_EX_TAIL.pack(reply.reward, reply.terminated, reply.truncated)
                    return self._lean_head + obs.tobytes() + tail + EMPTY_INFO
                if obs.shape == self._frame_shape and obs.dtype is _U8:
                    # a frame of the layout gathered last: its head, the array's own memory
                    # (cast flat, which only a C-contiguous one can be), the tail
                    try:
                        data = obs.data.cast("B")
                    except TypeError:  # not C-contiguous: the general path copies it
                        pass
                    else:
                        self._pending.popleft()
                        tail = _FRAME_TAIL.pack(
                            reply.reward, reply.terminated, reply.truncated, *_NO_INFO
                        )
                        return [self._frame_head, data, tail]
            lean = self._lean_reply(reply)
            if lean is not None:
                return lean
        elif type(reply) is m.ResetReply and self._pending[0] is _RESET_EX:
            obs = reply.observation
            if (  # the usual reset's reply: the step's lean head, the array, the empty info
                type(obs) is np.ndarray
                and obs.dtype is self._lean_dtype
                and obs.shape == self._lean_shape
                and not reply.info
            ):
                self._pending.popleft()
                return self._lean_head + obs.tobytes() + EMPTY_INFO
        obs = getattr(reply, "observation", None)
        if (
            type(obs) is not np.ndarray
            or obs.dtype != np.uint8
            or obs.nbytes < GATHER_MIN
            or not isinstance(reply, m.StepReply)
            or self._pending[0] is not _STEP_EX
        ):
            return self.send_reply(reply)
        buffers = self._step_parts(_STEP_EX, reply)
        self._pending.popleft()
        if not reply.info and obs.dtype is _U8 and obs.flags.c_contiguous:
            # the layout of the gathered step replies that follow (above)
            self._frame_shape, self._frame_head = obs.shape, b"".join(buffers[:2])
        return buffers

    def _lean_reply(self, reply: m.StepReply) -> bytes | None:
        """The usual extended step reply (an array observation of the layout seen last, no
        info) joined from its fixed head, the array's bytes and the tail; None for any other,
        which :meth:`send_reply` writes (and a usual one teaches the layout)."""
        obs = reply.observation
        if type(obs) is not np.ndarray or reply.info:
            return None
        if obs.dtype is not self._lean_dtype or obs.shape != self._lean_shape:
            self._learn(obs)
            return None
        self._pending.popleft()
        tail = STEP_EX_TAIL.pack(reply.reward, reply.terminated, reply.truncated)
        return self._lean_head + obs.tobytes() + tail + EMPTY_INFO

    def _learn(self, obs: np.ndarray[Any, Any]) -> None:
        """Keep ``obs``'s layout (its reply's bytes before the array's) for
        :meth:`_lean_reply`, when it is an array written whole after a fixed head: a native
        dtype of the tensor table, or bytes too few to be gathered from the array's memory."""
        if not obs.dtype.isnative or (obs.dtype == np.uint8 and obs.nbytes >= GATHER_MIN):
            return
        if obs.dtype != np.uint8 and obs.dtype not in CODE_BY_DTYPE:
            return
        parts = self._observation_parts(obs)
        joined = b"".join(parts)
        self._lean_head = (b"\x00" if self._errors else b"") + joined[: len(joined) - obs.nbytes]
        self._lean_dtype, self._lean_shape = obs.dtype, obs.shape

    def _step_parts(self, packet: Packet, reply: m.StepReply) -> list[bytes | memoryview]:
        """A step reply's pieces in order (the extended step's, or the seed's for STEP); a
        large byte observation among them is the array's own memory."""
        if packet is Packet.STEP_EX:
            tail = STEP_EX_TAIL.pack(reply.reward, reply.terminated, reply.truncated)
        else:  # the seed's step: one done flag
            tail = STEP_TAIL.pack(reply.reward, reply.terminated or reply.truncated)
        info = reply.info
        return [
            b"\x00" if self._errors else b"",
            *self._observation_parts(reply.observation),
            tail,
            info_field(info, self._extended) if info else EMPTY_INFO,
        ]

    def send_error(self, error: EnvwireError) -> bytes | None:
        """Encode an error for the oldest waiting request.

        Returns None when the client has no way to hear it (flags 0): the front end must then
        close the connection, as the original server did. Render is the exception: it returns
        ``b""`` (nothing to send) and the session goes on.
        """
        packet = self._pending.popleft()
        message = str(error).encode()
        string_reply = self._monitor_replies.popleft() if packet is Packet.MONITOR else False
        if self._errors:
            return b"\x01" + pack_field(message) + pack_field(error.code.encode())
        if packet is Packet.UPLOAD or string_reply:
            return pack_field(message)
        if packet is Packet.RENDER:
            # Render has no reply in the seed: the client cannot hear of the failure, and
            # closing would cost it the session for a frame it never asked to see.
            return b""
        return None

    def _reply_body(self, packet: Packet | None, reply: m.Reply) -> bytes | None:
        match packet, reply:
            case Packet.RESET, m.ResetReply(observation=obs):
                return self._observation(obs)
            case Packet.RESET_EX, m.ResetReply(observation=obs, info=info):
                return self._observation(obs) + info_field(info, self._extended)
            case Packet.VECTOR_RESET, m.ResetReply(observation=obs, info=info):
                return self._batch(obs) + info_field(info, self._extended)
            case Packet.GET_SPACE, m.SpaceReply(space=space):
                style: spacecodec.Style = "envwire" if self._extended else "gym-socket"
                return pack_field(json_bytes(spacecodec.describe(space, style=style)))
            case Packet.SAMPLE_ACTION, m.SampleReply(action=action):
                space = self._known(self.action_space, "action")
                return b"\x00" + pack_field(json_bytes(spacecodec.to_json(space, action)))
            case Packet.MONITOR, m.MonitorReply():
                return pack_field(b"") if self._monitor_replies.popleft() else None
            case Packet.RENDER, m.RenderReply():
                return None
        raise ProtocolError(f"cannot answer packet {packet!r} with {type(reply).__name__}")

    def _vector_reply(self, v: m.VectorStepReply) -> bytes:
        """The reply to the vector step waiting for one. The usual one (a batch that is one
        array of a tensor dtype, float64 rewards and bool flags of the batch's length, no
        info, or with ``FINAL_OBS`` no info once its final observations are out of it) is
        joined from the bytes around the arrays learned from the last such batch and the
        arrays' own, then the final field (:mod:`.finals`): the bytes
        :meth:`_vector_step_parts` writes, which writes any other (and teaches the layout)."""
        infos, lean = v.infos, None
        if not infos:
            lean = self._lean_vector_arrays(v, _EMPTY_NO_FINALS if self._finals else EMPTY_INFO)
        elif self._finals:
            rest, finals = split_finals(infos)
            if not rest:
                lean = self._lean_vector_arrays(v, EMPTY_INFO + finals)
        if lean is None:
            lean = b"".join((b"\x00" if self._errors else b"", *self._vector_step_parts(v)))
        self._pending.popleft()
        return lean

    def _lean_vector_arrays(self, v: m.VectorStepReply, tail: bytes) -> bytes | None:
        """The lean vector step reply's bytes, ending with ``tail`` (after the arrays)."""
        obs, rewards, terminations, truncations = (
            v.observations,
            v.rewards,
            v.terminations,
            v.truncations,
        )
        if (
            type(obs) is not NDARRAY
            or type(rewards) is not NDARRAY
            or type(terminations) is not NDARRAY
            or type(truncations) is not NDARRAY
        ):
            return None
        layout = self._vector_layout
        if (
            layout is None
            or obs.dtype is not layout.obs_dtype
            or obs.shape != layout.obs_shape
            or rewards.dtype is not layout.reward_dtype
            or terminations.dtype is not layout.flag_dtype
            or truncations.dtype is not layout.flag_dtype
            or rewards.shape != layout.column_shape
            or terminations.shape != layout.column_shape
            or truncations.shape != layout.column_shape
        ):
            self._vector_layout = _VectorLayout.learn(
                obs, rewards, terminations, truncations, self._errors
            )
            return None
        parts = (
            layout.head,
            obs,
            layout.rewards_head,
            rewards,
            layout.flags_head,
            terminations,
            layout.flags_head,
            truncations,
            tail,
        )
        try:  # contiguous arrays (the usual ones) are joined as they are, with no copy each
            return b"".join(parts)  # type: ignore[arg-type]
        except TypeError:  # one is not contiguous: the arrays' bytes in C order
            return b"".join([p if isinstance(p, bytes) else p.tobytes() for p in parts])

    def _vector_step_parts(self, v: m.VectorStepReply) -> tuple[bytes, ...]:
        """A vector step's body: the batch of observations, a tensor of float64 rewards, two
        of bool flags, the vector info (the common empty one is a constant); with
        ``FINAL_OBS``, the final field after it (:mod:`.finals`)."""
        infos, finals = v.infos, b""
        if self._finals:
            infos, finals = split_finals(infos) if infos else (infos, NO_FINALS)
        return (
            self._batch(v.observations),
            pack_column(v.rewards, _F64),
            pack_column(v.terminations, _BOOL),
            pack_column(v.truncations, _BOOL),
            self._vector_infos(infos) if infos else EMPTY_INFO,
            finals,
        )

    def _vector_infos(self, infos: dict[str, Any]) -> bytes:
        """A vector info's field: the typed JSON of Gymnasium's vector infos (arrays, their
        masks, nested dicts; SameStep's final observations) written directly where it can be,
        the same bytes as :func:`info_field`'s encoder; anything else by that encoder."""
        if self._extended:
            parts: list[bytes] = []
            if _typed_dict(infos, parts):
                return pack_field(b"".join(parts))
        return info_field(infos, self._extended)

    def _batch(self, obs: object) -> bytes:
        """A batch of observations: a tensor when it is one array, else JSON."""
        if isinstance(obs, np.ndarray) and obs.dtype in CODE_BY_DTYPE:
            return b"\x02" + pack_field(pack_tensor(obs))
        return self._json_observation(obs)

    def _json_observation(self, obs: object) -> bytes:
        space = self._known(self.observation_space, "observation")
        return b"\x00" + pack_field(json_bytes(spacecodec.to_json(space, obs)))

    def _observation(self, obs: object) -> bytes:
        return b"".join(self._observation_parts(obs))

    def _observation_parts(self, obs: object) -> list[bytes | memoryview]:
        """An observation as buffers to join: a header, then (for arrays) the array's own
        memory, so that its bytes are copied once, by whoever joins or sends them."""
        if type(obs) is np.ndarray:
            if obs.dtype == np.uint8:
                data = np.ascontiguousarray(obs)
                size = 4 + 4 * data.ndim + data.nbytes
                header = _byte_list_header(data.ndim).pack(OBS_BYTES, size, data.ndim, *data.shape)
                return [header, data.reshape(-1).data]
            if self._extended and obs.dtype in CODE_BY_DTYPE:
                return [b"\x02" + pack_field(pack_tensor(obs))]
            if self._json_box is not None and obs.dtype == self._json_box:
                # What spacecodec.to_json writes for a Box sample of its own dtype, without
                # the dispatch on the space: the original JSON path runs this every step.
                return [b"\x00" + pack_field(json_array(obs))]
        return [self._json_observation(obs)]


@functools.lru_cache(maxsize=64)
def _byte_list_header(ndim: int) -> struct.Struct:
    """Kind 1 (a byte list), the field's length, ndim, the dims: what precedes the bytes."""
    return struct.Struct(f"<BII{ndim}I")


_F64: Final = np.dtype("<f8")
_U8: Final = np.dtype(np.uint8)
#: An extended step reply after its observation, with an empty info: what
#: ``STEP_EX_TAIL.pack(...) + EMPTY_INFO`` writes, in one pack (the info's length and JSON last).
_FRAME_TAIL: Final = struct.Struct("<d??I2s")
_NO_INFO: Final = (2, b"{}")

#: The end of a usual ``FINAL_OBS`` vector step reply: the empty info, no final field.
_EMPTY_NO_FINALS: Final = EMPTY_INFO + NO_FINALS
_BOOL: Final = np.dtype(np.bool_)


class _VectorLayout(NamedTuple):
    """The bytes around the arrays of a usual vector step reply (:meth:`ReplyWriter.
    _vector_reply`), for a batch of ``obs_dtype`` and ``obs_shape`` and columns of
    ``column_shape``: the status and the batch's tensor header, then each column's field and
    tensor header."""

    obs_dtype: np.dtype[Any]
    obs_shape: tuple[int, ...]
    reward_dtype: np.dtype[Any]
    flag_dtype: np.dtype[Any]
    column_shape: tuple[int, ...]
    head: bytes
    rewards_head: bytes
    flags_head: bytes

    @classmethod
    def learn(
        cls,
        obs: np.ndarray[Any, Any],
        rewards: np.ndarray[Any, Any],
        terminations: np.ndarray[Any, Any],
        truncations: np.ndarray[Any, Any],
        errors: bool,
    ) -> _VectorLayout | None:
        """The layout of these arrays' reply, None when it is no usual one."""
        n = obs.shape[0] if obs.ndim else -1
        if (
            obs.dtype not in CODE_BY_DTYPE
            or not obs.dtype.isnative
            or obs.ndim > 32
            or rewards.dtype != _F64
            or terminations.dtype != _BOOL
            or truncations.dtype != _BOOL
            or not rewards.shape == terminations.shape == truncations.shape == (n,)
        ):
            return None
        tensor = TENSOR_HEADERS[obs.ndim].pack(CODE_BY_DTYPE[obs.dtype], obs.ndim, *obs.shape)
        size = len(tensor) + obs.nbytes
        head = (b"\x00" if errors else b"") + b"\x02" + U32.pack(size) + tensor
        return cls(
            obs.dtype,
            obs.shape,
            rewards.dtype,
            terminations.dtype,
            rewards.shape,
            head,
            _column_head(_F64, n),
            _column_head(_BOOL, n),
        )


def _column_head(dtype: np.dtype[Any], n: int) -> bytes:
    """The bytes before a column of ``n`` items of ``dtype``'s: what :func:`pack_column`
    writes before the data."""
    return pack_column(np.zeros(n, dtype), dtype)[: -n * dtype.itemsize or None]


#: The dtype kinds whose arrays typed JSON writes as base64 (``jsonio.typed_default``).
_NUMERIC_KINDS: Final = frozenset("biuf")
#: Native arrays' bytes are little-endian, as typed JSON's are.
_LITTLE: Final = sys.byteorder == "little"


def _typed_dict(value: dict[str, Any], out: list[bytes]) -> bool:
    """Append to ``out`` the typed JSON of ``value`` as ``jsonio.dumps_info(value,
    typed=True)`` writes it, when its keys are plain ASCII and its values are numeric arrays,
    object arrays of None and numeric arrays (SameStep's ``final_obs``), or dicts of these;
    else return False (``out`` then holds a part: discard it)."""
    out.append(b"{")
    first = True
    for key, item in value.items():
        if type(key) is not str or not _plain(key):
            return False
        out.append(b'"%s":' % key.encode() if first else b',"%s":' % key.encode())
        first = False
        if type(item) is dict:
            if not _typed_dict(item, out):
                return False
        elif type(item) is np.ndarray:
            if item.dtype.kind == "O":
                if item.ndim != 1:
                    return False
                out.append(b'{"__ndarray__":[')
                for i, element in enumerate(item.tolist()):
                    if i:
                        out.append(b",")
                    if element is None:
                        out.append(b"null")
                    elif type(element) is not np.ndarray or not _typed_array(element, out):
                        return False
                out.append(b'],"dtype":"object","shape":[%d]}' % len(item))
            elif not _typed_array(item, out):
                return False
        else:
            return False
    out.append(b"}")
    return True


def _typed_array(array: np.ndarray[Any, Any], out: list[bytes]) -> bool:
    """Append a numeric array's typed JSON (``jsonio.typed_default``'s form), or False."""
    dtype = array.dtype
    if dtype.kind not in _NUMERIC_KINDS or not (dtype.isnative and _LITTLE):
        return False
    data = base64.b64encode(np.ascontiguousarray(array).tobytes())
    shape = ",".join(map(str, array.shape)).encode()
    out.append(
        b'{"__ndarray__":"%s","dtype":"%s","shape":[%s]}' % (data, dtype.name.encode(), shape)
    )
    return True


def _plain(key: str) -> bool:
    """Whether JSON writes ``key`` as itself between quotes (printable ASCII, no quote or
    backslash: nothing to escape)."""
    return key.isascii() and key.isprintable() and '"' not in key and "\\" not in key
