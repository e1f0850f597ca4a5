"""dm_env_rpc tensors: :func:`pack` / :func:`unpack` (row-major payloads, broadcast scalars, one
variable dimension), with fast paths for large float and byte payloads.

dm_env_rpc's generated protobuf classes carry no type information (mypy sees them as ``Any``).
What this package reads of a received message is written down as a protocol
(:class:`PayloadMessage`, :class:`TensorMessage`), so that those reads are checked; a message
it builds and hands out is annotated with its protobuf class, for readers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, MutableSequence
from typing import Any, Final, Protocol

import numpy as np
import numpy.typing as npt
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb

from envwire.errors import InvalidArgumentError
from envwire.protocols.dmenvrpc.dtypes import BY_FIELD, DataType, data_type_of

__all__ = [
    "MAX_ELEMENTS",
    "MAX_SETTING_ELEMENTS",
    "Array",
    "PayloadMessage",
    "TensorMessage",
    "flat",
    "pack",
    "payload_of",
    "resolve_shape",
    "unpack",
    "write",
]

#: Most elements a received tensor may expand to (broadcasts and variable dimensions included).
MAX_ELEMENTS: Final = 1 << 28
#: Most dimensions a received tensor may have (numpy's own limit is 64, 32 before numpy 2).
MAX_DIMS: Final = 32
#: Most elements of a settings or property value: a tiny message with a large shape broadcasts
#: its one element, and these values become Python lists.
MAX_SETTING_ELEMENTS: Final = 1 << 16

#: A numpy array of any dtype.
Array = npt.NDArray[Any]

_SMALL = 16  # below this many elements, per-element protobuf access beats the buffer paths


class PayloadMessage(Protocol):
    """A message with a ``payload`` oneof: a ``Tensor``, a ``TensorSpec.Value``, an
    ``EnvironmentRequest``.

    The payload itself is the field the oneof names (``floats``, ``strings``, ...), read with
    ``getattr``: its ``array`` holds the elements.
    """

    def WhichOneof(self, oneof_group: str, /) -> str | None:  # protobuf's name
        """The name of the field set in ``oneof_group``, or None."""
        ...


class TensorMessage(PayloadMessage, Protocol):
    """A dm_env_rpc ``Tensor``: a payload and a shape (-1 marks a variable dimension)."""

    @property
    def shape(self) -> MutableSequence[int]:
        """The dimensions (a repeated field: extended in place, never assigned)."""
        ...


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def write(target: PayloadMessage, array: Array, row: DataType) -> None:
    """Fill the payload of ``target`` (a ``Tensor`` or ``TensorSpec.Value``) with ``array``.

    The array must already have ``row``'s dtype (or hold ``str`` for STRING). Shape is the
    caller's business: a ``TensorSpec.Value`` has none.
    """
    payload = getattr(target, row.field)
    if row.field in ("uint8s", "int8s"):
        payload.SetInParent()
        payload.array = array.tobytes()
    elif row.field in ("floats", "doubles", "bools") and array.size >= _SMALL:
        # Float and double arrays are packed fixed-width fields, and a packed bool is one byte
        # 0 or 1: the raw little-endian bytes are their wire form, so one merge replaces an
        # element-by-element copy.
        raw = np.ascontiguousarray(array, row.numpy).tobytes()
        payload.MergeFromString(b"\n" + _varint(len(raw)) + raw)
    elif array.size:
        payload.array.extend(array.ravel().tolist())
    else:
        payload.SetInParent()


def pack(value: object, row: DataType | None = None) -> pb.Tensor:
    """A ``Tensor`` holding ``value`` (a scalar, str, sequence or ndarray).

    ``row`` forces the data type (the value is cast); by default it follows the value's dtype.

    Raises:
        ConfigError: the value's dtype has no dm_env_rpc type.
    """
    if isinstance(value, str):
        array: Array = np.array([value], dtype=object).reshape(())
    else:
        array = np.asarray(value)
    if row is None:
        row = data_type_of(array.dtype)
    result = pb.Tensor()
    result.shape.extend(array.shape)
    if row.numpy is not None:
        array = np.asarray(array, row.numpy)
    write(result, array, row)
    return result


def payload_of(message: PayloadMessage, what: str = "tensor") -> DataType:
    """The data type of a ``Tensor``'s (or ``Value``'s) payload.

    Raises:
        InvalidArgumentError: it has none.
    """
    field = message.WhichOneof("payload")
    if field is None:
        raise InvalidArgumentError(f"{what} has no payload (no data type is set)")
    return BY_FIELD[field]


def flat(message: PayloadMessage, row: DataType) -> Array:
    """The payload of ``message`` as a flat array (object dtype for STRING and PROTO)."""
    items = getattr(message, row.field).array
    if row.numpy is None:
        return np.array(list(items), dtype=object)
    if row.field in ("uint8s", "int8s"):
        return np.frombuffer(items, row.numpy).copy()  # writable, like any sample
    if len(items) < _SMALL:
        return np.fromiter(items, row.numpy, len(items))
    return np.array(items, row.numpy)


def resolve_shape(
    shape: Iterable[int], count: int, what: str = "tensor", limit: int = MAX_ELEMENTS
) -> tuple[int, ...]:
    """The concrete shape of a tensor whose shape is ``shape`` and payload has ``count`` items.

    One negative dimension is inferred from ``count``; a single element broadcasts (a variable
    dimension then counts 1, as the official client does).

    Raises:
        InvalidArgumentError: more than one variable dimension, the count does not fit, or
            more than ``limit`` elements.
    """
    dims = list(shape)
    if len(dims) > MAX_DIMS:
        raise InvalidArgumentError(
            f"{what} has {len(dims)} dimensions; at most {MAX_DIMS} are supported"
        )
    if count == math.prod(dims) and min(dims, default=1) > 0 and count <= limit:  # it fits
        return tuple(dims)
    variable = [i for i, n in enumerate(dims) if n < 0]
    if len(variable) > 1:
        raise InvalidArgumentError(
            f"{what} has shape {dims} with {len(variable)} variable dimensions; "
            "at most one may be variable"
        )
    if variable:
        known = 1
        for n in dims:
            known *= n if n >= 0 else 1
        if count == 1:
            dims[variable[0]] = 1
        elif known == 0 or count % known:
            raise InvalidArgumentError(
                f"{what} has shape {dims} but {count} elements, which do not fill it"
            )
        else:
            dims[variable[0]] = count // known
    size = math.prod(dims)
    # An empty dimension leaves no elements, but the others still shape the nested lists a
    # value may become ([[]] * 2**31): they count as if it held one.
    if math.prod(max(n, 1) for n in dims) > limit:
        raise InvalidArgumentError(f"{what} has shape {dims}: more than {limit} elements")
    if count not in (size, 1):
        raise InvalidArgumentError(f"{what} has shape {dims} but {count} elements")
    return tuple(dims)


def unpack(message: TensorMessage, what: str = "tensor", limit: int = MAX_ELEMENTS) -> Array:
    """A ``Tensor`` as an ndarray of its shape (object dtype for STRING and PROTO).

    Raises:
        InvalidArgumentError: no payload, more than one variable dimension, an element count
            that fits neither the shape nor a broadcast, or more than ``limit`` elements.
    """
    row = payload_of(message, what)
    values = flat(message, row)
    shape = resolve_shape(message.shape, values.size, what, limit)
    if values.size == 1 and shape != (1,) * len(shape):
        return np.full(shape, values[0], dtype=values.dtype)
    return values.reshape(shape)
