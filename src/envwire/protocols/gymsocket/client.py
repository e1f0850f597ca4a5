"""gym-socket: the client's end, sans-IO (requests out, replies in, pipelined in order)."""

from __future__ import annotations

import struct
from collections import deque
from typing import Any

import numpy as np
from gymnasium import Space

from envwire import jsonio, spacecodec
from envwire import messages as m
from envwire.errors import (
    EnvwireError,
    ProtocolError,
    UsageError,
)
from envwire.protocols.gymsocket.client_replies import Parsed, ReplyParser
from envwire.protocols.gymsocket.lean import (
    LeanStep,
    SeedLayout,
    SplitStep,
    StepLayout,
    StepResult,
    VectorLayout,
    VectorStep,
)
from envwire.protocols.gymsocket.packets import (
    CODE_BY_DTYPE,
    OBS_BYTES,
    OBS_TENSOR,
    STATUS_OK,
    STEP_EX_TAIL_INFO,
    TENSOR_HEADERS,
    U8,
    U32,
    Flags,
    HandshakeReply,
    NeedData,
    Packet,
    Upload,
    json_bytes,
    pack_field,
    pack_tensor,
)

__all__ = ["ClientConnection"]

_STEP_BYTES = {p: U8.pack(p) for p in (Packet.STEP, Packet.STEP_EX)}
_UNSEEDED_RESET = U8.pack(Packet.RESET_EX) + pack_field(json_bytes({"seed": None, "options": None}))
_SEED_RESET = U8.pack(Packet.RESET)

#: The vector step's packet as a global: an enum member's load goes through the enum type's
#: __getattr__ (about 850 instructions, every batch).
_VECTOR_STEP = Packet.VECTOR_STEP
#: How many distinct actions' step requests a connection keeps (a Discrete space's actions).
_LEAN_ACTIONS = 1024
#: The integer actions' types (a tuple: ``int | np.integer`` would be built on every call).
_INTEGERS = (int, np.integer)
#: The integer types whose actions' lean steps are kept (:meth:`ClientConnection.lean_step`),
#: found by one set lookup where ``isinstance`` walks ``np.integer``'s subclass check.
_KEPT_TYPES: frozenset[type] = frozenset({int, *(np.dtype(c).type for c in "bBhHiIlLqQ")})


def _unread(view: memoryview, size: int, copy: bool) -> None:
    """The read of a lean step whose reply's layout is not known yet: the general path's."""


class ClientConnection(ReplyParser):
    """The client's end: encodes the handshake and commands, parses replies in order.

    Requests may be pipelined: each ``send_*`` queues the reply it expects, and
    ``next_event`` returns replies in the order the requests were sent.
    """

    def __init__(self, flags: Flags = Flags.ERRORS | Flags.MONITOR_REPLY | Flags.EXTENDED) -> None:
        super().__init__()
        self._set_flags(flags)
        self._expect: deque[Packet | str] = deque()
        #: The step and reset packets this connection sends (its flags stay as they are).
        self._step_packet = Packet.STEP_EX if self._extended else Packet.STEP
        self._reset_packet = Packet.RESET_EX if self._extended else Packet.RESET
        #: The lean reads (:meth:`lean_step_reply`): the usual replies' layouts (an extended
        #: step's once seen, a seed step's from the observation space), and each action's step
        #: request.
        self._step_layout: StepLayout | SeedLayout | None = None
        #: The size of the usual step reply when its observation is large enough to be read
        #: in place (``StepLayout.own``): the reply to a lean step may then be read into a
        #: fresh buffer of this size and read with :meth:`lean_owned_reply`. 0: read it into
        #: any buffer, with :meth:`lean_step_reply`.
        self.own_size = 0
        self._vector_layout: VectorLayout | None = None
        self._lean_requests: dict[object, bytes] = {}
        #: Each integer action's lean step (:meth:`lean_step`), while the layout is the same.
        self._lean_steps: dict[object, LeanStep] = {}
        #: The lean vector step request (:meth:`lean_vector_request`): the last batch of
        #: actions' dtype and shape, and the bytes before the batch's own.
        self._vector_head: tuple[np.dtype[Any], tuple[int, ...], bytes] | None = None

    def set_spaces(self, action_space: Space[Any], observation_space: Space[Any]) -> None:
        """Tell the codec the env's spaces (needed to decode actions/observations)."""
        super().set_spaces(action_space, observation_space)
        if not self._extended and not self._vector:
            self._step_layout = SeedLayout.learn(observation_space, self._errors)
            self._lean_steps.clear()

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
            parsed: Parsed | None = None
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
            layout = self._step_layout = StepLayout.learn(data, obs, tail, end)
            self.own_size = 0 if layout is None else layout.own
            self._lean_steps.clear()
        return m.StepReply(obs, reward, terminated, truncated, info), end

    # -- the lean reads: one step in flight, its usual reply read in one go ----------------

    def lean_step(self, action: object) -> LeanStep | None:
        """The lean step of ``action``, or None where only :meth:`send_request` applies: a
        one-env connection, extended with error replies or a seed one (without
        ``EXTENDED``), nothing else in flight or buffered, and an integer action of a
        ``Discrete`` space. Nothing is recorded: write its request, read its reply into a
        buffer (a fresh one of ``own`` bytes, when ``own`` is not 0) and call its ``read``
        once the reply may be whole; it gives the step's result, or None for a reply that is
        not whole or not in the usual layout (an error, an info, the first reply, which
        teaches the layout): then call :meth:`lean_sent`, and read the reply as any other.
        An integer action's lean step is made once, while the layout stays the same.
        """
        step = self._lean_steps.get(action) if type(action) in _KEPT_TYPES else None
        if step is None or self._expect or self._buf.data:
            return self._make_lean_step(action)
        return step

    def _make_lean_step(self, action: object) -> LeanStep | None:
        if (
            not self._int_actions
            or self._expect
            or self._buf.data
            or not isinstance(action, _INTEGERS)
            or (self._extended and not self._errors)
            or self._vector
        ):
            return None
        request = self._lean_requests.get(action)
        if request is None:
            request = _STEP_BYTES[self._step_packet] + self._action(action)
            if len(self._lean_requests) < _LEAN_ACTIONS:
                self._lean_requests[action] = request
        layout = self._step_layout
        if layout is None:
            return LeanStep(request, 0, _unread)
        step = LeanStep(request, self.own_size, layout.read)
        if type(action) in _KEPT_TYPES and len(self._lean_steps) < _LEAN_ACTIONS:
            self._lean_steps[action] = step
        return step

    def lean_sent(self) -> None:
        """Expect the reply to the lean step whose ``read`` gave None, as to a step sent
        with :meth:`send_request`: read it with :meth:`lean_step_reply` (or
        :meth:`lean_owned_reply`, from the buffer of its own), else :meth:`next_event`."""
        self._expect.append(self._step_packet)

    def lean_reset_request(self, seed: object, options: object) -> bytes | None:
        """:meth:`send_request`'s bytes of the usual reset (no seed, no options), whose reply
        :meth:`lean_reset_reply` may read; None where :meth:`lean_step` is."""
        if (
            seed is not None
            or options is not None
            or self._expect
            or self._buf.data
            or (self._extended and not self._errors)
            or self._vector
        ):
            return None
        self._expect.append(self._reset_packet)
        return _UNSEEDED_RESET if self._extended else _SEED_RESET

    def lean_reset_reply(self, view: memoryview, size: int) -> tuple[Any, dict[str, Any]] | None:
        """:meth:`lean_step_reply` for the one reset in flight: its observation and info,
        when its reply is the usual step reply's head and observation, then the empty info
        (a seed connection's: the observation alone)."""
        expect, layout = self._expect, self._step_layout
        if layout is None or len(expect) != 1 or expect[0] is not self._reset_packet:
            return None
        if self._buf.data:
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
        self._expect.append(_VECTOR_STEP)
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

    def lean_vector_split(self, view: memoryview, size: int) -> SplitStep | None:
        """:meth:`lean_vector_step` with the final observations of the usual reply kept apart
        (:meth:`VectorLayout.read_split`): for a SameStep vector env that reads them per copy
        (SB3's) rather than as Gymnasium's vector info."""
        expect, layout = self._expect, self._vector_layout  # _lean_layout(), inlined
        if layout is None or len(expect) != 1 or expect[0] is not _VECTOR_STEP or self._buf.data:
            return None
        step = layout.read_split(view, size)
        if step is not None:
            expect.popleft()
        return step

    def _lean_layout(self) -> StepLayout | SeedLayout | VectorLayout | None:
        """The layout the reply to the one request in flight may have, if it may be lean."""
        if len(self._expect) != 1 or self._buf.data:
            return None
        expect = self._expect[0]
        if expect is self._step_packet:
            return self._step_layout
        return self._vector_layout if expect is _VECTOR_STEP else None

    def lean_wants(self, view: memoryview, size: int) -> int:
        """How many bytes the reply to the one request in flight has in all, as far as its
        first ``size`` bytes in ``view`` tell, when they begin as its usual layout; 0 when
        they do not, or are too few to tell: then only the general path applies."""
        layout = self._lean_layout()
        return 0 if layout is None else layout.wants(view, size)

    def lean_step_reply(self, view: memoryview, size: int) -> StepResult | None:
        """The step's result from the first ``size`` bytes of ``view``, when they are the
        whole reply to the one step in flight (:meth:`lean_sent`) in its usual layout
        (taught by the first usual reply :meth:`next_event` parsed); else None, and nothing is
        consumed: feed the bytes to :meth:`receive_view` and read with :meth:`next_event`.
        The observation is a copy, as :meth:`next_event`'s is; the info a fresh ``{}``. A seed
        connection's layout comes from its observation space (:class:`SeedLayout`).
        """
        # _lean_layout(), inlined: the read of every step
        expect, layout = self._expect, self._step_layout
        if (
            layout is None
            or len(expect) != 1
            or expect[0] is not self._step_packet
            or self._buf.data
        ):
            return None
        result = layout.read(view, size)
        if result is not None:
            self._expect.popleft()
        return result

    def lean_owned_reply(self, view: memoryview, size: int) -> StepResult | None:
        """:meth:`lean_step_reply` of a reply read into ``view``, a buffer of its own that
        is never reused (:attr:`own_size`): the observation is a view of it, no copy."""
        layout = self._lean_layout()  # (a frame's read: one call more is nothing beside it)
        if type(layout) is not StepLayout:
            return None
        result = layout.read(view, size, copy=False)
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
