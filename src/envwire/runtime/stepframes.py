"""Fixed binary frames for a vector worker's usual step, beside the pipe's pickles.

A vector session split over worker processes (:class:`~envwire.runtime.vector.VectorGroup`)
sends each process its slice of the actions and reads back its slice of the results on every
batch. Pickling both costs the server more than everything else of the batch (a pickle per call
and per reply, the arrays rebuilt by a Python function each), so the usual step travels as
fixed frames instead:

- the call: ``S``, one byte giving the length of the actions' description (its NumPy dtype
  string and shape, in ASCII: ``<i8:4``), the description, then the actions' raw bytes;
- the reply: ``R``, the observations' description as above, then the raw bytes of the
  observations, the rewards (float64), the terminations and the truncations (bool), then the
  infos pickled only when they are not empty.

Only C-contiguous arrays of plain dtypes (booleans, integers, floats, complex numbers) travel
so; every other call and reply (a dict of observations, an error, a reset) is the pipe's pickle
(:func:`~envwire.runtime.pipe.dumps`), which starts with pickle's ``PROTO`` byte (0x80), so the
first byte tells the two kinds apart. Each side keeps the descriptions it has seen (at most
:data:`MAX_LAYOUTS`) so that a frame costs a dictionary lookup, not a parse.
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Callable
from operator import itemgetter
from typing import Any

import numpy as np

from envwire.messages import FinalsInfo
from envwire.runtime.pipe import dumps
from envwire.tensor import NDARRAY

__all__ = [
    "MAX_LAYOUTS",
    "STEP_CALL",
    "STEP_REPLY",
    "StepPlan",
    "join_infos",
    "read_step_call",
    "read_step_reply",
    "step_call",
    "step_reply",
]

STEP_CALL = ord("S")
STEP_REPLY = ord("R")

#: Descriptions (dtype and shape) each side keeps parsed; past this, the cache starts over.
MAX_LAYOUTS = 64

_LENGTH = struct.Struct("<I")
_F8 = np.dtype(np.float64)
_BOOL = np.dtype(np.bool_)
_PLAIN = "biufc"

#: (dtype, shape) -> the frame's head after its tag (the description's length and itself), or
#: None for arrays that do not travel raw.
_heads: dict[tuple[np.dtype[Any], tuple[int, ...]], bytes | None] = {}
#: What :data:`_heads` gives for a key it does not hold.
_UNKNOWN = b""
#: A description's bytes -> (dtype, shape, nbytes).
_layouts: dict[bytes, tuple[np.dtype[Any], tuple[int, ...], int]] = {}


def _head(dtype: np.dtype[Any], shape: tuple[int, ...]) -> bytes | None:
    """The description's length byte and the description of arrays of ``dtype`` and ``shape``,
    or None when they do not travel raw."""
    key = (dtype, shape)
    try:
        return _heads[key]
    except KeyError:
        pass
    head: bytes | None = None
    if dtype.kind in _PLAIN and dtype.fields is None and len(shape) >= 1:
        text = f"{dtype.str}:{','.join(map(str, shape))}".encode("ascii")
        head = bytes([len(text)]) + text if len(text) < 256 else None
    if len(_heads) >= MAX_LAYOUTS:
        _heads.clear()
    _heads[key] = head
    return head


def _layout(description: bytes) -> tuple[np.dtype[Any], tuple[int, ...], int]:
    """The dtype, shape and size in bytes a description names."""
    try:
        return _layouts[description]
    except KeyError:
        pass
    text, dims = description.decode("ascii").split(":")
    dtype = np.dtype(text)
    shape = tuple(int(d) for d in dims.split(","))
    layout = (dtype, shape, dtype.itemsize * int(np.prod(shape)))
    if len(_layouts) >= MAX_LAYOUTS:
        _layouts.clear()
    _layouts[description] = layout
    return layout


def step_call(actions: object) -> bytes | None:
    """The whole frame (length included) of a step of ``actions``, or None when they do not
    travel raw (then the call is pickled)."""
    if type(actions) is not np.ndarray:
        return None
    dtype, shape = actions.dtype, actions.shape
    head = _heads.get((dtype, shape), _UNKNOWN)  # (the cache read here: one call less)
    if head is _UNKNOWN:
        head = _head(dtype, shape)
    if head is None or not actions.flags.c_contiguous:
        return None
    size = 1 + len(head) + actions.nbytes
    return b"".join((_LENGTH.pack(size), b"S", head, actions))  # type: ignore[arg-type]


def read_step_call(frame: bytearray) -> np.ndarray[Any, Any]:
    """The actions of a step call's frame (without its length): a writable array over it."""
    end = 2 + frame[1]
    dtype, shape, _ = _layout(bytes(frame[2:end]))
    return np.ndarray(shape, dtype, frame, end)


def step_reply(result: object) -> bytes | None:
    """The whole frame of a vector step's ``result`` (observations, rewards, terminations,
    truncations, infos), or None when it does not travel raw (then it is pickled).

    Raises:
        pickle.PicklingError, TypeError, AttributeError: the infos cannot be pickled.
    """
    if type(result) is not tuple or len(result) != 5:
        return None
    obs, rewards, terminations, truncations, infos = result
    if type(obs) is not np.ndarray or (type(infos) is not dict and type(infos) is not FinalsInfo):
        return None
    head = _head(obs.dtype, obs.shape)
    count = obs.shape[0] if obs.ndim else -1
    if (
        head is None
        or not obs.flags.c_contiguous
        or not _column(rewards, _F8, count)
        or not _column(terminations, _BOOL, count)
        or not _column(truncations, _BOOL, count)
    ):
        return None
    tail = dumps(infos) if infos else b""
    size = 1 + len(head) + obs.nbytes + 10 * count + len(tail)
    parts = (_LENGTH.pack(size), b"R", head, obs, rewards, terminations, truncations, tail)
    return b"".join(parts)  # type: ignore[arg-type]


def _column(array: object, dtype: np.dtype[Any], count: int) -> bool:
    return (
        type(array) is np.ndarray
        and array.dtype == dtype
        and array.shape == (count,)
        and array.flags.c_contiguous
    )


def read_step_reply(frame: bytearray) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
    """A step reply's frame (without its length) as the host returned the step: writable
    arrays over the frame, and the infos."""
    end = 2 + frame[1]
    description = bytes(frame[2:end])
    layout = _layouts.get(description)  # (the cache read here: one call less)
    dtype, shape, size = layout if layout is not None else _layout(description)
    count = shape[0]
    view = memoryview(frame)
    at_flags = end + size + 8 * count
    return (
        NDARRAY(shape, dtype, view[end : end + size]),
        NDARRAY((count,), _F8, view[end + size : at_flags]),
        NDARRAY((count,), _BOOL, view[at_flags : at_flags + count]),
        NDARRAY((count,), _BOOL, view[at_flags + count : at_flags + 2 * count]),
        pickle.loads(view[at_flags + 2 * count :]) if len(frame) > at_flags + 2 * count else {},
    )


class StepPlan:
    """A group's usual step over slices of ``sizes`` copies, worked out once per layout.

    :meth:`calls` cuts a batch of actions into each slice's whole call frame with heads made
    once per dtype and shape of the actions; :meth:`join` joins the slices' reply frames (as
    :class:`~envwire.runtime.process.ProcessWorker` reads them) by the byte offsets of each
    slice's batches, learned from the first replies and kept while the replies' heads stay
    the same. Either answers None for a batch or a reply that is not fixed frames.
    """

    __slots__ = ("_bounds", "_call_dtype", "_call_heads", "_call_shape", "_replies")

    def __init__(self, sizes: list[int]) -> None:
        stops = [sum(sizes[: i + 1]) for i in range(len(sizes))]
        self._bounds = list(zip([0, *stops[:-1]], stops, strict=True))
        # the dtype and shape of the last batch of actions
        self._call_dtype: np.dtype[Any] | None = None
        self._call_shape: tuple[int, ...] | None = None
        # per slice: (the frame's head, first and past-the-last byte in the actions' bytes)
        self._call_heads: list[tuple[bytes, int, int]] | None = None
        self._replies: _ReplyLayout | None = None

    def calls(self, actions: object) -> list[bytes] | None:
        """Each slice's whole call frame for a step of ``actions``, or None when they do not
        travel raw (or are not a batch of the group's size: the group's own checks say so)."""
        if type(actions) is not NDARRAY:
            return None
        dtype, shape = actions.dtype, actions.shape
        if dtype is not self._call_dtype or shape != self._call_shape:
            self._call_heads = self._heads(dtype, shape)
            self._call_dtype, self._call_shape = dtype, shape
        heads = self._call_heads
        if heads is None:
            return None
        data = actions.tobytes()  # (in C order, contiguous or not)
        return [head + data[start:stop] for head, start, stop in heads]

    def _heads(
        self, dtype: np.dtype[Any], shape: tuple[int, ...]
    ) -> list[tuple[bytes, int, int]] | None:
        if not shape or shape[0] != self._bounds[-1][1]:
            return None
        row = dtype.itemsize * int(np.prod(shape[1:]))
        heads = []
        for start, stop in self._bounds:
            head = _head(dtype, (stop - start, *shape[1:]))
            if head is None:
                return None
            size = 1 + len(head) + (stop - start) * row
            heads.append((_LENGTH.pack(size) + b"S" + head, start * row, stop * row))
        return heads

    def join(self, replies: list[Any]) -> tuple[Any, Any, Any, Any, dict[str, Any]] | None:
        """The slices' step replies joined, when every one is a fixed frame (a bytearray
        without its length) and their observations share a dtype and row shape; else None.

        One ``join`` copies the slices' rewards, observations, terminations and truncations
        into one new buffer (the rewards first: every array is aligned), and the four batches
        are arrays over it: fresh and writable on every step, as Gymnasium's are.
        """
        layout = self._replies
        if layout is not None:  # layout.fits(), inlined: the check of every batch
            # (zip without strict=: the lengths are equal by construction, and the keyword
            # would cost a parse on every batch)
            for frame, head in zip(replies, layout.heads):  # noqa: B905
                if type(frame) is not bytearray or not frame.startswith(head):
                    layout = None
                    break
        if layout is None:
            layout = self._replies = _ReplyLayout.learn(replies)
            if layout is None:
                return None
        # each frame's four batches (one C call a frame), then each batch's slices in order
        cut = [cut(frame) for cut, frame in zip(layout.cuts, replies)]  # noqa: B905
        rewards, obs, terminations, truncations = zip(*cut)  # noqa: B905
        buffer = bytearray().join(rewards + obs + terminations + truncations)
        infos = {} if sum(map(len, replies)) == layout.bare else layout.infos(replies)
        return layout.arrays(buffer, infos)

    def staged(self) -> list[tuple[list[memoryview], int, bytes]] | None:
        """Where each slice's next step reply goes when it has the layout of the last ones
        (per slice: the views to read it into, its size, and the length and head it begins
        with; see :meth:`~envwire.runtime.process.ProcessWorker.finish_into`), so that the
        replies are joined as they are read; None before a layout is learned."""
        layout = self._replies
        return None if layout is None else layout.reads

    def take(self) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """:meth:`join`'s result for replies read whole into :meth:`staged`'s views (no infos):
        copies of the four batches over the staging buffer."""
        layout = self._replies
        assert layout is not None  # (staged() gave the views)
        obs, rewards, terminations, truncations, _ = layout.batches
        # a copy of each (fresh, writable arrays): cheaper than one copy of the staging buffer
        # and four arrays made over it, whose constructor parses its arguments each time
        return obs.copy(), rewards.copy(), terminations.copy(), truncations.copy(), {}

    def frame(self, i: int) -> bytearray:
        """Slice ``i``'s reply, read whole into :meth:`staged`'s views, as the frame it came
        as (without its length): for :meth:`join`, when another slice's reply did not fit."""
        layout = self._replies
        assert layout is not None
        return bytearray(b"".join(layout.reads[i][0]))[_LENGTH.size :]


class _ReplyLayout:
    """Where each batch lies in each slice's reply frame, for replies of these heads."""

    __slots__ = (
        "bare",
        "batches",
        "count",
        "cuts",
        "dtype",
        "ends",
        "flags_at",
        "heads",
        "reads",
        "shape",
        "sizes",
        "staging",
    )

    def __init__(
        self, heads: list[bytes], layouts: list[tuple[np.dtype[Any], tuple[int, ...], int]]
    ):
        self.heads = heads
        self.sizes = [shape[0] for _, shape, _ in layouts]
        self.count = sum(self.sizes)
        self.dtype = layouts[0][0]
        self.shape = (self.count, *layouts[0][1][1:])
        self.flags_at = 8 * self.count + sum(size for _, _, size in layouts)
        # per slice: what cuts its frame into its rewards, observations, terminations and
        # truncations (one C call), and where its infos start, when it has some
        self.cuts: list[Callable[[bytearray], tuple[bytearray, ...]]] = []
        self.ends: list[int] = []
        for head, (_, shape, size) in zip(heads, layouts, strict=True):
            start = len(head)
            n = shape[0]
            at_rewards = start + size
            at_flags = at_rewards + 8 * n
            self.cuts.append(
                itemgetter(
                    slice(at_rewards, at_flags),
                    slice(start, at_rewards),
                    slice(at_flags, at_flags + n),
                    slice(at_flags + n, at_flags + 2 * n),
                )
            )
            self.ends.append(at_flags + 2 * n)
        #: the frames' total length when none carries infos
        self.bare = sum(self.ends)
        self._stage(heads, layouts)

    def _stage(
        self, heads: list[bytes], layouts: list[tuple[np.dtype[Any], tuple[int, ...], int]]
    ) -> None:
        """The staging buffer (:meth:`StepPlan.staged`): the joined batches' bytes, then each
        slice's frame length and head; and per slice, the views its reply is read into, in
        the frame's order (length and head, observations, rewards, terminations,
        truncations), how many bytes it has, and what its length and head must be."""
        data = self.flags_at + 2 * self.count
        prefixes = [_LENGTH.pack(end) + head for head, end in zip(heads, self.ends, strict=True)]
        self.staging = bytearray(data + sum(map(len, prefixes)))
        view = memoryview(self.staging)
        self.reads: list[tuple[list[memoryview], int, bytes]] = []
        first, obs_at, prefix_at = 0, 8 * self.count, data
        ends_at = self.flags_at + self.count
        for prefix, (_, shape, size) in zip(prefixes, layouts, strict=True):
            n = shape[0]
            views = [
                view[prefix_at : prefix_at + len(prefix)],
                view[obs_at : obs_at + size],
                view[8 * first : 8 * (first + n)],
                view[self.flags_at + first : self.flags_at + first + n],
                view[ends_at + first : ends_at + first + n],
            ]
            self.reads.append((views, len(prefix) + size + 10 * n, prefix))
            first, obs_at, prefix_at = first + n, obs_at + size, prefix_at + len(prefix)
        #: the four batches over the staging buffer, made once (StepPlan.take copies them)
        self.batches = self.arrays(self.staging, {})

    @classmethod
    def learn(cls, replies: list[object]) -> _ReplyLayout | None:
        """The layout of these replies, or None when one is not a fixed frame or their
        observations differ in dtype or row shape."""
        heads, layouts = [], []
        for frame in replies:
            if type(frame) is not bytearray or not frame or frame[0] != STEP_REPLY:
                return None
            end = 2 + frame[1]
            heads.append(bytes(frame[:end]))
            layouts.append(_layout(bytes(frame[2:end])))
        first = layouts[0]
        if any(d != first[0] or s[1:] != first[1][1:] for d, s, _ in layouts):
            return None
        return cls(heads, layouts)

    def arrays(
        self, buffer: bytearray, infos: dict[str, Any]
    ) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """A step's result: its four batches over ``buffer`` (the joined bytes), and
        ``infos``."""
        count, flags_at = self.count, self.flags_at
        return (
            NDARRAY(self.shape, self.dtype, buffer, 8 * count),
            NDARRAY((count,), _F8, buffer, 0),
            NDARRAY((count,), _BOOL, buffer, flags_at),
            NDARRAY((count,), _BOOL, buffer, flags_at + count),
            infos,
        )

    def infos(self, replies: list[object]) -> dict[str, Any]:
        """The vector info of replies that fit this layout, of which some carry infos."""
        infos = [
            pickle.loads(frame[end:]) if len(frame) > end else {}  # type: ignore[index,arg-type]
            for frame, end in zip(replies, self.ends, strict=True)
        ]
        return join_infos(infos, self.sizes)


def join_infos(infos: list[dict[str, Any]], sizes: list[int]) -> dict[str, Any]:
    """Gymnasium's vector infos of each slice, as one vector info over all copies."""
    joined: dict[str, Any] = {}
    keys = [k for info in infos for k in info if not k.startswith("_")]
    for key in dict.fromkeys(keys):
        values: list[Any] = []
        masks: list[np.ndarray[Any, Any]] = []
        for info, size in zip(infos, sizes, strict=True):
            if key in info:
                value = info[key]
                if isinstance(value, dict):
                    values.append(value)
                else:
                    values.append(np.asarray(value))
                masks.append(np.asarray(info.get(f"_{key}", np.ones(size, bool))))
            else:
                values.append(None)
                masks.append(np.zeros(size, bool))
        present = [v for v in values if v is not None]
        if all(isinstance(v, dict) for v in present):
            joined[key] = join_infos([v if v is not None else {} for v in values], sizes)
        else:
            template = present[0]
            arrays = [
                v if v is not None else _blank(template, size)
                for v, size in zip(values, sizes, strict=True)
            ]
            joined[key] = np.concatenate(arrays)
        joined[f"_{key}"] = np.concatenate(masks)
    return joined


def _blank(template: np.ndarray[Any, Any], size: int) -> np.ndarray[Any, Any]:
    """What Gymnasium puts in a vector info for copies without the key: None or zeros."""
    if template.dtype == object:
        return np.full((size, *template.shape[1:]), None, dtype=object)
    return np.zeros((size, *template.shape[1:]), template.dtype)
