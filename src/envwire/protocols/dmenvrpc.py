"""dm_env_rpc (seed 004): the sans-IO pieces of the gRPC protocol.

Nothing here touches a channel, a server or a thread; the front end (``envwire.server.grpc``)
and the client (``envwire.client.dmenvrpc``) do the I/O. What lives here:

- the dtype table: dm_env_rpc's ``DataType`` rows keyed by envwire's dtype names
  (:mod:`envwire.tensor` stays the single source of numpy dtypes);
- tensors: :func:`pack` / :func:`unpack` (row-major payloads, broadcast scalars, one variable
  dimension), fast paths for large float and byte payloads;
- specs from spaces: :class:`Layout` turns any Gymnasium space into ``TensorSpec`` leaves with
  UIDs and "." nesting, writes samples into tensors and reads them back, and validates actions
  tensor by tensor with errors that name the UID;
- settings: typed reading of the ``settings`` maps of CreateWorld, JoinWorld, Reset, ResetWorld;
- the connection state machine: :data:`TRANSITIONS`, a table of what each request does in each
  :class:`Phase`;
- errors as ``google.rpc.Status`` (with an ``ErrorInfo`` detail carrying envwire's error code)
  and back.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Final, Literal

import numpy as np
import numpy.typing as npt
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from google.protobuf.message import DecodeError
from google.rpc import error_details_pb2, status_pb2
from gymnasium import spaces

from envwire import spacecodec, tensor
from envwire.errors import (
    ConfigError,
    EnvwireError,
    InvalidActionError,
    InvalidArgumentError,
    ProtocolError,
    RemoteError,
    StateError,
    UsageError,
    error_class_for_code,
)
from envwire.typed.gym import ModelSpace

__all__ = [
    "DATA_TYPES",
    "ERROR_DOMAIN",
    "MAX_ELEMENTS",
    "SAME",
    "SETTINGS",
    "TRANSITIONS",
    "VECTOR_OBSERVATIONS",
    "WORLD_DECIDES",
    "WORLD_OBSERVATIONS",
    "DataType",
    "Kind",
    "Layout",
    "Leaf",
    "Phase",
    "PropertyPermissionError",
    "Setting",
    "UnknownPropertyError",
    "UnknownWorldError",
    "error_from_status",
    "error_response",
    "next_phase",
    "pack",
    "parse_request",
    "read_settings",
    "request_kind",
    "status_of",
    "unpack",
]

_Array = npt.NDArray[Any]

#: Most elements a received tensor may expand to (broadcasts and variable dimensions included).
MAX_ELEMENTS: Final = 1 << 28

#: ``ErrorInfo.domain`` of the detail envwire attaches to every error ``Status``.
ERROR_DOMAIN: Final = "envwire"

#: Names of the observations a world adds beside the env's own, in UID order after them (a
#: top-level Dict key with one of these names moves the env's names under ``observation.``).
WORLD_OBSERVATIONS: Final = ("reward", "discount", "envwire.truncated", "envwire.info")
#: The same for a vector world (CreateWorld ``num_envs``); all but ``envwire.info`` are [N].
VECTOR_OBSERVATIONS: Final = ("reward", "terminated", "truncated", "discount", "envwire.info")

# google.rpc.Code numbers of the errors below.
_NOT_FOUND = 5
_PERMISSION_DENIED = 7


class UnknownWorldError(UsageError):
    """No world of that name exists on this server."""

    code = "unknown_world"
    http_status = 404
    grpc_code = _NOT_FOUND


class UnknownPropertyError(UsageError):
    """The properties extension has no property with that key."""

    code = "unknown_property"
    http_status = 404
    grpc_code = _NOT_FOUND


class PropertyPermissionError(UsageError):
    """The property exists but cannot be read, written or listed that way."""

    code = "permission_denied"
    http_status = 403
    grpc_code = _PERMISSION_DENIED


# --------------------------------------------------------------------------------------------
# the dtype table


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
_BY_ENUM = {row.enum: row for row in DATA_TYPES}
_BY_FIELD = {row.field: row for row in DATA_TYPES}
_BY_DTYPE = {row.numpy: row for row in DATA_TYPES if row.numpy is not None}
# dtypes dm_env_rpc lacks travel as the next wider type and are narrowed back on arrival.
_WIDER = {"float16": "float32", "int16": "int32", "uint16": "uint32"}
STRING: Final = _BY_ENUM[pb.STRING]
DOUBLE: Final = _BY_ENUM[pb.DOUBLE]
BOOL: Final = _BY_ENUM[pb.BOOL]
INT64: Final = _BY_ENUM[pb.INT64]


def data_type_of(dtype: Any) -> DataType:
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


# --------------------------------------------------------------------------------------------
# tensors

_SMALL = 16  # below this many elements, per-element protobuf access beats the buffer paths


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def write(target: Any, array: _Array, row: DataType) -> None:
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


def pack(value: Any, row: DataType | None = None) -> Any:
    """A ``Tensor`` holding ``value`` (a scalar, str, sequence or ndarray).

    ``row`` forces the data type (the value is cast); by default it follows the value's dtype.

    Raises:
        ConfigError: the value's dtype has no dm_env_rpc type.
    """
    if isinstance(value, str):
        array: _Array = np.array([value], dtype=object).reshape(())
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


def payload_of(message: Any, what: str = "tensor") -> DataType:
    """The data type of a ``Tensor``'s (or ``Value``'s) payload.

    Raises:
        InvalidArgumentError: it has none.
    """
    field = message.WhichOneof("payload")
    if field is None:
        raise InvalidArgumentError(f"{what} has no payload (no data type is set)")
    return _BY_FIELD[field]


def flat(message: Any, row: DataType) -> _Array:
    """The payload of ``message`` as a flat array (object dtype for STRING and PROTO)."""
    items = getattr(message, row.field).array
    if row.numpy is None:
        return np.array(list(items), dtype=object)
    if row.field in ("uint8s", "int8s"):
        return np.frombuffer(items, row.numpy).copy()  # writable, like any sample
    if len(items) < _SMALL:
        return np.fromiter(items, row.numpy, len(items))
    return np.array(items, row.numpy)


def resolve_shape(shape: Iterable[int], count: int, what: str = "tensor") -> tuple[int, ...]:
    """The concrete shape of a tensor whose shape is ``shape`` and payload has ``count`` items.

    One negative dimension is inferred from ``count``; a single element broadcasts (a variable
    dimension then counts 1, as the official client does).

    Raises:
        InvalidArgumentError: more than one variable dimension, or the count does not fit.
    """
    dims = list(shape)
    if count == math.prod(dims) and min(dims, default=0) >= 0:  # the usual case: it fits
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
    size = 1
    for n in dims:
        size *= n
    if size > MAX_ELEMENTS:
        raise InvalidArgumentError(f"{what} has shape {dims}: more than {MAX_ELEMENTS} elements")
    if count not in (size, 1):
        raise InvalidArgumentError(f"{what} has shape {dims} but {count} elements")
    return tuple(dims)


def unpack(message: Any, what: str = "tensor") -> _Array:
    """A ``Tensor`` as an ndarray of its shape (object dtype for STRING and PROTO).

    Raises:
        InvalidArgumentError: no payload, more than one variable dimension, or an element count
            that fits neither the shape nor a broadcast.
    """
    row = payload_of(message, what)
    values = flat(message, row)
    shape = resolve_shape(message.shape, values.size, what)
    if values.size == 1 and shape != (1,) * len(shape):
        return np.full(shape, values[0], dtype=values.dtype)
    return values.reshape(shape)


# --------------------------------------------------------------------------------------------
# specs from spaces

LeafKind = Literal["array", "scalar", "text", "sequence", "model", "json"]
_Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Leaf:
    """One tensor of a space: a Box, a Discrete, a Text, ... somewhere inside Dicts and Tuples.

    Attributes:
        uid: its UID in the specs.
        name: its "."-joined name.
        path: the keys and indices that lead from the whole sample to this leaf's value.
        space: the leaf's own space.
        kind: how samples become tensors: ``array`` (Box, MultiBinary, MultiDiscrete),
            ``scalar`` (Discrete), ``text``, ``sequence`` (a Sequence of fixed-shape leaves, on
            a variable first dimension) or ``json`` (anything else, as a JSON string).
        row: the data type it travels as.
        shape: the spec's shape (-1 marks the variable dimension of a sequence).
        low, high: inclusive bounds in ``row``'s dtype (scalar or of ``shape``), or None.
        batch: 0, or the number of copies a batched leaf carries at once (see
            :meth:`batched`).
    """

    uid: int
    name: str
    path: _Path
    space: spaces.Space[Any]
    kind: LeafKind
    row: DataType
    shape: tuple[int, ...]
    low: _Array | None = None
    high: _Array | None = None
    batch: int = 0

    def batched(self, n: int) -> Leaf:
        """This leaf for ``n`` copies of the space at once, as Gymnasium batches them.

        Arrays and Discretes get a leading dimension ``n`` (one contiguous tensor, bounds
        broadcast); a Text is a STRING ``[n]``; leaves without an array form (sequences,
        JSON and model leaves) are a STRING ``[n]`` of one JSON text per copy.
        """
        shape = (n, *self.shape)
        match self.kind:
            case "array" | "scalar":
                low, high = _lead(self.low, shape), _lead(self.high, shape)
                return replace(self, shape=shape, low=low, high=high, batch=n)
            case "text" | "model":
                return replace(self, shape=(n,), batch=n)
        return replace(self, kind="json", row=STRING, shape=(n,), low=None, high=None, batch=n)

    def spec(self) -> Any:
        """The leaf's ``TensorSpec``."""
        result = pb.TensorSpec(name=self.name, dtype=self.row.enum)
        result.shape.extend(self.shape)
        if self.low is not None:
            write(result.min, self.low, self.row)
        if self.high is not None:
            write(result.max, self.high, self.row)
        return result

    def value_of(self, sample: Any) -> Any:
        """This leaf's part of a whole sample."""
        for key in self.path:
            sample = sample[key]
        return sample

    def to_array(self, value: Any) -> _Array:
        """A leaf value as the array that travels (row dtype, spec shape)."""
        if self.batch:
            return self._batch_to_array(value)
        match self.kind:
            case "array" | "scalar":
                return np.asarray(value, self.row.numpy)
            case "text":
                return np.array([value], dtype=object).reshape(())
            case "model":
                return np.array([value.model_dump_json()], dtype=object).reshape(())
            case "sequence":
                inner = self.space.feature_space  # type: ignore[attr-defined]
                if isinstance(inner, spaces.Text):
                    return np.array(list(value), dtype=object)
                items = np.asarray(value, self.row.numpy)
                return items.reshape((-1, *self.shape[1:]))
            case _:
                text = json.dumps(spacecodec.to_json(self.space, value, arrays="base64"))
                return np.array([text], dtype=object).reshape(())

    def _batch_to_array(self, values: Any) -> _Array:
        match self.kind:
            case "array" | "scalar":
                return np.asarray(values, self.row.numpy)
            case "text":
                texts = list(values)
            case "model":
                texts = [value.model_dump_json() for value in values]
            case _:
                texts = [
                    json.dumps(spacecodec.to_json(self.space, value, arrays="base64"))
                    for value in values
                ]
        array = np.empty(len(texts), dtype=object)
        array[:] = texts
        return array

    def from_array(self, array: _Array) -> Any:
        """The leaf value (with the types Gymnasium's samples have) from a received array.

        A batched leaf gives Gymnasium's batch: an array with a leading dimension for arrays
        and Discretes, a tuple of the copies' values for the others.

        Raises:
            InvalidArgumentError: a JSON leaf's text is not a sample of its space.
        """
        if self.batch:
            if self.kind in ("array", "scalar"):
                return array.astype(self.space.dtype, copy=False)
            single = replace(self, batch=0)
            return tuple(single.from_array(np.array(item, dtype=object)) for item in array.ravel())
        match self.kind:
            case "array":
                return array.astype(self.space.dtype, copy=False)
            case "scalar":
                return array.reshape(()).astype(self.space.dtype)[()]
            case "text":
                return str(array.reshape(())[()])
            case "sequence":
                space: spaces.Sequence = self.space  # type: ignore[assignment]
                inner = space.feature_space
                if isinstance(inner, spaces.Text):
                    return tuple(str(item) for item in array.ravel())
                items = array.astype(inner.dtype, copy=False)
                if space.stack:
                    return items
                if isinstance(inner, spaces.Discrete):
                    return tuple(item[()] for item in items)
                return tuple(items)
            case "model":
                model = self.space.model  # type: ignore[attr-defined]
                try:
                    return model.model_validate_json(str(array.reshape(())[()]))
                except ValueError as exc:  # pydantic's ValidationError is a ValueError
                    raise InvalidArgumentError(f"not a valid {model.__name__}: {exc}") from None
            case _:
                try:
                    value = json.loads(str(array.reshape(())[()]))
                except ValueError as exc:
                    raise InvalidArgumentError(f"not JSON: {exc}") from None
                return spacecodec.from_json(self.space, value)

    def check(self, message: Any, role: str = "action") -> _Array:
        """A received tensor for this leaf, checked against its spec, as an array.

        Raises:
            InvalidActionError: wrong data type, wrong shape, or a value out of range; the
                message names the UID and the name.
        """
        field = message.WhichOneof("payload")
        scalar = self.kind == "scalar" and not self.batch
        if field == self.row.field and scalar and not message.shape:
            items = getattr(message, field).array
            if len(items) == 1 and self._in_range(items[0]):  # the common case, without numpy
                return np.array(items[0], self.row.numpy)
        where = f"{role} uid {self.uid} ({self.name!r})"
        if field != self.row.field:
            got = f"a {_BY_FIELD[field].name} tensor" if field else "a tensor with no payload"
            raise InvalidActionError(f"{where}: expected a {self.row.name} tensor, got {got}")
        try:
            values = flat(message, self.row)
            shape = resolve_shape(message.shape, values.size, where)
        except InvalidArgumentError as exc:
            raise InvalidActionError(str(exc)) from None
        if len(shape) != len(self.shape) or any(
            s != n and n >= 0 for s, n in zip(shape, self.shape, strict=True)
        ):
            raise InvalidActionError(
                f"{where}: shape {list(shape)} is not the expected {list(self.shape)}"
            )
        if values.size == 1 and shape != (1,) * len(shape):
            array = np.full(shape, values[0], dtype=values.dtype)
        else:
            array = values.reshape(shape)
        self._check_range(array, where)
        return array

    def _in_range(self, value: Any) -> bool:
        low, high = self.low, self.high
        return (low is None or low.item() <= value) and (high is None or value <= high.item())

    def _check_range(self, array: _Array, where: str) -> None:
        for bound, inside, word in (
            (self.low, np.greater_equal, "below the minimum"),
            (self.high, np.less_equal, "above the maximum"),
        ):
            if bound is None:
                continue
            ok = inside(array, bound)
            if not ok.all():
                index = tuple(int(i) for i in np.argwhere(~ok)[0]) if ok.ndim else ()
                limit = bound if bound.ndim == 0 else bound[index]
                raise InvalidActionError(
                    f"{where}: {array[index].item()!r} at index {list(index)} is not in range "
                    f"({word} {limit.item()!r})"
                )


def _lead(bound: _Array | None, shape: tuple[int, ...]) -> _Array | None:
    """A leaf's bound for its batched shape (a scalar bound stays scalar)."""
    if bound is None or bound.ndim == 0:
        return bound
    return np.broadcast_to(bound, shape)


def _bound(values: Any, row: DataType, shape: tuple[int, ...]) -> _Array | None:
    """A bound in the row's dtype; scalar when uniform; None when it bounds nothing."""
    array = np.asarray(values)
    if array.size == 0:
        return None
    if array.dtype.kind == "f" and np.isinf(array).all():
        return None
    array = array.astype(row.numpy)
    first = array.reshape(-1)[0]
    if (array == first).all():
        return np.asarray(first)
    return np.broadcast_to(array, shape).copy()


_LEAF_TYPES = (spaces.Box, spaces.Discrete, spaces.MultiBinary, spaces.MultiDiscrete, spaces.Text)


def _leaf(space: spaces.Space[Any], name: str, path: _Path, uid: int) -> Leaf:
    """The leaf for a non-composite space."""
    match space:
        case spaces.Box():
            row = data_type_of(space.dtype)
            if row is BOOL:
                return Leaf(uid, name, path, space, "array", row, space.shape)
            low = _bound(space.low, row, space.shape)
            high = _bound(space.high, row, space.shape)
            return Leaf(uid, name, path, space, "array", row, space.shape, low, high)
        case spaces.Discrete():
            row = data_type_of(space.dtype)
            start = int(space.start)
            low, high = (
                np.asarray(start, row.numpy),
                np.asarray(start + int(space.n) - 1, row.numpy),
            )
            return Leaf(uid, name, path, space, "scalar", row, (), low, high)
        case spaces.MultiBinary():
            row = data_type_of(space.dtype)
            zero, one = np.asarray(0, row.numpy), np.asarray(1, row.numpy)
            return Leaf(uid, name, path, space, "array", row, space.shape, zero, one)
        case spaces.MultiDiscrete():
            row = data_type_of(space.dtype)
            low = _bound(space.start, row, space.shape)
            high = _bound(space.start + space.nvec - 1, row, space.shape)
            return Leaf(uid, name, path, space, "array", row, space.shape, low, high)
        case spaces.Text():
            return Leaf(uid, name, path, space, "text", STRING, ())
        case ModelSpace():
            return Leaf(uid, name, path, space, "model", STRING, ())
        case spaces.Sequence() if isinstance(space.feature_space, _LEAF_TYPES) and not (
            space.stack and isinstance(space.feature_space, spaces.Text)
        ):
            inner = _leaf(space.feature_space, name, path, uid)
            low, high = inner.low, inner.high
            if low is not None and low.ndim:  # variable shapes carry scalar ranges only
                low = None
            if high is not None and high.ndim:
                high = None
            return Leaf(
                uid, name, path, space, "sequence", inner.row, (-1, *inner.shape), low, high
            )
    return Leaf(uid, name, path, space, "json", STRING, ())


class Layout:
    """A space's tensors: leaves with UIDs and names, and the way between samples and tensors.

    A Dict at the top lays its keys out as names (``image``, ``arm.angle``); any other space is
    one name, ``prefix`` (``observation``, ``action``), with Tuple elements and nested Dict keys
    after dots (``action.0``). ``reserved`` names (``reward``, ...) that a top-level Dict also
    uses push its keys under ``prefix`` too.

    With ``batch`` = N, the layout carries N samples at once, in the form Gymnasium's vector
    envs batch them (``batch_space``, ``concatenate``): every leaf gets a leading dimension N
    (see :meth:`Leaf.batched`), so N copies travel as one tensor per leaf.

    Args:
        space: the space (of one copy, when batched).
        prefix: the name of a non-Dict space, and the parent of colliding Dict keys.
        first_uid: the UID of the first leaf; the others follow in order.
        reserved: names the caller uses beside this layout's.
        batch: 0, or how many samples travel at once.

    Raises:
        ConfigError: a Dict key is not a string, or contains "." (dm_env_rpc's nesting mark).
    """

    def __init__(
        self,
        space: spaces.Space[Any],
        prefix: str,
        *,
        first_uid: int = 1,
        reserved: Iterable[str] = (),
        batch: int = 0,
    ) -> None:
        self.space = space
        self.prefix = prefix
        self.batch = batch
        top = "" if isinstance(space, spaces.Dict) else prefix
        self.leaves: list[Leaf] = []
        self._add(space, top, (), first_uid)
        names = {leaf.name for leaf in self.leaves}
        if top == "" and (names & set(reserved)):
            self.leaves.clear()
            self._add(space, prefix, (), first_uid)
        if batch:
            self.leaves = [leaf.batched(batch) for leaf in self.leaves]
        self.by_uid = {leaf.uid: leaf for leaf in self.leaves}
        self.by_name = {leaf.name: leaf for leaf in self.leaves}
        self.next_uid = first_uid + len(self.leaves)

    def _add(self, space: spaces.Space[Any], name: str, path: _Path, uid: int) -> int:
        if isinstance(space, spaces.Dict):
            for key, sub in space.spaces.items():
                if not isinstance(key, str) or "." in key:
                    raise ConfigError(
                        f"Dict key {key!r} cannot be a dm_env_rpc name: keys must be strings "
                        "without '.' (the protocol's nesting mark)"
                    )
                uid = self._add(sub, f"{name}.{key}" if name else key, (*path, key), uid)
            return uid
        if isinstance(space, spaces.Tuple):
            for index, sub in enumerate(space.spaces):
                uid = self._add(sub, f"{name}.{index}" if name else str(index), (*path, index), uid)
            return uid
        self.leaves.append(_leaf(space, name, path, uid))
        return uid + 1

    def specs(self) -> dict[int, Any]:
        """``TensorSpec`` by UID, for ``ActionObservationSpecs``."""
        return {leaf.uid: leaf.spec() for leaf in self.leaves}

    def write(self, sample: Any, target: Any, uids: Iterable[int] | None = None) -> None:
        """Write the leaves of ``sample`` into ``target`` (a UID -> Tensor protobuf map).

        Args:
            sample: a sample of the space.
            target: ``StepRequest.actions`` or ``StepResponse.observations``.
            uids: the leaves to write (all by default); UIDs not in this layout are skipped.
        """
        chosen = self.leaves if uids is None else [self.by_uid[u] for u in uids if u in self.by_uid]
        for leaf in chosen:
            array = leaf.to_array(leaf.value_of(sample))
            out = target[leaf.uid]
            out.shape.extend(array.shape)
            write(out, array, leaf.row)

    def read(self, tensors: Mapping[int, Any], role: str = "action", *, check: bool = True) -> Any:
        """The sample whose leaves are ``tensors`` (every leaf must be there).

        Args:
            tensors: UID -> ``Tensor``.
            role: how messages name the tensors ("action", "observation").
            check: check each tensor against its spec (data type, shape, range) and refuse
                UIDs that are not leaves; without it, extra UIDs are ignored and tensors are
                only unpacked (a client trusts its server's observations).

        Raises:
            InvalidActionError: a leaf is missing, an unknown UID came, or a tensor does not fit
                its spec (each message names the UID).
        """
        unknown = [uid for uid in tensors if uid not in self.by_uid] if check else ()
        if unknown:
            known = ", ".join(f"{leaf.uid} ({leaf.name!r})" for leaf in self.leaves) or "none"
            raise InvalidActionError(
                f"{role} uid {unknown[0]} is not in the {role} specs (known: {known})"
            )
        values: dict[int, Any] = {}
        for leaf in self.leaves:
            message = tensors.get(leaf.uid)
            if message is None:
                raise InvalidActionError(
                    f"{role} uid {leaf.uid} ({leaf.name!r}) is missing: this env needs all of "
                    f"its {role}s in every step"
                )
            array = leaf.check(message, role) if check else unpack(message, role)
            try:
                values[leaf.uid] = leaf.from_array(array)
            except InvalidArgumentError as exc:
                raise InvalidActionError(f"{role} uid {leaf.uid} ({leaf.name!r}): {exc}") from None
        return self.compose(values)

    def compose(self, values: Mapping[int, Any]) -> Any:
        """Assemble leaf values (by UID) into a sample of the space."""
        leaves = iter(self.leaves)
        return _compose(self.space, leaves, values)


def _compose(space: spaces.Space[Any], leaves: Any, values: Mapping[int, Any]) -> Any:
    if isinstance(space, spaces.Dict):
        return {key: _compose(sub, leaves, values) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_compose(sub, leaves, values) for sub in space.spaces)
    return values[next(leaves).uid]


# --------------------------------------------------------------------------------------------
# settings


SettingKind = Literal["str", "int", "bool", "seed", "mask", "kwargs"]


@dataclass(frozen=True, slots=True)
class Setting:
    """One key a request's ``settings`` map may hold.

    Kinds: ``str``, ``int`` (at least ``minimum``), ``bool``; ``seed`` (an integer >= 0, or an
    integer vector with one seed per copy of a vector world, -1 = unseeded); ``mask`` (a bool
    vector); ``kwargs`` (constructor arguments: a JSON object, and/or one ``NAME.ARG`` setting
    per argument, see :func:`read_settings`).
    """

    name: str
    kind: SettingKind
    description: str
    required: bool = False
    minimum: int = 0


_SEED = "the seed of the next episode (>= 0; a vector world also takes one seed per copy)"

#: The settings each request understands (all others are errors).
SETTINGS: dict[str, tuple[Setting, ...]] = {
    "create_world": (
        Setting("env", "str", "the env id, from the server's catalog", required=True),
        Setting("seed", "seed", "the seed of the world's first episode (as for reset)"),
        Setting(
            "players",
            "int",
            "how many connections may join the world at once (default 1)",
            minimum=1,
        ),
        Setting(
            "kwargs",
            "kwargs",
            "constructor arguments for the env, as a JSON object or one 'kwargs.NAME' setting "
            "each; only those the server opens to clients (client_kwargs)",
        ),
        Setting(
            "num_envs",
            "int",
            "make a vector world: this many copies of the env, stepped together",
            minimum=1,
        ),
        Setting(
            "autoreset_mode",
            "str",
            "a vector world's autoreset mode: NextStep (default), SameStep or Disabled",
        ),
        Setting(
            "workers",
            "int",
            "split a vector world's copies over this many worker processes (default 1)",
            minimum=1,
        ),
    ),
    "join_world": (
        Setting(
            "player", "int", "the seat to take in a multi-player world (default: the first free)"
        ),
        Setting("discount", "bool", "add a 'discount' observation (see docs/dm_env_rpc.md)"),
        Setting(
            "envwire.extras", "bool", "add 'envwire.truncated' and 'envwire.info' observations"
        ),
    ),
    "reset": (
        Setting("seed", "seed", _SEED),
        Setting(
            "reset_mask",
            "mask",
            "the copies of a vector world to reset (bool [num_envs]); the others go on",
        ),
    ),
    "reset_world": (Setting("seed", "seed", _SEED),),
}


def read_settings(settings: Mapping[str, Any], request: str) -> dict[str, Any]:
    """The typed values of a request's ``settings`` map.

    A ``kwargs`` setting collects constructor arguments into one dict: the ``kwargs`` setting
    itself is a JSON object (a STRING tensor), and each ``kwargs.NAME`` setting is one more
    argument, with dots for nesting (``kwargs.arm.length`` sets ``{"arm": {"length": ...}}``).
    Scalar tensors give Python scalars (str, int, float, bool), others nested lists.

    Args:
        settings: the protobuf map (name -> Tensor).
        request: ``create_world``, ``join_world``, ``reset`` or ``reset_world``.

    Raises:
        InvalidArgumentError: an unknown or missing required setting, a value of the wrong
            type, or an argument set twice (the message names the setting and says what was
            expected).
    """
    known = {s.name: s for s in SETTINGS[request]}
    result: dict[str, Any] = {}
    arguments: dict[str, list[tuple[tuple[str, ...], Any, str]]] = {}
    for name, message in settings.items():
        setting = known.get(name)
        parent = known.get(name.partition(".")[0])
        if setting is None and parent is not None and parent.kind == "kwargs":
            path = tuple(name.split(".")[1:])
            where = f"{request} setting {name!r}"
            if not all(path):
                raise InvalidArgumentError(f"{where}: every '.' must be followed by a name")
            arguments.setdefault(parent.name, []).append((path, _argument(message, where), name))
        elif setting is None:
            names = ", ".join(known) or "none"
            raise InvalidArgumentError(f"unknown {request} setting {name!r} (known: {names})")
        elif setting.kind == "kwargs":
            found = _setting_value(setting, message, request)
            items = arguments.setdefault(name, [])
            items += [((key,), value, name) for key, value in found.items()]
        else:
            result[name] = _setting_value(setting, message, request)
    for name, items in arguments.items():
        result[name] = _nest(items, request)
    for setting in known.values():
        if setting.required and setting.name not in result:
            raise InvalidArgumentError(
                f"{request} needs the setting {setting.name!r} ({setting.description})"
            )
    return result


def _argument(message: Any, where: str) -> Any:
    """A ``kwargs.NAME`` tensor as a Python value: a scalar, or nested lists."""
    array = unpack(message, where)
    if array.ndim == 0:
        value = array[()]
        return value.item() if isinstance(value, np.generic) else value
    return array.tolist()


def _nest(items: list[tuple[tuple[str, ...], Any, str]], request: str) -> dict[str, Any]:
    """Arguments by path as one nested dict; no path may be set twice or inside another."""
    items.sort(key=lambda item: item[0])
    result: dict[str, Any] = {}
    for (path, _, name), (later, _, other) in itertools.pairwise(items):
        if later[: len(path)] == path:
            raise InvalidArgumentError(
                f"{request} settings {name!r} and {other!r} both set the argument "
                f"{'.'.join(path)!r}"
            )
    for path, value, _ in items:
        target = result
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value
    return result


def _setting_value(setting: Setting, message: Any, request: str) -> Any:
    where = f"{request} setting {setting.name!r}"
    array = unpack(message, where)
    match setting.kind:
        case "seed" if array.ndim == 1 and array.dtype.kind in "iu":
            if array.size and int(array.min()) < -1:
                raise InvalidArgumentError(
                    f"{where} must hold seeds >= 0 (or -1 for unseeded), got {array.tolist()}"
                )
            return [None if s < 0 else int(s) for s in array.tolist()]
        case "mask" if array.ndim == 1 and array.dtype == np.bool_:
            return array
        case "mask":
            raise InvalidArgumentError(
                f"{where} must be a bool vector (one per copy), got {array.dtype.name} "
                f"of shape {list(array.shape)}"
            )
    if array.size != 1:
        raise InvalidArgumentError(f"{where} must be a scalar, got shape {list(array.shape)}")
    value = array.reshape(-1)[0]
    match setting.kind:
        case "str" if isinstance(value, str):
            return value
        case "int" | "seed" if array.dtype.kind in "iu":
            if int(value) < setting.minimum:
                raise InvalidArgumentError(
                    f"{where} must be >= {setting.minimum}, got {int(value)}"
                )
            return int(value)
        case "bool" if array.dtype.kind in "biu" and int(value) in (0, 1):
            return bool(value)
        case "kwargs" if isinstance(value, str):
            try:
                found = json.loads(value)
            except ValueError as exc:
                raise InvalidArgumentError(f"{where} is not JSON: {exc}") from None
            if isinstance(found, dict):
                return found
    kinds = {
        "str": "a string",
        "int": "an integer",
        "bool": "a bool",
        "seed": "an integer, or a vector of integers",
        "kwargs": "a JSON object (as a string)",
    }
    shown = repr(value.item() if isinstance(value, np.generic) else value)
    raise InvalidArgumentError(f"{where} must be {kinds[setting.kind]}, got {shown}")


# --------------------------------------------------------------------------------------------
# the connection state machine


class Kind(Enum):
    """A request's kind: the name of its ``EnvironmentRequest.payload`` field."""

    CREATE_WORLD = "create_world"
    JOIN_WORLD = "join_world"
    STEP = "step"
    RESET = "reset"
    RESET_WORLD = "reset_world"
    LEAVE_WORLD = "leave_world"
    DESTROY_WORLD = "destroy_world"
    EXTENSION = "extension"


class Phase(Enum):
    """Where one connection is: not joined, or joined and in one of dm_env_rpc's states.

    JOINED, TERMINATED and INTERRUPTED are the non-RUNNING states: the next Step ignores its
    actions and starts a sequence.
    """

    UNJOINED = "not joined"
    JOINED = "joined"
    RUNNING = "running"
    TERMINATED = "terminated"
    INTERRUPTED = "interrupted"


class _Marker(Enum):
    SAME = "same"
    WORLD_DECIDES = "world decides"


#: The phase does not change.
SAME: Final = _Marker.SAME
#: The world decides (a Step of a running sequence: RUNNING, TERMINATED or INTERRUPTED).
WORLD_DECIDES: Final = _Marker.WORLD_DECIDES

Next = Phase | _Marker

_ANYWHERE: dict[Kind, Next] = {
    Kind.CREATE_WORLD: SAME,
    Kind.RESET_WORLD: SAME,  # the world moves its own joined connections
    Kind.DESTROY_WORLD: SAME,
    Kind.EXTENSION: SAME,
}
_JOINED: dict[Kind, Next] = {
    **_ANYWHERE,
    Kind.STEP: Phase.RUNNING,  # a sequence starts; the step's actions are ignored
    Kind.RESET: Phase.INTERRUPTED,
    Kind.LEAVE_WORLD: Phase.UNJOINED,
}

#: What each request does in each phase; a request missing from a phase's row is refused.
TRANSITIONS: dict[Phase, dict[Kind, Next]] = {
    Phase.UNJOINED: {**_ANYWHERE, Kind.JOIN_WORLD: Phase.JOINED, Kind.LEAVE_WORLD: SAME},
    Phase.JOINED: _JOINED,
    Phase.RUNNING: {**_JOINED, Kind.STEP: WORLD_DECIDES},
    Phase.TERMINATED: _JOINED,
    Phase.INTERRUPTED: _JOINED,
}

_REFUSALS = {
    (False, Kind.STEP): "Step before JoinWorld: join a world first",
    (False, Kind.RESET): "Reset before JoinWorld: join a world first",
    (True, Kind.JOIN_WORLD): "JoinWorld while joined to world {world!r}: leave it first "
    "(one world per connection; open another connection to join another)",
}


def next_phase(phase: Phase, kind: Kind, world: str = "") -> Next:
    """What ``kind`` does in ``phase`` (:data:`TRANSITIONS`).

    Raises:
        StateError: the phase does not allow it; the message names the request and the phase.
    """
    row = TRANSITIONS[phase]
    if kind in row:
        return row[kind]
    template = _REFUSALS.get((phase is not Phase.UNJOINED, kind))
    if template is None:  # pragma: no cover - the table covers every refusal
        template = f"{kind.value} is not allowed while the connection is {phase.value}"
    raise StateError(template.format(world=world))


# --------------------------------------------------------------------------------------------
# requests, responses and errors


def parse_request(data: bytes) -> Any:
    """An ``EnvironmentRequest`` from its serialized bytes.

    Raises:
        ProtocolError: the bytes are not one.
    """
    try:
        return pb.EnvironmentRequest.FromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ProtocolError(
            f"cannot parse an EnvironmentRequest from {len(data)} bytes: {exc}"
        ) from None


def request_kind(request: Any) -> Kind:
    """The kind of an ``EnvironmentRequest``.

    Raises:
        ProtocolError: the request has no payload.
    """
    field = request.WhichOneof("payload")
    if field is None:
        raise ProtocolError("EnvironmentRequest has no payload (none of create_world, ... is set)")
    return Kind(field)


def status_of(error: EnvwireError) -> Any:
    """A ``google.rpc.Status`` for ``error``: its gRPC code, its message and an ``ErrorInfo``
    detail whose ``reason`` is the error's envwire ``code``."""
    status = status_pb2.Status(code=error.grpc_code, message=str(error))
    info = error_details_pb2.ErrorInfo(reason=error.code, domain=ERROR_DOMAIN)
    status.details.add().Pack(info)
    return status


def error_response(error: EnvwireError) -> Any:
    """An ``EnvironmentResponse`` carrying ``error`` in its ``error`` field."""
    return pb.EnvironmentResponse(error=status_of(error))


def error_from_status(status: Any) -> EnvwireError:
    """The envwire error a ``Status`` stands for (client side).

    An ``ErrorInfo`` detail from envwire names the exact class; otherwise (or when that class
    is not built from a message alone) the result is a :class:`~envwire.errors.RemoteError`.
    """
    for detail in status.details:
        info = error_details_pb2.ErrorInfo()
        if detail.Is(info.DESCRIPTOR) and detail.Unpack(info) and info.domain == ERROR_DOMAIN:
            cls = error_class_for_code(info.reason)
            if cls is not RemoteError:
                try:
                    return cls(status.message)
                except TypeError:  # a class with a constructor of its own
                    pass
            return RemoteError(status.message, info.reason)
    return RemoteError(f"{status.message} (gRPC code {status.code})")
