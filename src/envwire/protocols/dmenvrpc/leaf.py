"""One tensor of a space: :class:`Leaf` (a Box, a Discrete, a Text, ... somewhere inside Dicts
and Tuples) and how its values become arrays and back; :func:`space_leaf` makes the leaf of a
non-composite Gymnasium space. :class:`~envwire.protocols.dmenvrpc.layout.Layout` lays a whole
space out in leaves."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from gymnasium import spaces

from envwire import jsonio, spacecodec
from envwire.errors import ConfigError, InvalidActionError, InvalidArgumentError
from envwire.protocols.dmenvrpc.dtypes import BOOL, BY_FIELD, STRING, DataType, data_type_of
from envwire.protocols.dmenvrpc.tensors import Array, TensorMessage, flat, resolve_shape, write
from envwire.spacecodec.modelspace import ModelSpace

__all__ = ["Leaf", "LeafKind", "Path", "space_leaf"]

LeafKind = Literal["array", "scalar", "text", "sequence", "model", "json"]
#: The keys and indices that lead from a whole sample to one leaf's value.
Path = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Leaf:
    """One tensor of a space: a Box, a Discrete, a Text, ... somewhere inside Dicts and Tuples.

    Attributes:
        uid: its UID in the specs.
        name: its "."-joined name.
        path: the keys and indices that lead from the whole sample to this leaf's value.
        space: the leaf's own space (in a ``NativeLayout``, its dm_env spec).
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
    path: Path
    space: spaces.Space[Any]
    kind: LeafKind
    row: DataType
    shape: tuple[int, ...]
    low: Array | None = None
    high: Array | None = None
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

    def spec(self) -> pb.TensorSpec:
        """The leaf's ``TensorSpec``."""
        result = pb.TensorSpec(name=self.name, dtype=self.row.enum)
        result.shape.extend(self.shape)
        if self.low is not None:
            write(result.min, self.low, self.row)
        if self.high is not None:
            write(result.max, self.high, self.row)
        return result

    def value_of(self, sample: Any) -> object:
        """This leaf's part of a whole sample.

        ``sample`` is ``Any``: it is indexed by the leaf's path (keys of dicts, indices of
        tuples, whatever the sample's containers are), which the space decides at run time.
        """
        for key in self.path:
            sample = sample[key]
        return sample

    def to_array(self, value: Any) -> Array:
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

    def _batch_to_array(self, values: Any) -> Array:
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

    def from_array(self, array: Array) -> object:
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
                    value = jsonio.loads(str(array.reshape(())[()]))
                except ValueError as exc:
                    raise InvalidArgumentError(f"not JSON: {exc}") from None
                return spacecodec.from_json(self.space, value)

    def check(self, message: TensorMessage, role: str = "action") -> Array:
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
            got = f"a {BY_FIELD[field].name} tensor" if field else "a tensor with no payload"
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

    def _in_range(self, value: float) -> bool:
        low, high = self.low, self.high
        return (low is None or low.item() <= value) and (high is None or value <= high.item())

    def _check_range(self, array: Array, where: str) -> None:
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


def _lead(bound: Array | None, shape: tuple[int, ...]) -> Array | None:
    """A leaf's bound for its batched shape (a scalar bound stays scalar)."""
    if bound is None or bound.ndim == 0:
        return bound
    return np.broadcast_to(bound, shape)


def _bound(values: npt.ArrayLike, row: DataType, shape: tuple[int, ...]) -> Array | None:
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


def space_leaf(space: object, name: str, path: Path, uid: int) -> Leaf:
    """The leaf for a non-composite space.

    Raises:
        ConfigError: ``space`` is not a Gymnasium space (a Dict or Tuple holds only spaces,
            so only a layout made of something else gets here).
    """
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
            inner = space_leaf(space.feature_space, name, path, uid)
            low, high = inner.low, inner.high
            if low is not None and low.ndim:  # variable shapes carry scalar ranges only
                low = None
            if high is not None and high.ndim:
                high = None
            return Leaf(
                uid, name, path, space, "sequence", inner.row, (-1, *inner.shape), low, high
            )
    if not isinstance(space, spaces.Space):
        raise ConfigError(f"{name or 'the layout'}: {space!r} is not a Gymnasium space")
    return Leaf(uid, name, path, space, "json", STRING, ())
