"""Specs from spaces: :class:`Layout` turns any Gymnasium space into ``TensorSpec`` leaves with
UIDs and "." nesting, writes samples into tensors and reads them back, and validates actions
tensor by tensor with errors that name the UID."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

import numpy as np
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from gymnasium import spaces

from envwire import jsonio, spacecodec
from envwire.errors import ConfigError, InvalidActionError, InvalidArgumentError, ProtocolError
from envwire.protocols.dmenvrpc.dtypes import (
    BOOL,
    BY_ENUM,
    BY_FIELD,
    STRING,
    DataType,
    data_type_of,
)
from envwire.protocols.dmenvrpc.tensors import Array, flat, resolve_shape, unpack, write
from envwire.spacecodec.modelspace import ModelSpace

__all__ = [
    "VECTOR_OBSERVATIONS",
    "WORLD_OBSERVATIONS",
    "Layout",
    "Leaf",
]

#: Names of the observations a world adds beside the env's own, in UID order after them (a
#: top-level Dict key with one of these names moves the env's names under ``observation.``).
WORLD_OBSERVATIONS: Final = ("reward", "discount", "envwire.truncated", "envwire.info")
#: The same for a vector world (CreateWorld ``num_envs``); all but ``envwire.info`` are [N].
VECTOR_OBSERVATIONS: Final = ("reward", "terminated", "truncated", "discount", "envwire.info")


LeafKind = Literal["array", "scalar", "text", "sequence", "model", "json"]
_Path = tuple[str | int, ...]


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
    path: _Path
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

    def from_array(self, array: Array) -> Any:
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

    def check(self, message: Any, role: str = "action") -> Array:
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

    def _in_range(self, value: Any) -> bool:
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


def _bound(values: Any, row: DataType, shape: tuple[int, ...]) -> Array | None:
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
        top = "" if self._keyed(space) else prefix
        self.leaves: list[Leaf] = []
        self._add(space, top, (), first_uid)
        names = {leaf.name for leaf in self.leaves}
        if top == "" and (names & set(reserved)):
            self.leaves.clear()
            self._add(space, prefix, (), first_uid)
        if batch:
            self.leaves = [leaf.batched(batch) for leaf in self.leaves]
        self._index()
        self.next_uid = first_uid + len(self.leaves)

    def _index(self) -> None:
        """What follows from the leaves: the lookups by UID and name, and the short reader."""
        self.by_uid = {leaf.uid: leaf for leaf in self.leaves}
        self.by_name = {leaf.name: leaf for leaf in self.leaves}
        self._scalar = _scalar_reader(self.leaves)

    def _add(self, space: Any, name: str, path: _Path, uid: int) -> int:
        parts = self._parts(space)
        if parts is None:
            self.leaves.append(self._leaf(space, name, path, uid))
            return uid + 1
        for key, sub in parts:
            uid = self._add(sub, f"{name}.{key}" if name else str(key), (*path, key), uid)
        return uid

    # What a subclass changes to lay out another kind of tree (``NativeLayout``: dm_env specs).

    @staticmethod
    def _keyed(space: Any) -> bool:
        """True when the top of ``space`` lays its keys out as names (a Dict)."""
        return isinstance(space, spaces.Dict)

    @staticmethod
    def _parts(space: Any) -> Iterable[tuple[str | int, Any]] | None:
        """A composite space's parts by key or index; None for a leaf."""
        if isinstance(space, spaces.Dict):
            return named_parts(space.spaces, "Dict key")
        if isinstance(space, spaces.Tuple):
            return enumerate(space.spaces)
        return None

    _leaf = staticmethod(_leaf)  # the leaf of a non-composite space

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
        if check and self._scalar is not None:
            value = self._scalar(tensors)
            if value is not None:
                return value
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

    def matched(self, specs: Mapping[int, Any], role: str) -> Layout:
        """This layout with the UIDs and data types of a server's ``specs``, matched by name.

        A client lays out the Gymnasium space it was told and follows the server's specs,
        which may number and type the same leaves otherwise (a dm_env env's own specs: the
        env's key order, ``int32`` discrete values).

        Raises:
            ProtocolError: a leaf has no spec of its name.
        """
        by_name = {spec.name: (uid, spec) for uid, spec in specs.items()}
        leaves = []
        for leaf in self.leaves:
            if leaf.name not in by_name:
                raise ProtocolError(
                    f"the {role} specs have no {leaf.name!r} (specs: {sorted(by_name)})"
                )
            uid, spec = by_name[leaf.name]
            leaves.append(replace(leaf, uid=uid, row=BY_ENUM[spec.dtype]))
        result = copy.copy(self)
        result.leaves = leaves
        result._index()
        return result


def named_parts(mapping: Mapping[Any, Any], what: str) -> Iterable[tuple[str, Any]]:
    """The items of ``mapping``, whose keys become dm_env_rpc names.

    Raises:
        ConfigError: a key that is not a string, or contains "." (the protocol's nesting mark).
    """
    for key in mapping:
        if not isinstance(key, str) or "." in key:
            raise ConfigError(
                f"{what} {key!r} cannot be a dm_env_rpc name: keys must be strings "
                "without '.' (the protocol's nesting mark)"
            )
    return mapping.items()


def _scalar_reader(leaves: list[Leaf]) -> Any:
    """For a layout that is one bounded scalar (a Discrete action, the common case), a reader
    that takes the usual message (the one UID, the spec's data type, no shape, one in-range
    value) straight to the sample and returns None for anything else, which
    :meth:`Layout.read` then checks the long way (with its errors). None for other layouts."""
    if len(leaves) != 1:
        return None
    leaf = leaves[0]
    space_dtype = getattr(leaf.space, "dtype", None)
    if (
        leaf.kind != "scalar"
        or leaf.batch
        or leaf.path
        or leaf.low is None
        or leaf.high is None
        or space_dtype is None
        or space_dtype != leaf.row.numpy
    ):
        return None
    uid, field, cast = leaf.uid, leaf.row.field, space_dtype.type
    low, high = leaf.low.item(), leaf.high.item()

    def read(tensors: Mapping[int, Any]) -> Any:
        if len(tensors) != 1:
            return None
        message = tensors.get(uid)
        if message is None or message.shape or message.WhichOneof("payload") != field:
            return None
        items = getattr(message, field).array
        if len(items) != 1 or not low <= items[0] <= high:
            return None
        return cast(items[0])

    return read


def _compose(space: spaces.Space[Any], leaves: Any, values: Mapping[int, Any]) -> Any:
    if isinstance(space, spaces.Dict):
        return {key: _compose(sub, leaves, values) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_compose(sub, leaves, values) for sub in space.spaces)
    return values[next(leaves).uid]
