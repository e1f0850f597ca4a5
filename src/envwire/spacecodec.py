"""Gymnasium spaces <-> JSON descriptions, samples <-> JSON, and action validation.

Sans-IO: plain data in, plain data out. Three jobs, each a ``functools.singledispatch`` over the
space classes of ``gymnasium.spaces``:

* :func:`describe` / :func:`from_description`: a space as a JSON object. Style ``"envwire"``
  describes every Gymnasium space exactly (``from_description(describe(s)) == s``, dtype, bound
  flags, Dict key order and Text charset order included); style ``"gym-socket"`` keeps the legacy
  forms of the gym-socket protocol for the types it knew and falls back to ``"envwire"`` for the
  others. :func:`from_description` reads both.
* :func:`to_json` / :func:`from_json`: a sample as JSON. Arrays travel as nested lists or as
  ``{"__ndarray__": base64, "dtype", "shape"}`` objects; decoding restores the exact types Gymnasium
  samples have (``np.int64`` for ``Discrete``, ndarrays of the space dtype, tuples, dicts,
  ``GraphInstance``).
* :func:`check`: ``value in space`` with an error that says what is wrong.

Errors: a malformed description is a :class:`~envwire.errors.ProtocolError`; a malformed sample
is an :class:`~envwire.errors.InvalidArgumentError` (callers re-label it); a sample outside its
space is an :class:`~envwire.errors.InvalidActionError`; a space class envwire cannot describe is
a :class:`~envwire.errors.ConfigError`. See ``docs/spaces.md`` for the wire forms.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import reprlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, NoReturn

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from envwire import tensor
from envwire.errors import ConfigError, InvalidActionError, InvalidArgumentError, ProtocolError

__all__ = [
    "Arrays",
    "Style",
    "check",
    "describe",
    "from_description",
    "from_json",
    "is_uint8_array_space",
    "to_json",
]

Style = Literal["envwire", "gym-socket"]
"""The description styles of :func:`describe`."""
Arrays = Literal["list", "base64"]
"""How :func:`to_json` writes ndarray leaves."""
_Array = npt.NDArray[Any]

_LEGACY_BOUND = 1e30  # gym-socket's stand-in for infinity (JSON has none)
_MAX_ELEMENTS = 1 << 26  # largest Box/MultiBinary/MultiDiscrete a description may ask for
_MAX_DIM = 1 << 31
_MAX_MESSAGE = 300
_ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiBinary, spaces.MultiDiscrete)

_repr = reprlib.Repr()
_repr.maxstring = _repr.maxother = 60
_repr.maxlist = _repr.maxtuple = 8
_repr.maxdict = 4
_repr.maxlevel = 3


class _Said(str):
    """Text an error message shows as is (a description of what came, not the value)."""

    __slots__ = ()


def _show(value: Any) -> str:
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


# --------------------------------------------------------------------------------------------
# describe


def describe(space: spaces.Space[Any], *, style: Style = "envwire") -> dict[str, Any]:
    """Describe a space as a JSON-serialisable object.

    Args:
        space: any Gymnasium space (subclasses are described as their Gymnasium base class).
        style: ``"envwire"`` (exact, for every space type) or ``"gym-socket"`` (the legacy forms
            for Box, Discrete, MultiBinary, MultiDiscrete and Tuple; ``"envwire"`` otherwise).

    Returns:
        A dict of plain ``str``/``int``/``float``/``bool``/``list``/``dict``/``None`` values that
        passes ``json.dumps(..., allow_nan=False)``.

    Raises:
        ConfigError: the space (or a part of it) is not a Gymnasium space class envwire knows,
            a Dict has a non-string key, or a dtype is outside envwire's dtype table.
        InvalidArgumentError: ``style`` is not a known style.
    """
    if style == "envwire":
        return _describe(space)
    if style == "gym-socket":
        return _legacy(space)
    raise InvalidArgumentError(f"unknown description style {style!r}; known: envwire, gym-socket")


def _dtype_name(dtype: np.dtype[Any], space: spaces.Space[Any]) -> str:
    try:
        return tensor.dtype_by_name(dtype).name
    except ProtocolError as exc:
        raise ConfigError(f"cannot describe {_space_repr(space)}: {exc}") from None


def _bound_item(value: Any, bounded: bool, kind: str, infinity: str) -> Any:
    if kind == "f":
        return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    # Signed-int Boxes store an infinite bound as the dtype's limit and remember it in
    # bounded_below/above (sampling differs), so the flag, not the value, decides.
    return value if bounded else infinity


def _bound(values: _Array, bounded: _Array, infinity: str) -> Any:
    """One scalar when every element (and flag) is the same, else a flat C-order list."""
    flat, flags, kind = values.ravel(), bounded.ravel(), values.dtype.kind
    if flat.size:
        same = bool(np.all(flat == flat[0])) and (bool(flags.all()) or not flags.any())
        if same and kind == "f":
            same = bool(np.all(np.signbit(flat) == np.signbit(flat[0])))
        if same:
            return _bound_item(flat[0].item(), bool(flags[0]), kind, infinity)
    return [
        _bound_item(v, b, kind, infinity)
        for v, b in zip(flat.tolist(), flags.tolist(), strict=True)
    ]


@functools.singledispatch
def _describe(space: spaces.Space[Any]) -> dict[str, Any]:
    raise ConfigError(
        f"cannot describe a {type(space).__name__} space; supported: {', '.join(_PARSERS)}"
    )


@_describe.register(spaces.Box)
def _describe_box(space: spaces.Box[Any]) -> dict[str, Any]:
    return {
        "type": "Box",
        "shape": list(space.shape),
        "dtype": _dtype_name(space.dtype, space),
        "low": _bound(space.low, space.bounded_below, "-inf"),
        "high": _bound(space.high, space.bounded_above, "inf"),
    }


@_describe.register(spaces.Discrete)
def _describe_discrete(space: spaces.Discrete[Any]) -> dict[str, Any]:
    return {
        "type": "Discrete",
        "n": int(space.n),
        "start": int(space.start),
        "dtype": _dtype_name(space.dtype, space),
    }


@_describe.register(spaces.MultiBinary)
def _describe_multibinary(space: spaces.MultiBinary) -> dict[str, Any]:
    # MultiBinary(5) and MultiBinary([5]) are different spaces (n is 5 or (5,)).
    n = space.n
    return {"type": "MultiBinary", "n": int(n) if isinstance(n, int) else [int(k) for k in n]}


@_describe.register(spaces.MultiDiscrete)
def _describe_multidiscrete(space: spaces.MultiDiscrete[Any]) -> dict[str, Any]:
    return {
        "type": "MultiDiscrete",
        "nvec": space.nvec.tolist(),
        "start": space.start.tolist(),
        "dtype": _dtype_name(space.dtype, space),
    }


@_describe.register(spaces.Tuple)
def _describe_tuple(space: spaces.Tuple[Any]) -> dict[str, Any]:
    return {"type": "Tuple", "subspaces": [_describe(sub) for sub in space.spaces]}


@_describe.register(spaces.Dict)
def _describe_dict(space: spaces.Dict) -> dict[str, Any]:
    for key in space.spaces:
        if not isinstance(key, str):
            raise ConfigError(f"cannot describe a Dict space with the non-string key {key!r}")
    return {"type": "Dict", "spaces": {key: _describe(sub) for key, sub in space.spaces.items()}}


@_describe.register(spaces.Text)
def _describe_text(space: spaces.Text) -> dict[str, Any]:
    return {
        "type": "Text",
        "min_length": int(space.min_length),
        "max_length": int(space.max_length),
        # character_list keeps the space's own order, which sampling and flattening use.
        "charset": "".join(space.character_list),
    }


@_describe.register(spaces.Sequence)
def _describe_sequence(space: spaces.Sequence) -> dict[str, Any]:
    return {"type": "Sequence", "space": _describe(space.feature_space), "stack": bool(space.stack)}


@_describe.register(spaces.Graph)
def _describe_graph(space: spaces.Graph) -> dict[str, Any]:
    edge = None if space.edge_space is None else _describe(space.edge_space)
    return {"type": "Graph", "node_space": _describe(space.node_space), "edge_space": edge}


@_describe.register(spaces.OneOf)
def _describe_oneof(space: spaces.OneOf[Any]) -> dict[str, Any]:
    return {"type": "OneOf", "spaces": [_describe(sub) for sub in space.spaces]}


@functools.singledispatch
def _legacy(space: spaces.Space[Any]) -> dict[str, Any]:
    # The original server sent only {"type": Name} here; the full description is a superset.
    return _describe(space)


@_legacy.register(spaces.Box)
def _legacy_box(space: spaces.Box[Any]) -> dict[str, Any]:
    def clipped(values: _Array, bounded: _Array, infinity: float) -> list[float]:
        out = values.astype(np.float64)
        out[~bounded] = infinity
        return [float(v) for v in np.clip(out, -_LEGACY_BOUND, _LEGACY_BOUND).ravel().tolist()]

    return {
        "type": "Box",
        "shape": list(space.shape),
        "low": clipped(space.low, space.bounded_below, -_LEGACY_BOUND),
        "high": clipped(space.high, space.bounded_above, _LEGACY_BOUND),
    }


@_legacy.register(spaces.Discrete)
def _legacy_discrete(space: spaces.Discrete[Any]) -> dict[str, Any]:
    return {"type": "Discrete", "n": int(space.n)}


@_legacy.register(spaces.MultiDiscrete)
def _legacy_multidiscrete(space: spaces.MultiDiscrete[Any]) -> dict[str, Any]:
    starts, counts = space.start.ravel().tolist(), space.nvec.ravel().tolist()
    return {
        "type": "MultiDiscrete",
        "low": starts,
        "high": [s + n - 1 for s, n in zip(starts, counts, strict=True)],
    }


@_legacy.register(spaces.Tuple)
def _legacy_tuple(space: spaces.Tuple[Any]) -> dict[str, Any]:
    return {"type": "Tuple", "subspaces": [_legacy(sub) for sub in space.spaces]}


# --------------------------------------------------------------------------------------------
# from_description


def from_description(desc: Mapping[str, Any]) -> spaces.Space[Any]:
    """Build the space a description describes (either style).

    Args:
        desc: a decoded JSON object from :func:`describe` (or a gym-socket server). Legacy forms:
            Box without ``dtype`` is float32 (its ``±1e30`` bounds are kept as given);
            MultiDiscrete given by ``low``/``high`` has ``nvec = high - low + 1``, ``start = low``.

    Returns:
        A fresh, unseeded space.

    Raises:
        ProtocolError: the description is malformed; the message names the field, what was
            expected and what came. No other exception escapes for JSON-like input.
    """
    try:
        return _parse(desc, "")
    except RecursionError:
        raise ProtocolError("space description is nested too deeply") from None


_MISSING: Any = object()


class _Bound(NamedTuple):
    """A Box bound as read from a description: values, and where the bound is infinite."""

    values: _Array
    free: npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class _Reader:
    """Reads the fields of one description and reports what is wrong with them."""

    desc: Mapping[str, Any]
    kind: str
    path: str

    def fail(self, expected: str, got: Any) -> NoReturn:
        shown = "nothing" if got is _MISSING else _show(got)
        raise ProtocolError(
            f"{self.kind} description needs {expected}, got {shown}{_at(self.path)}"
        )

    def get(self, key: str, default: Any = _MISSING) -> Any:
        return self.desc.get(key, default)

    def int_(self, key: str, minimum: int | None, default: Any = _MISSING) -> int:
        value = self.get(key, default)
        if not _is_int(value) or (minimum is not None and value < minimum):
            bound = "" if minimum is None else " > 0" if minimum == 1 else f" >= {minimum}"
            self.fail(f"integer {key!r}{bound}", value)
        return int(value)

    def dtype(self, kinds: str, default: str) -> np.dtype[Any]:
        name = self.get("dtype", default)
        names = [d.name for d in tensor.DTYPES if d.numpy.kind in kinds]
        if name not in names:
            self.fail(f"'dtype' one of {', '.join(names)}", name)
        return tensor.dtype_by_name(name).numpy.newbyteorder("=")

    def ints(self, key: str, default: Any = _MISSING) -> tuple[list[int], tuple[int, ...]]:
        """An integer or a rectangular nested list of integers: (flat values, shape)."""
        value = self.get(key, default)
        leaves, shape = _nested(value)
        if shape is None or not all(_is_int(v) for v in leaves):
            self.fail(f"{key!r} as an integer or a nested list of integers", value)
        if math.prod(shape) > _MAX_ELEMENTS:
            self.fail(f"{key!r} with at most {_MAX_ELEMENTS} elements", math.prod(shape))
        return leaves, shape

    def int_array(self, key: str, leaves: list[int], shape: tuple[int, ...], dtype: Any) -> _Array:
        lo, hi = _int_limits(np.dtype(dtype))
        if leaves and (min(leaves) < lo or max(leaves) > hi):
            self.fail(f"{key!r} values within {np.dtype(dtype).name} [{lo}, {hi}]", leaves)
        return np.array(leaves, dtype=dtype).reshape(shape)

    def space(self, key: str) -> spaces.Space[Any]:
        value = self.get(key)
        if not isinstance(value, Mapping):
            self.fail(f"{key!r} as a space description object", value)
        return _parse(value, f"{self.path}.{key}" if self.path else key)

    def build(self, factory: Callable[[], spaces.Space[Any]]) -> spaces.Space[Any]:
        try:
            return factory()
        except (ValueError, TypeError, OverflowError, AssertionError) as exc:
            raise ProtocolError(
                f"{self.kind} description is not a valid space: {_cap(str(exc), 160)}"
                f"{_at(self.path)}"
            ) from None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@functools.lru_cache(maxsize=32)
def _int_limits(dtype: np.dtype[Any]) -> tuple[int, int]:
    if dtype.kind == "b":
        return 0, 1
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _nested(value: Any) -> tuple[list[Any], tuple[int, ...] | None]:
    """Leaves and shape of a scalar or a rectangular nested list; shape None if ragged."""
    if not isinstance(value, list | tuple):
        return [value], ()
    shape: list[int] = []
    level: list[Any] = [value]
    while level and all(isinstance(item, list | tuple) for item in level):
        width = len(level[0])
        if any(len(item) != width for item in level) or len(shape) >= 32:
            return [], None
        shape.append(width)
        level = [leaf for item in level for leaf in item]
    if any(isinstance(item, list | tuple) for item in level):
        return [], None
    return level, tuple(shape)


def _parse(desc: Any, path: str) -> spaces.Space[Any]:
    if not isinstance(desc, Mapping):
        raise ProtocolError(
            f"a space description must be a JSON object, got {_show(desc)}{_at(path)}"
        )
    kind = desc.get("type")
    if not isinstance(kind, str) or kind not in _PARSERS:
        raise ProtocolError(
            f"unknown space type {_show(kind)}; known: {', '.join(_PARSERS)}{_at(path)}"
        )
    return _PARSERS[kind](_Reader(desc, kind, path))


def _box_bound(r: _Reader, key: str, dtype: np.dtype[Any], shape: tuple[int, ...]) -> _Bound:
    """Read ``low`` or ``high``: the values in ``dtype`` and the mask of unbounded elements."""
    infinity = "-inf" if key == "low" else "inf"
    raw = r.get(key)
    leaves, got = _nested(raw)
    size = math.prod(shape)
    if got is None or not (got in ((), shape) or got == (size,)):
        r.fail(f"{key!r} as one number or a flat list of {size} numbers", raw)
    if dtype.kind == "f":
        if not all(_is_float_leaf(v) for v in leaves):
            r.fail(f"{key!r} of numbers, 'inf' or '-inf'", raw)
        values = _narrow_float(np.array([float(v) for v in leaves]), dtype)
        if values is None:
            r.fail(f"{key!r} within the {dtype.name} range", raw)
        free = np.isinf(values)
    else:
        # Gymnasium allows infinite bounds on signed-int Boxes only.
        word = infinity if dtype.kind == "i" else None
        if not all(v == word or _is_int(v) or _is_bool_leaf(v, dtype) for v in leaves):
            r.fail(f"{key!r} of integers{f' or {word!r}' if word else ''} for {dtype.name}", raw)
        lo, hi = _int_limits(dtype)
        ints = [(lo if key == "low" else hi) if v == word else int(v) for v in leaves]
        if ints and (min(ints) < lo or max(ints) > hi):
            r.fail(f"{key!r} within {dtype.name} [{lo}, {hi}]", raw)
        values = np.array(ints, dtype=dtype)
        free = np.array([v == word for v in leaves], dtype=bool)
    if got == ():
        return _Bound(np.full(shape, values[0], dtype=dtype), np.full(shape, bool(free[0])))
    return _Bound(values.reshape(shape), free.reshape(shape))


def _is_bool_leaf(value: Any, dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "b" and isinstance(value, bool)


def _is_dim(value: Any) -> bool:
    return _is_int(value) and 0 <= value < _MAX_DIM


def _is_float_leaf(value: Any) -> bool:
    if value in ("inf", "-inf"):
        return True
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return not math.isnan(float(value))
    except OverflowError:
        return False


def _parse_box(r: _Reader) -> spaces.Space[Any]:
    raw = r.get("shape")
    if not (isinstance(raw, list) and len(raw) <= 32 and all(_is_dim(n) for n in raw)):
        r.fail("'shape' as a list of non-negative integers", raw)
    shape = tuple(int(n) for n in raw)
    if math.prod(shape) > _MAX_ELEMENTS:
        r.fail(f"'shape' with at most {_MAX_ELEMENTS} elements", raw)
    dtype = r.dtype("biuf", "float32")  # no dtype: gym-socket's legacy form, float32
    low = _box_bound(r, "low", dtype, shape)
    high = _box_bound(r, "high", dtype, shape)
    bad = np.argwhere(low.values > high.values)
    if bad.size:
        r.fail("'low' <= 'high' everywhere", _Said(f"low > high at index {tuple(bad[0].tolist())}"))
    box = r.build(lambda: spaces.Box(low.values, high.values, shape, dtype))
    if dtype.kind == "i":
        # Built from -inf, an int Box stores the dtype's minimum and flags it unbounded (it
        # samples such elements differently); built from arrays it cannot know, so restore it.
        box.bounded_below = ~low.free  # type: ignore[attr-defined]
        box.bounded_above = ~high.free  # type: ignore[attr-defined]
    return box


def _parse_discrete(r: _Reader) -> spaces.Space[Any]:
    n, start = r.int_("n", 1), r.int_("start", None, 0)
    dtype = r.dtype("iu", "int64")
    lo, hi = _int_limits(dtype)
    if n > hi:
        r.fail(f"'n' within {dtype.name} (<= {hi})", n)
    if not lo <= start <= hi:
        r.fail(f"'start' within {dtype.name} [{lo}, {hi}]", start)
    return r.build(lambda: spaces.Discrete(n, start=start, dtype=dtype))


def _parse_multibinary(r: _Reader) -> spaces.Space[Any]:
    n = r.get("n")
    if _is_int(n) and n > 0:
        if n > _MAX_ELEMENTS:
            r.fail(f"'n' <= {_MAX_ELEMENTS}", n)
        return r.build(lambda: spaces.MultiBinary(int(n)))
    if not (isinstance(n, list) and len(n) <= 32 and all(_is_dim(k) and k > 0 for k in n)):
        r.fail("'n' as an integer > 0 or a list of integers > 0", n)
    if math.prod(n) > _MAX_ELEMENTS:
        r.fail(f"'n' with at most {_MAX_ELEMENTS} elements", n)
    return r.build(lambda: spaces.MultiBinary([int(k) for k in n]))


def _parse_multidiscrete(r: _Reader) -> spaces.Space[Any]:
    if "nvec" in r.desc:
        dtype = r.dtype("iu", "int64")
        counts, shape = r.ints("nvec")
        starts, start_shape = r.ints("start") if "start" in r.desc else ([0] * len(counts), shape)
        if start_shape != shape:
            r.fail(f"'start' of the shape of 'nvec' {list(shape)}", r.get("start"))
    else:  # gym-socket's legacy form: flat inclusive low/high lists
        dtype = np.dtype(np.int64)
        starts, shape = r.ints("low")
        highs, high_shape = r.ints("high")
        if high_shape != shape:
            r.fail(f"'high' of the shape of 'low' {list(shape)}", r.get("high"))
        counts = [h - s + 1 for s, h in zip(starts, highs, strict=True)]
    if any(k <= 0 for k in counts):
        r.fail("counts > 0 ('nvec' > 0, or 'high' >= 'low')", counts)
    nvec = r.int_array("nvec", counts, shape, dtype)
    start = r.int_array("start", starts, shape, dtype)
    return r.build(lambda: spaces.MultiDiscrete(nvec, dtype=dtype, start=start))


def _parse_tuple(r: _Reader) -> spaces.Space[Any]:
    subs = r.get("subspaces")
    if not isinstance(subs, list):
        r.fail("'subspaces' as a list of space descriptions", subs)
    parts = [_parse(sub, f"{r.path}.subspaces[{i}]".lstrip(".")) for i, sub in enumerate(subs)]
    return r.build(lambda: spaces.Tuple(parts))


def _parse_dict(r: _Reader) -> spaces.Space[Any]:
    subs = r.get("spaces")
    if not isinstance(subs, Mapping) or not all(isinstance(k, str) for k in subs):
        r.fail("'spaces' as an object of space descriptions", subs)
    # A list of pairs keeps the description's key order (a mapping would be sorted).
    pairs = [(k, _parse(sub, f"{r.path}.spaces[{k!r}]".lstrip("."))) for k, sub in subs.items()]
    return r.build(lambda: spaces.Dict(pairs))


def _parse_text(r: _Reader) -> spaces.Space[Any]:
    max_length, min_length = r.int_("max_length", 0), r.int_("min_length", 0, 1)
    if min_length > max_length:
        r.fail(f"'min_length' <= 'max_length' ({max_length})", min_length)
    charset = r.get("charset", _MISSING)
    if charset is _MISSING:
        return r.build(lambda: spaces.Text(max_length, min_length=min_length))
    if not isinstance(charset, str):
        r.fail("'charset' as a string of characters", charset)
    return r.build(lambda: spaces.Text(max_length, min_length=min_length, charset=charset))


def _parse_sequence(r: _Reader) -> spaces.Space[Any]:
    feature = r.space("space")
    stack = r.get("stack", False)
    if not isinstance(stack, bool):
        r.fail("boolean 'stack'", stack)
    return r.build(lambda: spaces.Sequence(feature, stack=stack))


def _parse_graph(r: _Reader) -> spaces.Space[Any]:
    node = r.space("node_space")
    edge = None if r.get("edge_space") is None else r.space("edge_space")
    return r.build(lambda: spaces.Graph(node, edge))


def _parse_oneof(r: _Reader) -> spaces.Space[Any]:
    subs = r.get("spaces")
    if not isinstance(subs, list) or not subs:
        r.fail("'spaces' as a non-empty list of space descriptions", subs)
    parts = [_parse(sub, f"{r.path}.spaces[{i}]".lstrip(".")) for i, sub in enumerate(subs)]
    return r.build(lambda: spaces.OneOf(parts))


_PARSERS: dict[str, Callable[[_Reader], spaces.Space[Any]]] = {
    "Box": _parse_box,
    "Discrete": _parse_discrete,
    "MultiBinary": _parse_multibinary,
    "MultiDiscrete": _parse_multidiscrete,
    "Tuple": _parse_tuple,
    "Dict": _parse_dict,
    "Text": _parse_text,
    "Sequence": _parse_sequence,
    "Graph": _parse_graph,
    "OneOf": _parse_oneof,
}


# --------------------------------------------------------------------------------------------
# samples <-> JSON


def to_json(space: spaces.Space[Any], sample: Any, *, arrays: Arrays = "list") -> Any:
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


def from_json(space: spaces.Space[Any], value: Any) -> Any:
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
    """
    try:
        return _decode(space, value, "")
    except RecursionError:
        raise InvalidArgumentError("value is nested too deeply") from None


def _bad(path: str, expected: str, value: Any) -> NoReturn:
    raise InvalidArgumentError(f"expected {expected}, got {_show(value)}{_at(path)}")


def _is_array_space(space: spaces.Space[Any]) -> bool:
    return isinstance(space, _ARRAY_SPACES)


def _leaf(space: spaces.Space[Any]) -> tuple[np.dtype[Any], tuple[int, ...]]:
    """dtype and shape of an array-valued space (Box, Discrete, MultiBinary, MultiDiscrete)."""
    assert space.dtype is not None
    assert space.shape is not None
    return space.dtype, space.shape


def _encode_array(x: Any, dtype: np.dtype[Any] | None, b64: bool, path: str) -> Any:
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
        return arr.tolist()
    try:
        packed = tensor.encode(arr)
    except ProtocolError as exc:
        raise InvalidArgumentError(f"{exc}{_at(path)}") from None
    return {
        "__ndarray__": base64.b64encode(packed.data).decode("ascii"),
        "dtype": packed.dtype.name,
        "shape": list(packed.shape),
    }


def _encode_batch(space: spaces.Space[Any], x: Any, b64: bool, path: str) -> Any:
    """A batch of samples (stacked Sequence, Graph nodes/edges) as one array or a list."""
    if _is_array_space(space):
        return _encode_array(x, space.dtype, b64, path)
    return [_encode(space, item, b64, f"{path}[{i}]") for i, item in enumerate(_unstack(space, x))]


@functools.singledispatch
def _encode(space: spaces.Space[Any], x: Any, b64: bool, path: str) -> Any:
    raise ConfigError(f"cannot encode samples of a {type(space).__name__} space")


@_encode.register(spaces.Box)
@_encode.register(spaces.MultiBinary)
@_encode.register(spaces.MultiDiscrete)
def _encode_arrayspace(space: spaces.Space[Any], x: Any, b64: bool, path: str) -> Any:
    return _encode_array(x, space.dtype, b64, path)


@_encode.register(spaces.Discrete)
def _encode_discrete(space: spaces.Discrete[Any], x: Any, b64: bool, path: str) -> Any:
    if isinstance(x, np.ndarray) and x.shape == () and x.dtype.kind in "iu":
        return int(x)
    if not isinstance(x, int | np.integer):
        _bad(path, f"an integer for {space}", x)
    return int(x)


@_encode.register(spaces.Tuple)
def _encode_tuple(space: spaces.Tuple[Any], x: Any, b64: bool, path: str) -> Any:
    if not isinstance(x, tuple | list) or len(x) != len(space.spaces):
        _bad(path, f"a tuple of {len(space.spaces)} elements", x)
    return [_encode(sub, part, b64, f"{path}[{i}]") for i, (sub, part) in _pairs(space, x)]


@_encode.register(spaces.Dict)
def _encode_dict(space: spaces.Dict, x: Any, b64: bool, path: str) -> Any:
    _check_keys(space, x, path)
    return {k: _encode(sub, x[k], b64, f"{path}[{k!r}]") for k, sub in space.spaces.items()}


@_encode.register(spaces.Text)
def _encode_text(space: spaces.Text, x: Any, b64: bool, path: str) -> Any:
    if not isinstance(x, str):
        _bad(path, "a string", x)
    return x


@_encode.register(spaces.Sequence)
def _encode_sequence(space: spaces.Sequence, x: Any, b64: bool, path: str) -> Any:
    if space.stack:
        return _encode_batch(space.feature_space, x, b64, path)
    if not isinstance(x, tuple | list):
        _bad(path, "a tuple of elements", x)
    return [_encode(space.feature_space, item, b64, f"{path}[{i}]") for i, item in enumerate(x)]


@_encode.register(spaces.Graph)
def _encode_graph(space: spaces.Graph, x: Any, b64: bool, path: str) -> Any:
    if not isinstance(x, tuple) or len(x) != 3:
        _bad(path, "a GraphInstance(nodes, edges, edge_links)", x)
    nodes, edges, links = x
    if (edges is None) != (links is None) or (edges is not None and space.edge_space is None):
        _bad(path, "edges and edge_links both set (with an edge space) or both None", x)
    out: dict[str, Any] = {"nodes": _encode_batch(space.node_space, nodes, b64, f"{path}.nodes")}
    if space.edge_space is not None and edges is not None:
        out["edges"] = _encode_batch(space.edge_space, edges, b64, f"{path}.edges")
        out["edge_links"] = _encode_array(links, None, b64, f"{path}.edge_links")
    else:
        out["edges"] = out["edge_links"] = None
    return out


@_encode.register(spaces.OneOf)
def _encode_oneof(space: spaces.OneOf[Any], x: Any, b64: bool, path: str) -> Any:
    if not (isinstance(x, tuple | list) and len(x) == 2 and isinstance(x[0], int | np.integer)):
        _bad(path, "an (index, sample) pair", x)
    index = int(x[0])
    if not 0 <= index < len(space.spaces):
        _bad(path, f"an index in [0, {len(space.spaces)})", index)
    return [index, _encode(space.spaces[index], x[1], b64, f"{path}[1]")]


def _pairs(space: spaces.Tuple[Any], x: Any) -> Iterable[tuple[int, tuple[spaces.Space[Any], Any]]]:
    return enumerate(zip(space.spaces, x, strict=True))


def _check_keys(space: spaces.Dict, x: Any, path: str) -> None:
    if not isinstance(x, Mapping):
        _bad(path, f"an object with keys {list(space.spaces)}", x)
    if x.keys() != space.spaces.keys():
        missing = [k for k in space.spaces if k not in x]
        extra = [k for k in x if k not in space.spaces]
        raise InvalidArgumentError(
            _cap(f"expected keys {list(space.spaces)}, missing {missing}, unexpected {extra}")
            + _at(path)
        )


@functools.singledispatch
def _unstack(space: spaces.Space[Any], batch: Any) -> list[Any]:
    """Split a batch (as Gymnasium stacks samples) into its samples."""
    if not isinstance(batch, tuple | list):
        raise InvalidArgumentError(f"expected a tuple of samples, got {_show(batch)}")
    return list(batch)


@_unstack.register(spaces.Box)
@_unstack.register(spaces.Discrete)
@_unstack.register(spaces.MultiBinary)
@_unstack.register(spaces.MultiDiscrete)
def _unstack_array(space: spaces.Space[Any], batch: Any) -> list[Any]:
    if isinstance(batch, list | tuple):
        return list(batch)
    try:
        arr = np.asarray(batch)
    except (ValueError, TypeError):
        arr = np.asarray(None)
    if arr.ndim == 0:
        raise InvalidArgumentError(f"expected a stacked array, got {_show(batch)}")
    return list(arr)


@_unstack.register(spaces.Tuple)
def _unstack_tuple(space: spaces.Tuple[Any], batch: Any) -> list[Any]:
    if not isinstance(batch, tuple | list) or len(batch) != len(space.spaces):
        raise InvalidArgumentError(f"expected a tuple of {len(space.spaces)} stacked parts")
    columns = [_unstack(sub, part) for sub, part in zip(space.spaces, batch, strict=True)]
    if len({len(c) for c in columns}) > 1:
        raise InvalidArgumentError("stacked tuple parts have different lengths")
    return list(zip(*columns, strict=True))


@_unstack.register(spaces.Dict)
def _unstack_dict(space: spaces.Dict, batch: Any) -> list[Any]:
    _check_keys(space, batch, "")
    columns = [_unstack(sub, batch[k]) for k, sub in space.spaces.items()]
    if len({len(c) for c in columns}) > 1:
        raise InvalidArgumentError("stacked dict parts have different lengths")
    return [dict(zip(space.spaces, row, strict=True)) for row in zip(*columns, strict=True)]


@functools.singledispatch
def _stack(space: spaces.Space[Any], items: list[Any]) -> Any:
    """Stack samples the way Gymnasium's ``concatenate`` does (so types match its samples)."""
    return tuple(items)


@_stack.register(spaces.Box)
@_stack.register(spaces.Discrete)
@_stack.register(spaces.MultiBinary)
@_stack.register(spaces.MultiDiscrete)
def _stack_array(space: spaces.Space[Any], items: list[Any]) -> Any:
    out = np.zeros((len(items), *(space.shape or ())), dtype=space.dtype)
    for i, item in enumerate(items):
        out[i] = item
    return out


@_stack.register(spaces.Tuple)
def _stack_tuple(space: spaces.Tuple[Any], items: list[Any]) -> Any:
    return tuple(_stack(sub, [item[i] for item in items]) for i, sub in enumerate(space.spaces))


@_stack.register(spaces.Dict)
def _stack_dict(space: spaces.Dict, items: list[Any]) -> Any:
    return {k: _stack(sub, [item[k] for item in items]) for k, sub in space.spaces.items()}


# --- decoding


def _to_array(value: Any, path: str) -> _Array:
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


def _from_base64(value: Mapping[Any, Any], path: str) -> _Array:
    data, name, shape = value.get("__ndarray__"), value.get("dtype"), value.get("shape")
    if not (isinstance(data, str) and isinstance(name, str) and isinstance(shape, list)):
        _bad(path, 'an {"__ndarray__": base64, "dtype": name, "shape": [...]} object', value)
    if len(shape) > 32 or not all(_is_dim(n) for n in shape):
        _bad(path, "'shape' as a list of non-negative integers", shape)
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError:
        _bad(path, "valid base64 in '__ndarray__'", data)
    try:
        return tensor.decode(tensor.Tensor(tensor.dtype_by_name(name), tuple(shape), raw))
    except ProtocolError as exc:
        raise InvalidArgumentError(f"{exc}{_at(path)}") from None


def _narrow_float(arr: _Array, dtype: np.dtype[Any]) -> _Array | None:
    """``arr`` as the float ``dtype``; None if a finite value overflows it."""
    with np.errstate(all="ignore"):
        out = arr.astype(dtype)
    if np.isinf(out).any() and (np.isinf(out) & np.isfinite(arr)).any():
        return None
    return out


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
    value: Any, dtype: np.dtype[Any], shape: tuple[int, ...], path: str, *, batch: bool = False
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


def _decode_int(value: Any, dtype: np.dtype[Any], path: str) -> Any:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int | np.integer) or isinstance(value, bool):
        _bad(path, f"an integer ({dtype.name})", value)
    lo, hi = _int_limits(dtype)
    if not lo <= int(value) <= hi:
        _bad(path, f"an integer within {dtype.name} [{lo}, {hi}]", value)
    return dtype.type(value)


def _decode_batch(space: spaces.Space[Any], value: Any, path: str) -> Any:
    if _is_array_space(space):
        return _decode_array(value, *_leaf(space), path, batch=True)
    if not isinstance(value, list | tuple):
        _bad(path, "a list of samples", value)
    return _stack(space, [_decode(space, item, f"{path}[{i}]") for i, item in enumerate(value)])


@functools.singledispatch
def _decode(space: spaces.Space[Any], value: Any, path: str) -> Any:
    raise ConfigError(f"cannot decode samples of a {type(space).__name__} space")


@_decode.register(spaces.Box)
@_decode.register(spaces.MultiBinary)
@_decode.register(spaces.MultiDiscrete)
def _decode_arrayspace(space: spaces.Space[Any], value: Any, path: str) -> Any:
    return _decode_array(value, *_leaf(space), path)


@_decode.register(spaces.Discrete)
def _decode_discrete(space: spaces.Discrete[Any], value: Any, path: str) -> Any:
    return _decode_int(value, space.dtype, path)


@_decode.register(spaces.Tuple)
def _decode_tuple(space: spaces.Tuple[Any], value: Any, path: str) -> Any:
    if not isinstance(value, list | tuple) or len(value) != len(space.spaces):
        _bad(path, f"a list of {len(space.spaces)} elements", value)
    return tuple(_decode(sub, part, f"{path}[{i}]") for i, (sub, part) in _pairs(space, value))


@_decode.register(spaces.Dict)
def _decode_dict(space: spaces.Dict, value: Any, path: str) -> Any:
    _check_keys(space, value, path)
    return {k: _decode(sub, value[k], f"{path}[{k!r}]") for k, sub in space.spaces.items()}


@_decode.register(spaces.Text)
def _decode_text(space: spaces.Text, value: Any, path: str) -> Any:
    if not isinstance(value, str):
        _bad(path, "a string", value)
    return value


@_decode.register(spaces.Sequence)
def _decode_sequence(space: spaces.Sequence, value: Any, path: str) -> Any:
    if space.stack:
        return _decode_batch(space.feature_space, value, path)
    if not isinstance(value, list | tuple):
        _bad(path, "a list of elements", value)
    return tuple(_decode(space.feature_space, v, f"{path}[{i}]") for i, v in enumerate(value))


_GRAPH_KEYS = frozenset({"nodes", "edges", "edge_links"})


@_decode.register(spaces.Graph)
def _decode_graph(space: spaces.Graph, value: Any, path: str) -> Any:
    if not isinstance(value, Mapping) or "nodes" not in value or value.keys() - _GRAPH_KEYS:
        _bad(path, 'an object {"nodes", "edges", "edge_links"}', value)
    nodes = _decode_batch(space.node_space, value["nodes"], f"{path}.nodes")
    edges, links = value.get("edges"), value.get("edge_links")
    if edges is None and links is None:
        return spaces.GraphInstance(nodes, None, None)
    if edges is None or links is None or space.edge_space is None:
        _bad(path, "'edges' and 'edge_links' both given (with an edge space) or both null", value)
    edge_values = _decode_batch(space.edge_space, edges, f"{path}.edges")
    # Graph.sample gives int32 links; a base64 array keeps whatever integer dtype it has.
    raw = _to_array(links, f"{path}.edge_links")
    link_array = _cast(
        raw,
        raw.dtype if raw.dtype.kind in "iu" and isinstance(links, Mapping) else np.dtype(np.int32),
        f"{path}.edge_links",
    )
    if link_array.shape == (0,):
        link_array = link_array.reshape((0, 2))
    if link_array.ndim != 2 or link_array.shape[1] != 2:
        _bad(f"{path}.edge_links", "an array of shape (m, 2)", _Said(f"shape {link_array.shape}"))
    return spaces.GraphInstance(nodes, edge_values, link_array)


@_decode.register(spaces.OneOf)
def _decode_oneof(space: spaces.OneOf[Any], value: Any, path: str) -> Any:
    if not isinstance(value, list | tuple) or len(value) != 2:
        _bad(path, "an [index, sample] pair", value)
    index = int(_decode_int(value[0], np.dtype(np.int64), f"{path}[0]"))
    if not 0 <= index < len(space.spaces):
        _bad(f"{path}[0]", f"an index in [0, {len(space.spaces)})", index)
    return np.int64(index), _decode(space.spaces[index], value[1], f"{path}[1]")


# --------------------------------------------------------------------------------------------
# check


def check(space: spaces.Space[Any], value: Any, *, what: str = "action") -> None:
    """Raise unless ``value in space``, saying what is wrong.

    Membership follows Gymnasium's ``contains`` (without its "Casting input x to numpy array"
    warning). Discrete and Box are checked without building any text on success.

    Args:
        space: the space.
        value: the candidate (usually from :func:`from_json`).
        what: how the message names the value ("action", "observation", ...).

    Raises:
        InvalidActionError: ``value`` is not in ``space``, e.g. "action 5 is not in Discrete(2)",
            "action has shape (3,), expected (2,) for Box(...)", "action 2.5 is outside [-1, 1]
            at index 0". Messages are capped at about 300 characters.
    """
    problem = _problem(space, value, what)
    if problem is not None:
        raise InvalidActionError(_cap(problem))


def _not_in(space: spaces.Space[Any], value: Any, what: str) -> str:
    return f"{what} {_show(value)} is not in {_space_repr(space)}"


@functools.singledispatch
def _problem(space: spaces.Space[Any], value: Any, what: str) -> str | None:
    try:
        inside = bool(space.contains(value))
    except (TypeError, ValueError, AttributeError, IndexError, KeyError, AssertionError):
        inside = False
    return None if inside else _not_in(space, value, what)


@_problem.register(spaces.Discrete)
def _problem_discrete(space: spaces.Discrete[Any], value: Any, what: str) -> str | None:
    # Fast accept for what from_json produces; everything else goes through contains().
    if type(value) is space.dtype.type or type(value) is int:
        start = int(space.start)
        if start <= value < start + int(space.n):
            lo, hi = _int_limits(space.dtype)
            if lo <= value <= hi:
                return None
    if space.contains(value):
        return None
    return _not_in(space, value, what)


def _num(x: Any) -> str:
    text = str(x)
    return text[:-2] if text.endswith(".0") else text


@_problem.register(spaces.Box)
def _problem_box(space: spaces.Box[Any], value: Any, what: str) -> str | None:
    arr = value
    if not isinstance(arr, np.ndarray):
        try:
            with np.errstate(all="ignore"):
                arr = np.asarray(value, dtype=space.dtype)
        except (ValueError, TypeError, OverflowError):
            return (
                f"{what} {_show(value)} is not an array of {space.dtype} for {_space_repr(space)}"
            )
    if arr.shape != space.shape:
        return f"{what} has shape {arr.shape}, expected {space.shape} for {_space_repr(space)}"
    if not np.can_cast(arr.dtype, space.dtype):
        return (
            f"{what} has dtype {arr.dtype}, which does not cast safely to {space.dtype} "
            f"for {_space_repr(space)}"
        )
    inside = (arr >= space.low) & (arr <= space.high)
    if inside.all():
        return None
    index = tuple(int(i) for i in np.unravel_index(int(np.argmin(inside)), arr.shape))
    where = "" if not index else f" at index {index[0] if len(index) == 1 else index}"
    low, high = _num(space.low[index]), _num(space.high[index])
    return f"{what} {_num(arr[index])} is outside [{low}, {high}]{where}"


@_problem.register(spaces.Tuple)
def _problem_tuple(space: spaces.Tuple[Any], value: Any, what: str) -> str | None:
    if isinstance(value, list | np.ndarray):
        value = tuple(value)
    if not isinstance(value, tuple) or len(value) != len(space.spaces):
        return f"{what} {_show(value)} is not a tuple of {len(space.spaces)} elements"
    for i, (sub, part) in _pairs(space, value):
        problem = _problem(sub, part, f"{what}[{i}]")
        if problem is not None:
            return problem
    return None


@_problem.register(spaces.Dict)
def _problem_dict(space: spaces.Dict, value: Any, what: str) -> str | None:
    if not isinstance(value, dict) or value.keys() != space.spaces.keys():
        return f"{what} {_show(value)} is not a dict with keys {list(space.spaces)}"
    for key, sub in space.spaces.items():
        problem = _problem(sub, value[key], f"{what}[{key!r}]")
        if problem is not None:
            return problem
    return None


@_problem.register(spaces.Sequence)
def _problem_sequence(space: spaces.Sequence, value: Any, what: str) -> str | None:
    # Gymnasium iterates the (stacked) value and checks each element against the feature.
    if space.stack:
        try:
            items = _unstack(space.feature_space, value)
        except InvalidArgumentError:
            return f"{what} {_show(value)} is not a stack of {_space_repr(space.feature_space)}"
    elif isinstance(value, tuple):
        items = list(value)
    else:
        return f"{what} {_show(value)} is not a tuple"
    for i, item in enumerate(items):
        problem = _problem(space.feature_space, item, f"{what}[{i}]")
        if problem is not None:
            return problem
    return None


@_problem.register(spaces.OneOf)
def _problem_oneof(space: spaces.OneOf[Any], value: Any, what: str) -> str | None:
    count = len(space.spaces)
    if not (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], int | np.int64)
        and 0 <= value[0] < count
    ):
        return f"{what} {_show(value)} is not an (index in [0, {count}), sample) pair"
    return _problem(space.spaces[value[0]], value[1], f"{what}[1]")


def is_uint8_array_space(space: spaces.Space[Any]) -> bool:
    """True for a Box of dtype uint8 (gym-socket sends its samples as a raw byte list)."""
    return isinstance(space, spaces.Box) and space.dtype == np.uint8
