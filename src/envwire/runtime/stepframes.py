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
from typing import Any

import numpy as np

from envwire.runtime.pipe import dumps

__all__ = [
    "MAX_LAYOUTS",
    "STEP_CALL",
    "STEP_REPLY",
    "RawStep",
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
    if type(obs) is not np.ndarray or type(infos) is not dict:
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


class RawStep:
    """A worker's step reply as it came: the four batches' bytes (views of the reply frame)
    and the infos, so that a group joins several slices' bytes without making arrays of each.
    """

    __slots__ = (
        "count",
        "dtype",
        "infos",
        "obs",
        "rewards",
        "row",
        "shape",
        "terminations",
        "truncations",
    )

    def __init__(self, frame: bytearray) -> None:
        end = 2 + frame[1]
        description = bytes(frame[2:end])
        layout = _layouts.get(description)  # (the cache read here: one call less)
        dtype, shape, size = layout if layout is not None else _layout(description)
        count = shape[0]
        view = memoryview(frame)
        self.dtype, self.shape, self.count, self.row = dtype, shape, count, shape[1:]
        self.obs = view[end : end + size]
        end += size
        self.rewards = view[end : end + 8 * count]
        end += 8 * count
        self.terminations = view[end : end + count]
        self.truncations = view[end + count : end + 2 * count]
        end += 2 * count
        self.infos: dict[str, Any] = pickle.loads(view[end:]) if len(frame) > end else {}

    def arrays(self) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """The step's result as the host returned it (writable arrays over the frame)."""
        count = self.count
        return (
            np.ndarray(self.shape, self.dtype, self.obs),
            np.ndarray((count,), _F8, self.rewards),
            np.ndarray((count,), _BOOL, self.terminations),
            np.ndarray((count,), _BOOL, self.truncations),
            self.infos,
        )


def read_step_reply(frame: bytearray) -> RawStep:
    """A step reply's frame (without its length), read."""
    return RawStep(frame)
