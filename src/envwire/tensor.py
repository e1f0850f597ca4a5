"""ndarray <-> (dtype, shape, raw bytes), with one dtype table for every protocol.

The table :data:`DTYPES` is the single source of truth: each row gives the dtype's name, its
numpy dtype (always little-endian on the wire) and its one-byte wire code. Codecs that need
another numbering (dm_env_rpc's ``DataType`` enum) map from these names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from envwire.errors import ProtocolError

__all__ = [
    "DTYPES",
    "NDARRAY",
    "DType",
    "Tensor",
    "decode",
    "dtype_by_code",
    "dtype_by_name",
    "encode",
]

#: ``np.ndarray``, for the step paths' type checks and constructors: imported as a global
#: (``from envwire.tensor import NDARRAY``), its load is specialized by the interpreter, where
#: the load of an attribute of numpy's module is a lookup of its own on every use.
NDARRAY = np.ndarray


@dataclass(frozen=True, slots=True)
class DType:
    """One row of the dtype table."""

    name: str
    code: int
    numpy: np.dtype[Any]


DTYPES: tuple[DType, ...] = tuple(
    DType(name, code, np.dtype(spec))
    for name, code, spec in (
        ("bool", 0, "?"),
        ("int8", 1, "<i1"),
        ("int16", 2, "<i2"),
        ("int32", 3, "<i4"),
        ("int64", 4, "<i8"),
        ("uint8", 5, "<u1"),
        ("uint16", 6, "<u2"),
        ("uint32", 7, "<u4"),
        ("uint64", 8, "<u8"),
        ("float16", 9, "<f2"),
        ("float32", 10, "<f4"),
        ("float64", 11, "<f8"),
    )
)

_BY_CODE = {d.code: d for d in DTYPES}
_BY_NAME = {d.name: d for d in DTYPES}


def dtype_by_code(code: int) -> DType:
    """The table row for a wire code; :class:`ProtocolError` if there is none."""
    try:
        return _BY_CODE[code]
    except KeyError:
        raise ProtocolError(f"unknown dtype code {code}; known: 0..{len(DTYPES) - 1}") from None


def dtype_by_name(name: str | np.dtype[Any] | type) -> DType:
    """The table row for a dtype name or numpy dtype; :class:`ProtocolError` if unsupported."""
    key = name if isinstance(name, str) else np.dtype(name).name
    try:
        return _BY_NAME[key]
    except KeyError:
        raise ProtocolError(f"unsupported dtype {key!r}; supported: {sorted(_BY_NAME)}") from None


@dataclass(frozen=True, slots=True)
class Tensor:
    """A dense array as it travels: dtype row, shape and C-order little-endian bytes."""

    dtype: DType
    shape: tuple[int, ...]
    data: bytes


def encode(array: npt.ArrayLike) -> Tensor:
    """Turn an array-like into a :class:`Tensor` (C order, little-endian)."""
    arr = np.asarray(array)
    row = dtype_by_name(arr.dtype.name)
    arr = np.require(arr, dtype=row.numpy, requirements="C")  # keeps 0-d arrays 0-d
    return Tensor(row, tuple(int(n) for n in arr.shape), arr.tobytes())


def decode(tensor: Tensor, *, copy: bool = True) -> npt.NDArray[Any]:
    """Turn a :class:`Tensor` back into an ndarray of the native byte order.

    Raises:
        ProtocolError: the byte count does not match dtype and shape.
    """
    count = 1
    for n in tensor.shape:
        if n < 0:
            raise ProtocolError(f"negative dimension in shape {tensor.shape}")
        count *= n
    expected = count * tensor.dtype.numpy.itemsize
    if len(tensor.data) != expected:
        raise ProtocolError(
            f"tensor of {tensor.dtype.name}{list(tensor.shape)} needs {expected} bytes, "
            f"got {len(tensor.data)}"
        )
    arr = np.frombuffer(tensor.data, dtype=tensor.dtype.numpy).reshape(tensor.shape)
    native = arr.astype(tensor.dtype.numpy.newbyteorder("="), copy=copy)
    return native
