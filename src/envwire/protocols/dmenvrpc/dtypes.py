"""dm_env_rpc's data types: one table of ``DataType`` rows, keyed by envwire's dtype names
(:mod:`envwire.tensor` stays the single source of numpy dtypes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb

from envwire import tensor
from envwire.errors import ConfigError, ProtocolError

__all__ = [
    "BY_ENUM",
    "BY_FIELD",
    "DATA_TYPES",
    "BOOL",
    "DOUBLE",
    "INT64",
    "STRING",
    "DataType",
    "data_type_of",
]


@dataclass(frozen=True, slots=True)
class DataType:
    """One dm_env_rpc data type: its enum value, payload field and numpy dtype.

    ``numpy`` is None for STRING and PROTO, whose elements are Python objects.
    """

    enum: int
    name: str
    field: str
    numpy: np.dtype[Any] | None

    @property
    def numeric(self) -> bool:
        """True for types with an order (everything but BOOL, STRING and PROTO)."""
        return self.numpy is not None and self.numpy.kind in "iuf"


def _row(enum: int, field: str, dtype_name: str | None) -> DataType:
    numpy = tensor.dtype_by_name(dtype_name).numpy if dtype_name else None
    return DataType(enum, pb.DataType.Name(enum).lower(), field, numpy)


DATA_TYPES: tuple[DataType, ...] = (
    _row(pb.FLOAT, "floats", "float32"),
    _row(pb.DOUBLE, "doubles", "float64"),
    _row(pb.INT8, "int8s", "int8"),
    _row(pb.INT32, "int32s", "int32"),
    _row(pb.INT64, "int64s", "int64"),
    _row(pb.UINT8, "uint8s", "uint8"),
    _row(pb.UINT32, "uint32s", "uint32"),
    _row(pb.UINT64, "uint64s", "uint64"),
    _row(pb.BOOL, "bools", "bool"),
    _row(pb.STRING, "strings", None),
    _row(pb.PROTO, "protos", None),
)
#: The rows by ``DataType`` enum value and by payload field.
BY_ENUM = {row.enum: row for row in DATA_TYPES}
BY_FIELD = {row.field: row for row in DATA_TYPES}
_BY_DTYPE = {row.numpy: row for row in DATA_TYPES if row.numpy is not None}
# dtypes dm_env_rpc lacks travel as the next wider type and are narrowed back on arrival.
_WIDER = {"float16": "float32", "int16": "int32", "uint16": "uint32"}
STRING: Final = BY_ENUM[pb.STRING]
DOUBLE: Final = BY_ENUM[pb.DOUBLE]
BOOL: Final = BY_ENUM[pb.BOOL]
INT64: Final = BY_ENUM[pb.INT64]


def data_type_of(dtype: npt.DTypeLike) -> DataType:
    """The row a numpy dtype travels as (float16/int16/uint16 widened).

    Raises:
        ConfigError: no dm_env_rpc type can carry it.
    """
    np_dtype = np.dtype(dtype)
    if np_dtype.kind in "UO":
        return STRING
    name = _WIDER.get(np_dtype.name, np_dtype.name)
    try:
        return _BY_DTYPE[tensor.dtype_by_name(name).numpy]
    except (ProtocolError, KeyError):
        raise ConfigError(f"dtype {np_dtype.name} has no dm_env_rpc DataType") from None
