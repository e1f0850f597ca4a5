"""Samples as JSON: :func:`to_json` and :func:`from_json`. Arrays travel as nested lists or as
``__ndarray__`` base64 objects; decoding restores the exact types Gymnasium samples have."""

from __future__ import annotations

import base64
import functools
import math
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from gymnasium import spaces

from envwire import tensor
from envwire.errors import ConfigError, InvalidArgumentError, ProtocolError
from envwire.jsonio import JsonValue
from envwire.spacecodec._common import (
    _Array,
    _at,
    _int_limits,
    _is_shape,
    _narrow_float,
    _Said,
)
from envwire.spacecodec._structure import _bad, _check_keys, _pairs, _stack, _unstack

__all__ = ["Arrays", "from_json", "is_uint8_array_space", "to_json"]

Arrays = Literal["list", "base64"]
"""How :func:`to_json` writes ndarray leaves."""

_ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiBinary, spaces.MultiDiscrete)


def to_json(space: spaces.Space[Any], sample: object, *, arrays: Arrays = "list") -> JsonValue:
    """Encode a sample of ``space`` as JSON-serialisable data.

    Args:
        space: the space the sample belongs to.
        sample: the sample (its structure must match the space; membership is not checked).
        arrays: numeric ndarray leaves as nested lists (``"list"``, like ``ndarray.tolist()``) or as
            ``{"__ndarray__": base64 of C-order little-endian bytes, "dtype", "shape"}``
            (``"base64"``).

    Returns:
        Plain JSON data. Float arrays may hold NaN or infinities, which ``json.dumps`` writes as
        ``NaN``/``Infinity`` (allowed by default, and read back by ``json.loads``).

    Raises:
        InvalidArgumentError: the sample does not have the structure of the space.
        ConfigError: the space class is not one envwire knows.
    """
    if arrays not in ("list", "base64"):
        raise InvalidArgumentError(f"unknown array encoding {arrays!r}; known: list, base64")
    return _encode(space, sample, arrays == "base64", "")


def from_json(space: spaces.Space[Any], value: JsonValue) -> object:
    """Decode JSON data into a sample of ``space``, with the types Gymnasium's samples have.

    Box, MultiBinary and MultiDiscrete give ndarrays of the space dtype (from a nested list, a
    flat list of the right size, or an ``__ndarray__`` object); Discrete gives a scalar of the
    space dtype (``np.int64`` by default; integral floats such as ``1.0`` are accepted); Tuple a
    tuple (from a JSON list); Dict a dict in the space's key order; Text a str; Sequence a tuple
    (or the stacked array/structure when ``stack=True``); Graph a ``GraphInstance``; OneOf an
    ``(np.int64 index, sample)`` tuple. ``from_json(s, to_json(s, x))`` reproduces ``x`` exactly.

    Raises:
        InvalidArgumentError: the value does not have the structure of a sample of the space
            (membership is :func:`check`'s job); the message says what was expected and what came.
        ConfigError: the space class is not one envwire knows.

    Returns:
        The sample, typed ``object``: its type depends on the space, known only at run time
        (callers hand it to the env or to a codec, or narrow it).
    """
    if type(space) is spaces.Box:  # the common observation space: no dispatch needed
        assert space.shape is not None
        return _decode_array(value, space.dtype, space.shape, "")
    try:
        return _decode(space, value, "")
    except RecursionError:
        raise InvalidArgumentError("value is nested too deeply") from None


def is_uint8_array_space(space: spaces.Space[Any]) -> bool:
    """True for a Box of dtype uint8 (gym-socket sends its samples as a raw byte list)."""
    return isinstance(space, spaces.Box) and space.dtype == np.uint8


def _is_array_space(space: spaces.Space[Any]) -> bool:
    return isinstance(space, _ARRAY_SPACES)


def _leaf(space: spaces.Space[Any]) -> tuple[np.dtype[Any], tuple[int, ...]]:
    """dtype and shape of an array-valued space (Box, Discrete, MultiBinary, MultiDiscrete)."""
    assert space.dtype is not None
    assert space.shape is not None
    return space.dtype, space.shape


# --- encoding
#
# Samples come in as ``object``: each encoder checks the structure it needs (and says what is
# wrong). Implementations registered for a space class take that class's samples.


def _encode_array(x: object, dtype: np.dtype[Any] | None, b64: bool, path: str) -> JsonValue:
    try:
        arr = x if isinstance(x, np.ndarray) else np.asarray(x)
    except (ValueError, TypeError, OverflowError):
        _bad(path, "an array", x)
    if dtype is not None and arr.dtype != dtype and np.can_cast(arr.dtype, dtype, "same_kind"):
        with np.errstate(all="ignore"):
            arr = arr.astype(dtype)
    if arr.dtype.kind not in "biuf":
        _bad(path, f"a numeric array{f' of {dtype}' if dtype is not None else ''}", x)
    if not b64:
        values: JsonValue = arr.tolist()  # nested lists of bools, ints and floats
        return values
    try:
        packed = tensor.encode(arr)
    except ProtocolError as exc:
        raise InvalidArgumentError(f"{exc}{_at(path)}") from None
    return {
        "__ndarray__": base64.b64encode(packed.data).decode("ascii"),
        "dtype": packed.dtype.name,
        "shape": list(packed.shape),
    }


def _encode_batch(space: spaces.Space[Any], x: object, b64: bool, path: str) -> JsonValue:
    """A batch of samples (stacked Sequence, Graph nodes/edges) as one array or a list."""
    if _is_array_space(space):
        return _encode_array(x, space.dtype, b64, path)
    return [_encode(space, item, b64, f"{path}[{i}]") for i, item in enumerate(_unstack(space, x))]


@functools.singledispatch
def _encode(space: spaces.Space[Any], x: object, b64: bool, path: str) -> JsonValue:
    raise ConfigError(f"cannot encode samples of a {type(space).__name__} space")


@_encode.register(spaces.Box)
@_encode.register(spaces.MultiBinary)
@_encode.register(spaces.MultiDiscrete)
def _encode_arrayspace(space: spaces.Space[Any], x: object, b64: bool, path: str) -> JsonValue:
    return _encode_array(x, space.dtype, b64, path)


@_encode.register(spaces.Discrete)
def _encode_discrete(space: spaces.Discrete[Any], x: object, b64: bool, path: str) -> int:
    if isinstance(x, np.ndarray) and x.shape == () and x.dtype.kind in "iu":
        return int(x)
    if not isinstance(x, int | np.integer):
        _bad(path, f"an integer for {space}", x)
    return int(x)


@_encode.register(spaces.Tuple)
def _encode_tuple(space: spaces.Tuple[Any], x: object, b64: bool, path: str) -> JsonValue:
    if not isinstance(x, tuple | list) or len(x) != len(space.spaces):
        _bad(path, f"a tuple of {len(space.spaces)} elements", x)
    return [_encode(sub, part, b64, f"{path}[{i}]") for i, (sub, part) in _pairs(space, x)]


@_encode.register(spaces.Dict)
def _encode_dict(space: spaces.Dict, x: object, b64: bool, path: str) -> JsonValue:
    parts = _check_keys(space, x, path)
    return {k: _encode(sub, parts[k], b64, f"{path}[{k!r}]") for k, sub in space.spaces.items()}


@_encode.register(spaces.Text)
def _encode_text(space: spaces.Text, x: object, b64: bool, path: str) -> str:
    if not isinstance(x, str):
        _bad(path, "a string", x)
    return x


@_encode.register(spaces.Sequence)
def _encode_sequence(space: spaces.Sequence, x: object, b64: bool, path: str) -> JsonValue:
    if space.stack:
        return _encode_batch(space.feature_space, x, b64, path)
    if not isinstance(x, tuple | list):
        _bad(path, "a tuple of elements", x)
    return [_encode(space.feature_space, item, b64, f"{path}[{i}]") for i, item in enumerate(x)]


@_encode.register(spaces.Graph)
def _encode_graph(space: spaces.Graph, x: object, b64: bool, path: str) -> JsonValue:
    if not isinstance(x, tuple) or len(x) != 3:
        _bad(path, "a GraphInstance(nodes, edges, edge_links)", x)
    nodes, edges, links = x
    if (edges is None) != (links is None) or (edges is not None and space.edge_space is None):
        _bad(path, "edges and edge_links both set (with an edge space) or both None", x)
    out: dict[str, JsonValue] = {
        "nodes": _encode_batch(space.node_space, nodes, b64, f"{path}['nodes']")
    }
    if space.edge_space is not None and edges is not None:
        out["edges"] = _encode_batch(space.edge_space, edges, b64, f"{path}['edges']")
        out["edge_links"] = _encode_array(links, None, b64, f"{path}['edge_links']")
    else:
        out["edges"] = out["edge_links"] = None
    return out


@_encode.register(spaces.OneOf)
def _encode_oneof(space: spaces.OneOf[Any], x: object, b64: bool, path: str) -> JsonValue:
    if not (isinstance(x, tuple | list) and len(x) == 2 and isinstance(x[0], int | np.integer)):
        _bad(path, "an (index, sample) pair", x)
    index = int(x[0])
    if not 0 <= index < len(space.spaces):
        _bad(path, f"an index in [0, {len(space.spaces)})", index)
    return [index, _encode(space.spaces[index], x[1], b64, f"{path}[1]")]


# --- decoding
#
# Values come in as ``object`` (from_json's callers pass JSON; the decoders check everything
# they read) and go out as samples, ``object`` too unless the space fixes their type.


def _to_array(value: object, path: str) -> _Array:
    """A numeric ndarray from a nested JSON list/number or an ``__ndarray__`` object."""
    if isinstance(value, Mapping):
        return _from_base64(value, path)
    try:
        arr = np.array(value)
    except (ValueError, TypeError, OverflowError):
        _bad(path, "a rectangular nested list of numbers", value)
    if arr.dtype.kind not in "biuf":
        _bad(path, "numbers (or nested lists of numbers within 64-bit range)", value)
    return arr


def _from_base64(value: Mapping[str, object], path: str) -> _Array:
    data, name, shape = value.get("__ndarray__"), value.get("dtype"), value.get("shape")
    if not (isinstance(data, str) and isinstance(name, str) and isinstance(shape, list)):
        _bad(path, 'an {"__ndarray__": base64, "dtype": name, "shape": [...]} object', value)
    if not _is_shape(shape):
        _bad(path, "'shape' as a list of non-negative integers", shape)
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        _bad(path, "valid base64 in '__ndarray__'", data)
    try:
        return tensor.decode(tensor.Tensor(tensor.dtype_by_name(name), tuple(shape), raw))
    except ProtocolError as exc:
        raise InvalidArgumentError(f"{exc}{_at(path)}") from None


def _cast(arr: _Array, dtype: np.dtype[Any], path: str) -> _Array:
    """``arr`` as ``dtype`` if no value changes beyond float rounding; else InvalidArgumentError."""
    if arr.dtype == dtype:
        return arr
    source, target = arr.dtype.kind, dtype.kind
    if source == "b" and target != "b":
        _bad(path, f"numbers for {dtype.name}", arr)
    if target == "f":
        out = _narrow_float(arr, dtype)
        if out is None:
            _bad(path, f"values within the {dtype.name} range", arr)
        return out
    if source == "f" and not (np.isfinite(arr).all() and (arr == np.trunc(arr)).all()):
        _bad(path, f"integers for {dtype.name}", arr)
    if arr.size:
        lo, hi = _int_limits(dtype)
        if int(arr.min()) < lo or int(arr.max()) > hi:
            _bad(path, f"values within {dtype.name} [{lo}, {hi}]", arr)
    return arr.astype(dtype)


def _decode_array(
    value: object, dtype: np.dtype[Any], shape: tuple[int, ...], path: str, *, batch: bool = False
) -> _Array:
    arr = _cast(_to_array(value, path), dtype, path)
    if batch:  # a leading dimension of any length, then the element shape
        if arr.shape[1:] == shape and arr.ndim == len(shape) + 1:
            return arr
        if arr.shape == (0,):
            return arr.reshape((0, *shape))
        _bad(
            path,
            f"an array of shape (n, {', '.join(map(str, shape))})",
            _Said(f"shape {arr.shape}"),
        )
    if arr.shape == shape:
        return arr
    if arr.ndim <= 1 and arr.size == math.prod(shape):  # flat (or scalar) of the right size
        return arr.reshape(shape)
    _bad(path, f"an array of shape {shape}", _Said(f"shape {arr.shape}"))


def _decode_int(value: object, dtype: np.dtype[Any], path: str) -> np.integer[Any]:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int | np.integer) or isinstance(value, bool):
        _bad(path, f"an integer ({dtype.name})", value)
    lo, hi = _int_limits(dtype)
    if not lo <= int(value) <= hi:
        _bad(path, f"an integer within {dtype.name} [{lo}, {hi}]", value)
    scalar: np.integer[Any] = dtype.type(value)  # an integer dtype's scalar type
    return scalar


def _decode_batch(space: spaces.Space[Any], value: object, path: str) -> object:
    if _is_array_space(space):
        return _decode_array(value, *_leaf(space), path, batch=True)
    if not isinstance(value, list | tuple):
        _bad(path, "a list of samples", value)
    return _stack(space, [_decode(space, item, f"{path}[{i}]") for i, item in enumerate(value)])


@functools.singledispatch
def _decode(space: spaces.Space[Any], value: object, path: str) -> object:
    raise ConfigError(f"cannot decode samples of a {type(space).__name__} space")


@_decode.register(spaces.Box)
@_decode.register(spaces.MultiBinary)
@_decode.register(spaces.MultiDiscrete)
def _decode_arrayspace(space: spaces.Space[Any], value: object, path: str) -> _Array:
    return _decode_array(value, *_leaf(space), path)


@_decode.register(spaces.Discrete)
def _decode_discrete(space: spaces.Discrete[Any], value: object, path: str) -> np.integer[Any]:
    return _decode_int(value, space.dtype, path)


@_decode.register(spaces.Tuple)
def _decode_tuple(space: spaces.Tuple[Any], value: object, path: str) -> tuple[object, ...]:
    if not isinstance(value, list | tuple) or len(value) != len(space.spaces):
        _bad(path, f"a list of {len(space.spaces)} elements", value)
    return tuple(_decode(sub, part, f"{path}[{i}]") for i, (sub, part) in _pairs(space, value))


@_decode.register(spaces.Dict)
def _decode_dict(space: spaces.Dict, value: object, path: str) -> dict[str, object]:
    parts = _check_keys(space, value, path)
    return {k: _decode(sub, parts[k], f"{path}[{k!r}]") for k, sub in space.spaces.items()}


@_decode.register(spaces.Text)
def _decode_text(space: spaces.Text, value: object, path: str) -> str:
    if not isinstance(value, str):
        _bad(path, "a string", value)
    return value


@_decode.register(spaces.Sequence)
def _decode_sequence(space: spaces.Sequence, value: object, path: str) -> object:
    if space.stack:
        return _decode_batch(space.feature_space, value, path)
    if not isinstance(value, list | tuple):
        _bad(path, "a list of elements", value)
    return tuple(_decode(space.feature_space, v, f"{path}[{i}]") for i, v in enumerate(value))


_GRAPH_KEYS = frozenset({"nodes", "edges", "edge_links"})


@_decode.register(spaces.Graph)
def _decode_graph(space: spaces.Graph, value: object, path: str) -> spaces.GraphInstance:
    if not isinstance(value, Mapping) or "nodes" not in value or value.keys() - _GRAPH_KEYS:
        _bad(path, 'an object {"nodes", "edges", "edge_links"}', value)
    # A Graph's node and edge spaces are a Box or a Discrete (Graph checks): arrays.
    nodes = _decode_leaves(space.node_space, value["nodes"], f"{path}['nodes']")
    edges, links = value.get("edges"), value.get("edge_links")
    if edges is None and links is None:
        return spaces.GraphInstance(nodes, None, None)
    if edges is None or links is None or space.edge_space is None:
        _bad(path, "'edges' and 'edge_links' both given (with an edge space) or both null", value)
    edge_values = _decode_leaves(space.edge_space, edges, f"{path}['edges']")
    return spaces.GraphInstance(nodes, edge_values, _decode_links(links, f"{path}['edge_links']"))


def _decode_leaves(space: spaces.Space[Any], value: object, path: str) -> _Array:
    """A batch of samples of an array-valued space: :func:`_decode_batch` of such a space."""
    return _decode_array(value, *_leaf(space), path, batch=True)


def _decode_links(value: object, path: str) -> _Array:
    """Edge links, shape (m, 2): int32 from a list (as ``Graph.sample`` makes them), or the
    integer dtype a base64 array carries."""
    raw = _to_array(value, path)
    keep = isinstance(value, Mapping) and raw.dtype.kind in "iu"
    links = _cast(raw, raw.dtype if keep else np.dtype(np.int32), path)
    if links.shape == (0,):
        return links.reshape((0, 2))
    if links.ndim != 2 or links.shape[1] != 2:
        _bad(path, "an array of shape (m, 2)", _Said(f"shape {links.shape}"))
    return links


@_decode.register(spaces.OneOf)
def _decode_oneof(space: spaces.OneOf[Any], value: object, path: str) -> tuple[np.int64, object]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        _bad(path, "an [index, sample] pair", value)
    index = int(_decode_int(value[0], np.dtype(np.int64), f"{path}[0]"))
    if not 0 <= index < len(space.spaces):
        _bad(f"{path}[0]", f"an index in [0, {len(space.spaces)})", index)
    return np.int64(index), _decode(space.spaces[index], value[1], f"{path}[1]")
