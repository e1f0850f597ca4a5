"""gym-socket: the fixed layouts of the usual step replies, for the client's lean reads.

An env's step replies are nearly always alike: status OK, observations of one dtype and shape,
no info. Such a reply, once parsed by the general path, leaves its layout here: which bytes
are fixed (the status, field lengths, array headers, the empty info) and where each array lies.
A later reply whose fixed bytes are the same has its arrays where they lay before, so it is read
with one ``np.frombuffer`` per array, straight from the receive buffer. Anything else (an error,
an info, other shapes) does not match, and the general path reads it.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from envwire import jsonio
from envwire.errors import EnvwireError
from envwire.protocols.gymsocket.finals import (
    NO_FINALS,
    UsualFinals,
    merge_finals,
    read_finals,
    usual_finals,
)
from envwire.protocols.gymsocket.packets import EMPTY_INFO, MAX_FIELD, OBS_JSON, STATUS_OK, U32
from envwire.tensor import NDARRAY

__all__ = [
    "OWN_MIN",
    "LeanStep",
    "SeedLayout",
    "SplitStep",
    "StepLayout",
    "StepRead",
    "StepResult",
    "VectorLayout",
    "VectorStep",
]

_EMPTY_INFO_SIZE = len(EMPTY_INFO)
#: A step's result as Gymnasium returns it: observation, reward, terminated, truncated, info.
StepResult = tuple[Any, float, bool, bool, dict[str, Any]]
#: A layout's read of a whole reply: (the buffer, the reply's size, whether to copy the
#: observation out of the buffer) -> the step's result, or None when it is no usual reply.
StepRead = Callable[[memoryview, int, bool], StepResult | None]


class LeanStep(NamedTuple):
    """One lean step of a one-env connection, made once per action: the request's bytes,
    the size of the buffer of its own the reply is read into (``StepLayout.own``; 0: any
    buffer, and the observation is copied out of it) and the read of that reply."""

    request: bytes
    own: int
    read: StepRead


#: Where an array lies in a reply: its offset, dtype, number of items, shape (None: 1-D).
_Array = tuple[int, np.dtype[Any], int, tuple[int, ...] | None]


def _place(array: npt.NDArray[Any], end: int) -> _Array:
    return end - array.nbytes, array.dtype, array.size, None if array.ndim == 1 else array.shape


def _array(view: memoryview, place: _Array) -> npt.NDArray[Any]:
    """A copy of the array at ``place`` in ``view`` (the buffer is reused for the next read)."""
    offset, dtype, items, shape = place
    array = np.frombuffer(view, dtype, items, offset)
    return (array if shape is None else array.reshape(shape)).copy()


#: Observations of at least this many bytes are worth a buffer of their own per reply, read
#: in place (:attr:`StepLayout.own`): below it, copying them out of a reused buffer costs less
#: than allocating one.
OWN_MIN: Final = 16 * 1024


class StepLayout(NamedTuple):
    """An extended one-env step reply: ``head`` (every byte before the observation's), the
    observation, then the reward, terminated and truncated at ``tail``, then the empty info.
    ``unpack`` reads a whole reply's head, reward, flags and info in one call. ``own``: the
    reply's size when its observation is large (:data:`OWN_MIN`) and lies aligned for its
    dtype, so that a reply read into a buffer of its own is read with no copy
    (:meth:`read`'s ``copy=False``); else 0."""

    head: bytes
    obs: _Array
    tail: int
    size: int
    unpack: Callable[[memoryview], tuple[bytes, float, bool, bool, bytes]]
    own: int

    @classmethod
    def learn(
        cls, data: bytes | bytearray | memoryview, obs: npt.NDArray[Any], tail: int, end: int
    ) -> StepLayout | None:
        """The layout of the reply in ``data[:end]``, whose observation ``obs`` ended at
        ``tail``; None when it is no usual one (its info is not the empty one)."""
        if bytes(data[tail + 10 : end]) != EMPTY_INFO or not obs.dtype.isnative:
            return None
        place = _place(obs, tail)
        fixed = struct.Struct(f"<{place[0]}s{tail - place[0]}xd??{_EMPTY_INFO_SIZE}s")
        # (a buffer of its own comes from malloc: aligned for any dtype at its start)
        own = end if obs.nbytes >= OWN_MIN and place[0] % obs.dtype.alignment == 0 else 0
        return cls(bytes(data[: place[0]]), place, tail, end, fixed.unpack_from, own)

    def wants(self, view: memoryview, size: int) -> int:
        """How many bytes a reply beginning as ``view[:size]`` has in all, as far as they
        tell (its head, then its info's length); 0 when it does not begin as this layout."""
        head = len(self.head)
        if size < head or view[:head] != self.head:
            return 0
        if size < self.tail + 14:
            return self.tail + 14
        return int(self.tail + 14 + U32.unpack_from(view, self.tail + 10)[0])

    def read(self, view: memoryview, size: int, copy: bool = True) -> StepResult | None:
        """The step's result when ``view[:size]`` is a whole reply of this layout. Its
        observation is a copy; with ``copy=False``, a view of ``view``, which must then be
        a buffer of this reply's own, never reused."""
        if size != self.size:
            return None
        head, reward, terminated, truncated, info = self.unpack(view)
        if head != self.head or info != EMPTY_INFO:
            return None
        offset, dtype, items, shape = self.obs  # _array(), inlined: the read of every step
        obs = np.frombuffer(view, dtype, items, offset)
        if shape is not None:
            obs = obs.reshape(shape)
        return obs.copy() if copy else obs, reward, terminated, truncated, {}

    def read_reset(self, view: memoryview, size: int) -> tuple[Any, dict[str, Any]] | None:
        """The observation and info of a reset when ``view[:size]`` is a whole reset reply in
        this layout: the step's head and observation, then the empty info where the step's
        reward began (the server writes a reset's observation as it writes a step's)."""
        tail = self.tail
        if (
            size != tail + _EMPTY_INFO_SIZE
            or view[: len(self.head)] != self.head
            or view[tail:size] != EMPTY_INFO
        ):
            return None
        offset, dtype, items, shape = self.obs
        obs = np.frombuffer(view, dtype, items, offset)
        return (obs if shape is None else obs.reshape(shape)).copy(), {}


#: The seed step reply's tail: the reward, the done flag, the info field (the empty one: 6 bytes).
_SEED_TAIL = struct.Struct(f"<d?{_EMPTY_INFO_SIZE}s")
#: JSON's own scanner: one value from a text at an offset, and where it ends (``json.loads``
#: without the Python around it; malformed text raises ``StopIteration`` or ``ValueError``).
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_F64, _F32 = np.dtype(np.float64), np.dtype(np.float32)
_BOOL = np.dtype(np.bool_)
#: The largest float32, as a Python float: no value within +-it overflows when narrowed.
_F32_MAX = float(np.finfo(np.float32).max)


class SeedLayout(NamedTuple):
    """A seed (handshake flags without ``EXTENDED``) step reply for a flat float ``Box``:
    ``[status OK,]`` the observation as kind 0 and its JSON text, the reward, one done flag,
    then the empty info. Its length varies with the text, so it is known from the space rather
    than learned from a reply. :meth:`read` gives what the general path gives (the text read as
    ``jsonio.loads`` then ``spacecodec.from_json`` read it) or None where it might not: any
    other shape, type or value range, which the general path then reads or reports."""

    #: Where the observation's kind is (1 after the status of error replies, else 0).
    pos: int
    shape: tuple[int, ...]
    #: float32 (narrowed from the JSON numbers) or float64.
    dtype: np.dtype[Any]

    @classmethod
    def learn(cls, space: spaces.Space[Any], errors: bool) -> SeedLayout | None:
        """The layout of the replies of ``space``'s observations, if they may be read lean."""
        if type(space) is not spaces.Box or len(space.shape) != 1 or not space.shape[0]:
            return None
        if space.dtype not in (_F64, _F32):
            return None
        return cls(int(errors), space.shape, _F32 if space.dtype == _F32 else _F64)

    def wants(self, view: memoryview, size: int) -> int:
        """As :meth:`StepLayout.wants`: the whole reply's size as far as ``view[:size]``
        tells, 0 when it does not begin as this layout."""
        tail = self._text_end(view, size)
        if tail is None:
            return 0
        if size < tail + 13:
            return tail + 13
        return int(tail + 13 + U32.unpack_from(view, tail + 9)[0])

    def read(self, view: memoryview, size: int, copy: bool = True) -> StepResult | None:
        """The step's result when ``view[:size]`` is a whole reply of this layout (its
        observation is made from the text: ``copy`` changes nothing)."""
        pos = self.pos  # _text_end(), inlined: the read of every step
        if size < pos + 5 or view[pos] != OBS_JSON or (pos and view[0] != STATUS_OK):
            return None
        tail = pos + 5 + U32.unpack_from(view, pos + 1)[0]
        if size != tail + _SEED_TAIL.size:
            return None
        reward, done, info = _SEED_TAIL.unpack_from(view, tail)
        if info != EMPTY_INFO:
            return None
        obs = self._observation(view, pos + 5, tail)
        return None if obs is None else (obs, reward, done, False, {})

    def read_reset(self, view: memoryview, size: int) -> tuple[Any, dict[str, Any]] | None:
        """The observation and info of a seed reset when ``view[:size]`` is its whole reply:
        ``[status OK,]`` the observation as a step's, and nothing after it."""
        if size != self._text_end(view, size):
            return None
        obs = self._observation(view, self.pos + 5, size)
        return None if obs is None else (obs, {})

    def _text_end(self, view: memoryview, size: int) -> int | None:
        """Where the observation's JSON text ends when ``view[:size]`` begins as this
        layout (the status, the observation's kind and the text's length), else None."""
        pos = self.pos
        if size < pos + 5 or view[pos] != OBS_JSON or (pos and view[0] != STATUS_OK):
            return None
        return int(pos + 5 + U32.unpack_from(view, pos + 1)[0])

    def _observation(self, view: memoryview, start: int, end: int) -> npt.NDArray[Any] | None:
        """The observation whose JSON text is ``view[start:end]``, or None where the general
        path might read it otherwise."""
        try:
            values, stop = _SCAN(str(view[start:end], "utf-8"), 0)
            array = np.array(values)
        except (StopIteration, ValueError, TypeError, OverflowError, RecursionError):
            return None
        # A flat list of numbers (ints and bools among floats too, as np.array makes of them),
        # all of the text, of the space's length.
        if array.dtype is not _F64 or array.shape != self.shape or stop != end - start:
            return None
        if self.dtype is _F32:
            # Within float32's range nothing overflows; the general path refuses what does and
            # keeps infinities. (A NaN first in the list makes min or max NaN, and the test
            # false; a later one is passed over, and narrows to NaN.)
            if not (min(values) >= -_F32_MAX and max(values) <= _F32_MAX):
                return None
            return array.astype(_F32)
        return array


class VectorLayout(NamedTuple):
    """A vector step reply: observations, rewards, terminations and truncations (four arrays),
    and the empty info (then, with ``finals``, the ``FINAL_OBS`` field's kind 0); ``fixed``
    holds every byte around the arrays, by offset."""

    fixed: tuple[tuple[int, bytes], ...]
    arrays: tuple[_Array, ...]
    size: int
    finals: bool = False
    #: Each array's first and past-the-last byte, dtype and shape, for :meth:`read`.
    spans: tuple[tuple[int, int, np.dtype[Any], tuple[int, ...]], ...] = ()
    #: With ``finals``: the usual final field's fixed bytes, for :meth:`read_split` (None
    #: where the observations are not one tensor, or the episode ends not bool arrays).
    usual: UsualFinals | None = None
    #: Every fixed byte before the final field's kind (all of them without ``finals``),
    #: read in one call, and what they are: :meth:`read_split`'s check of the layout.
    head: Callable[[bytearray], tuple[bytes, ...]] = struct.Struct("").unpack_from
    heads: tuple[bytes, ...] = ()

    @classmethod
    def learn(
        cls,
        data: bytes | bytearray | memoryview,
        arrays: list[tuple[npt.NDArray[Any], int]],
        end: int,
        finals: bool = False,
    ) -> VectorLayout | None:
        """The layout of the reply in ``data[:end]``, given its arrays with the offset where
        each ends; None when it is no usual one (an info, a byte order not native, final
        observations)."""
        tail = EMPTY_INFO + NO_FINALS if finals else EMPTY_INFO
        if bytes(data[end - len(tail) : end]) != tail:
            return None
        if not all(array.dtype.isnative for array, _ in arrays):
            return None
        places = tuple(_place(array, stop) for array, stop in arrays)
        fixed, start = [], 0
        for (offset, *_), (_, stop) in zip(places, arrays, strict=True):
            fixed.append((start, bytes(data[start:offset])))
            start = stop
        fixed.append((start, bytes(data[start:end])))
        spans = tuple(
            (offset, stop, array.dtype, array.shape)
            for (offset, *_), (array, stop) in zip(places, arrays, strict=True)
        )
        obs, _, terminated, truncated = (array for array, _ in arrays)
        usual = None
        if finals and obs.ndim and terminated.dtype == truncated.dtype == _BOOL:
            usual = usual_finals(len(terminated), obs.dtype, obs.shape[1:])
        if finals:  # the final field's kind is not part of the head
            fixed[-1] = (fixed[-1][0], fixed[-1][1][: -len(NO_FINALS)])
        layout, start = ["<"], 0
        for offset, part in fixed:
            layout.append(f"{offset - start}x{len(part)}s")
            start = offset + len(part)
        head = struct.Struct("".join(layout)).unpack_from
        heads = tuple(part for _, part in fixed)
        if finals:
            fixed[-1] = (fixed[-1][0], fixed[-1][1] + NO_FINALS)
        return cls(tuple(fixed), places, end, finals, spans, usual, head, heads)

    def wants(self, view: memoryview, size: int) -> int:
        """The whole reply's size when ``view[:size]`` begins as this layout (its first fixed
        bytes, which give the observations' size; then its info's length), else 0."""
        head = self.fixed[0][1]
        if size < len(head) or view[: len(head)] != head:
            return 0
        info = self.fixed[-1][0]  # where the info field begins: its length, then its JSON
        if size < info + 4:
            return self.size
        return int(info + 4 + U32.unpack_from(view, info)[0]) + self.finals

    def read(self, view: memoryview, size: int) -> VectorStep | None:
        """The four arrays and the info when ``view[:size]`` is a whole reply of this layout
        (each array a copy: the buffer is reused for the next read); an info other than the
        empty one is read as the general path reads it (None where that would fail: the
        general path then reports it)."""
        fixed = self.fixed
        # The receive buffer itself, when the view is all of it (the transport's inbox): its
        # slices are bytearrays of their own, where a memoryview's compare item by item and
        # an array's copy costs a second NumPy call.
        data = view.obj
        if type(data) is not bytearray or len(data) != view.nbytes:
            data = bytearray(view[:size])
        if size == self.size:
            if self.head(data) != self.heads or (self.finals and data[size - 1]):
                return None
            infos: dict[str, Any] = {}
        else:
            info = fixed[-1][0]
            if size < info + 4:
                return None
            end = info + 4 + U32.unpack_from(view, info)[0]
            if (end >= size if self.finals else end != size) or end - info - 4 > MAX_FIELD:
                return None
            for offset, part in fixed[:-1]:
                if not data.startswith(part, offset):
                    return None
            try:
                infos = jsonio.loads_info(bytes(view[info + 4 : end]))
                if self.finals:  # the final observations' field, after the info
                    finals = read_finals(view, end, size, self.arrays[1][2])
                    if finals is None or finals[3] != size:
                        return None
                    infos = merge_finals(infos, *finals[:3])
            except (EnvwireError, ValueError, TypeError, KeyError, IndexError):
                return None
        # Unrolled: this runs once per batch, and a generator's frames cost more than the reads.
        # Each array is over a copy of its own bytes (aligned and writable: the buffer is
        # reused for the next read).
        (a0, z0, d0, s0), (a1, z1, d1, s1), (a2, z2, d2, s2), (a3, z3, d3, s3) = self.spans
        return (
            NDARRAY(s0, d0, data[a0:z0]),
            NDARRAY(s1, d1, data[a1:z1]),
            NDARRAY(s2, d2, data[a2:z2]),
            NDARRAY(s3, d3, data[a3:z3]),
            infos,
        )

    def read_split(self, view: memoryview, size: int) -> SplitStep | None:
        """:meth:`read`'s arrays and info, with the final observations kept apart where they
        may be: when the reply is the usual one (an empty info, and a final field that is
        empty or the usual one, :func:`~.finals.usual_finals`, whose mask is exactly the
        copies whose episodes ended), its info is ``{}`` and the last item the batch of the
        ended copies' final observations in copy order (0 rows where none ended): Gymnasium's
        vector info is :func:`~.finals.merge_finals` of them. For any other reply the info is
        :meth:`read`'s and the last item None. None where :meth:`read` is None."""
        usual = self.usual
        if usual is None:
            step = self.read(view, size)
            return None if step is None else (*step, None)
        data = view.obj  # as in read(): the receive buffer itself, or a copy of the reply
        if type(data) is not bytearray or len(data) != view.nbytes:
            data = bytearray(view[:size])
        (a0, z0, d0, s0), (a1, z1, d1, s1), (a2, z2, d2, s2), (a3, z3, d3, s3) = self.spans
        if size == self.size:  # no final field's batch: none ended, or read() reports it
            if self.head(data) != self.heads or data[size - 1]:
                return None
            finals: npt.NDArray[Any] | None = NDARRAY(usual.shapes[0], d0)
        else:
            finals = self._finals(data, size, usual)
            if finals is None:
                step = self.read(view, size)
                return None if step is None else (*step, None)
        return (
            NDARRAY(s0, d0, data[a0:z0]),
            NDARRAY(s1, d1, data[a1:z1]),
            NDARRAY(s2, d2, data[a2:z2]),
            NDARRAY(s3, d3, data[a3:z3]),
            {},
            finals,
        )

    def _finals(self, data: bytearray, size: int, usual: UsualFinals) -> npt.NDArray[Any] | None:
        """The final observations when ``data[:size]`` is a whole reply of this layout with
        an empty info and the usual final field, whose mask is exactly the copies whose
        terminated or truncated flag is set; else None."""
        mask = self.size - len(NO_FINALS)  # where the final field begins: its kind, the mask
        if not data.startswith(usual.before, mask):
            return None
        mask += len(usual.before)
        num = len(usual.heads) - 1
        flags = data[mask : mask + num]
        ended = flags.count(1)
        if not ended or flags.count(0) != num - ended:
            return None
        head = usual.heads[ended]
        batch = mask + num + len(head)
        if size != batch + usual.sizes[ended] or not data.startswith(head, mask + num):
            return None
        if self.head(data) != self.heads:
            return None
        # The mask is the copies that ended (terminated | truncated, bools byte by byte).
        (a2, z2, *_), (a3, z3, *_) = self.spans[2:]
        done = int.from_bytes(data[a2:z2], "little") | int.from_bytes(data[a3:z3], "little")
        if done != int.from_bytes(flags, "little"):
            return None
        return NDARRAY(usual.shapes[ended], self.spans[0][2], data[batch:size])


#: A vector step's result: observations, rewards, terminations, truncations, infos.
VectorStep = tuple[
    npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[Any], dict[str, Any]
]
#: :meth:`VectorLayout.read_split`'s: a vector step's result and the final observations
#: kept apart (None: the info holds them, as Gymnasium's has them).
SplitStep = tuple[
    npt.NDArray[Any],
    npt.NDArray[Any],
    npt.NDArray[Any],
    npt.NDArray[Any],
    dict[str, Any],
    npt.NDArray[Any] | None,
]
