"""Spaces as JSON descriptions: :func:`describe`, in the exact ``"envwire"`` style or the legacy
``"gym-socket"`` style (read back by :func:`~envwire.spacecodec.from_description`)."""

from __future__ import annotations

import functools
import math
from typing import Any, Literal

import numpy as np
from gymnasium import spaces

from envwire import tensor
from envwire.errors import ConfigError, InvalidArgumentError, ProtocolError
from envwire.spacecodec._common import _Array, _space_repr
from envwire.spacecodec.read import _PARSERS

__all__ = ["Style", "describe"]

Style = Literal["envwire", "gym-socket"]
"""The description styles of :func:`describe`."""

_LEGACY_BOUND = 1e30  # gym-socket's stand-in for infinity (JSON has none)

#: One bound value as a description writes it: the number, or "inf" / "-inf".
_BoundItem = int | float | str


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


def _bound_item(value: int | float, bounded: bool, kind: str, infinity: str) -> _BoundItem:
    if kind == "f":
        return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    # Signed-int Boxes store an infinite bound as the dtype's limit and remember it in
    # bounded_below/above (sampling differs), so the flag, not the value, decides.
    return value if bounded else infinity


def _bound(values: _Array, bounded: _Array, infinity: str) -> _BoundItem | list[_BoundItem]:
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
