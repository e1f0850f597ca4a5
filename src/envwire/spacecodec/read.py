"""Spaces from JSON descriptions: :func:`from_description`, for both description styles."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final, NamedTuple, NoReturn, TypeGuard, TypeVar

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from envwire import tensor
from envwire.errors import ProtocolError
from envwire.jsonio import JsonValue
from envwire.spacecodec._common import (
    _Array,
    _at,
    _cap,
    _int_limits,
    _is_int,
    _is_shape,
    _narrow_float,
    _Said,
    _show,
)

__all__ = ["from_description"]

_MAX_ELEMENTS = 1 << 26  # largest Box/MultiBinary/MultiDiscrete a description may ask for


def from_description(desc: JsonValue) -> spaces.Space[Any]:
    """Build the space a description describes (either style).

    Args:
        desc: a decoded JSON object from :func:`describe` (or a gym-socket server); any other
            JSON value is refused with a :class:`ProtocolError`. Legacy forms:
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


class _Missing(Enum):
    """The mark of a field a description does not have (None is JSON's null)."""

    MISSING = "missing"


_MISSING: Final = _Missing.MISSING

_Field = JsonValue | _Missing
_S = TypeVar("_S", bound=spaces.Space[Any])


class _Bound(NamedTuple):
    """A Box bound as read from a description: values, and where the bound is infinite."""

    values: _Array
    free: npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class _Reader:
    """Reads the fields of one description and reports what is wrong with them."""

    desc: Mapping[str, JsonValue]
    kind: str
    path: str

    def fail(self, expected: str, got: object) -> NoReturn:
        shown = "nothing" if got is _MISSING else _show(got)
        raise ProtocolError(
            f"{self.kind} description needs {expected}, got {shown}{_at(self.path)}"
        )

    def get(self, key: str, default: _Field = _MISSING) -> _Field:
        return self.desc.get(key, default)

    def int_(self, key: str, minimum: int | None, default: _Field = _MISSING) -> int:
        value = self.get(key, default)
        if not _is_int(value) or (minimum is not None and value < minimum):
            bound = "" if minimum is None else " > 0" if minimum == 1 else f" >= {minimum}"
            self.fail(f"integer {key!r}{bound}", value)
        return int(value)

    def dtype(self, kinds: str, default: str) -> np.dtype[Any]:
        name = self.get("dtype", default)
        names = [d.name for d in tensor.DTYPES if d.numpy.kind in kinds]
        if not isinstance(name, str) or name not in names:
            self.fail(f"'dtype' one of {', '.join(names)}", name)
        return tensor.dtype_by_name(name).numpy.newbyteorder("=")

    def ints(self, key: str, default: _Field = _MISSING) -> tuple[list[int], tuple[int, ...]]:
        """An integer or a rectangular nested list of integers: (flat values, shape)."""
        value = self.get(key, default)
        leaves, shape = _nested(value)
        if shape is None or not _all_ints(leaves):
            self.fail(f"{key!r} as an integer or a nested list of integers", value)
        if math.prod(shape) > _MAX_ELEMENTS:
            self.fail(f"{key!r} with at most {_MAX_ELEMENTS} elements", math.prod(shape))
        return leaves, shape

    def int_array(
        self, key: str, leaves: list[int], shape: tuple[int, ...], dtype: np.dtype[Any]
    ) -> _Array:
        lo, hi = _int_limits(dtype)
        if leaves and (min(leaves) < lo or max(leaves) > hi):
            self.fail(f"{key!r} values within {dtype.name} [{lo}, {hi}]", leaves)
        return np.array(leaves, dtype=dtype).reshape(shape)

    def space(self, key: str) -> spaces.Space[Any]:
        value = self.get(key)
        if not isinstance(value, Mapping):
            self.fail(f"{key!r} as a space description object", value)
        return _parse(value, f"{self.path}.{key}" if self.path else key)

    def build(self, factory: Callable[[], _S]) -> _S:
        try:
            return factory()
        except (ValueError, TypeError, OverflowError, AssertionError) as exc:
            raise ProtocolError(
                f"{self.kind} description is not a valid space: {_cap(str(exc), 160)}"
                f"{_at(self.path)}"
            ) from None


def _nested(value: object) -> tuple[list[object], tuple[int, ...] | None]:
    """Leaves and shape of a scalar or a rectangular nested list; shape None if ragged."""
    if not isinstance(value, list | tuple):
        return [value], ()
    shape: list[int] = []
    level: list[object] = [value]
    while level and _all_rows(level):
        width = len(level[0])
        if any(len(item) != width for item in level) or len(shape) >= 32:
            return [], None
        shape.append(width)
        level = [leaf for item in level for leaf in item]
    if any(isinstance(item, list | tuple) for item in level):
        return [], None
    return level, tuple(shape)


def _all_rows(items: list[object]) -> TypeGuard[list[list[object] | tuple[object, ...]]]:
    return all(isinstance(item, list | tuple) for item in items)


def _all_ints(items: list[object]) -> TypeGuard[list[int]]:
    return all(_is_int(item) for item in items)


def _parse(desc: JsonValue, path: str) -> spaces.Space[Any]:
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
        if not _all_float_leaves(leaves):
            r.fail(f"{key!r} of numbers, 'inf' or '-inf'", raw)
        values = _narrow_float(np.array([float(v) for v in leaves]), dtype)
        if values is None:
            r.fail(f"{key!r} within the {dtype.name} range", raw)
        free = np.isinf(values)
    else:
        # Gymnasium allows infinite bounds on signed-int Boxes only.
        word = infinity if dtype.kind == "i" else None
        if not _all_int_leaves(leaves, word, dtype):
            r.fail(f"{key!r} of integers{f' or {word!r}' if word else ''} for {dtype.name}", raw)
        lo, hi = _int_limits(dtype)
        limit = lo if key == "low" else hi
        ints = [int(v) if isinstance(v, int) else limit for v in leaves]  # else: v is word
        if ints and (min(ints) < lo or max(ints) > hi):
            r.fail(f"{key!r} within {dtype.name} [{lo}, {hi}]", raw)
        values = np.array(ints, dtype=dtype)
        free = np.array([v == word for v in leaves], dtype=bool)
    if got == ():
        return _Bound(np.full(shape, values[0], dtype=dtype), np.full(shape, bool(free[0])))
    return _Bound(values.reshape(shape), free.reshape(shape))


def _all_float_leaves(leaves: list[object]) -> TypeGuard[list[float | str]]:
    """Every leaf a float bound: a number or ``"inf"`` / ``"-inf"``."""
    return all(_is_float_leaf(v) for v in leaves)


def _all_int_leaves(
    leaves: list[object], word: str | None, dtype: np.dtype[Any]
) -> TypeGuard[list[int | str | None]]:
    """Every leaf an integer bound: an int (a bool for a bool dtype), or ``word`` (infinity;
    None for a dtype without one, which a null leaf then equals)."""
    return all(v == word or _is_int(v) or _is_bool_leaf(v, dtype) for v in leaves)


def _is_bool_leaf(value: object, dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "b" and isinstance(value, bool)


def _is_float_leaf(value: object) -> bool:
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
    if not _is_shape(raw):
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
        box.bounded_below = ~low.free
        box.bounded_above = ~high.free
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
    if not (_is_shape(n) and all(k > 0 for k in n)):
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
