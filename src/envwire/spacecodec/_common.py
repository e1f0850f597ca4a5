"""Helpers shared by the :mod:`envwire.spacecodec` modules: short, bounded error-message text
and the integer/float range checks."""

from __future__ import annotations

import functools
import json
import reprlib
from typing import Any, TypeGuard

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

__all__ = [
    "_Array",
    "_Said",
    "_at",
    "_cap",
    "_int_limits",
    "_is_dim",
    "_is_int",
    "_is_shape",
    "_narrow_float",
    "_show",
    "_space_repr",
]

_Array = npt.NDArray[Any]

_MAX_DIM = 1 << 31

_MAX_MESSAGE = 300

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 60
_repr.maxlist = _repr.maxtuple = 8
_repr.maxdict = 4
_repr.maxlevel = 3


class _Said(str):
    """Text an error message shows as is (a description of what came, not the value)."""

    __slots__ = ()


def _show(value: object) -> str:
    """A short, bounded rendering of a value for error messages."""
    if isinstance(value, _Said):
        return str(value)
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, np.ndarray):
        return np.array2string(value, threshold=8, edgeitems=2, max_line_width=80)
    if isinstance(value, np.generic):
        value = value.item()
    return _repr.repr(value)


def _cap(message: str, limit: int = _MAX_MESSAGE) -> str:
    return message if len(message) <= limit else message[: limit - 3] + "..."


def _space_repr(space: spaces.Space[Any]) -> str:
    return _cap(repr(space), 120)


def _at(path: str) -> str:
    return f" (at {path})" if path else ""


def _is_int(value: object) -> TypeGuard[int]:
    """An ``int`` that is not a ``bool`` (JSON tells the two apart; Python does not)."""
    return isinstance(value, int) and not isinstance(value, bool)


@functools.lru_cache(maxsize=32)
def _int_limits(dtype: np.dtype[Any]) -> tuple[int, int]:
    if dtype.kind == "b":
        return 0, 1
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _is_dim(value: object) -> TypeGuard[int]:
    """An integer that can be an array dimension (0 <= value < 2**31)."""
    return _is_int(value) and 0 <= value < _MAX_DIM


def _is_shape(value: object) -> TypeGuard[list[int]]:
    """A list of at most 32 array dimensions (what a description or an ``__ndarray__`` object
    gives as a shape)."""
    return isinstance(value, list) and len(value) <= 32 and all(_is_dim(n) for n in value)


def _narrow_float(arr: _Array, dtype: np.dtype[Any]) -> _Array | None:
    """``arr`` as the float ``dtype``; None if a finite value overflows it."""
    with np.errstate(all="ignore"):
        out = arr.astype(dtype)
    if np.isinf(out).any() and (np.isinf(out) & np.isfinite(arr)).any():
        return None
    return out
