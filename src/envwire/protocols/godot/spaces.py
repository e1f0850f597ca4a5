"""Space samples <-> their GymGodot wire form: flat JSON lists of numbers.

Spaces never travel in this protocol; both sides are configured with them. A Discrete sample
``a`` travels as ``[a]``; a Box, MultiDiscrete or MultiBinary sample as its values flattened in
C order. Godot 3's JSON makes every number a float, so decoding casts back with the space:
Discrete -> ``int``, the others -> an array of the space's shape and dtype, refusing
non-integral values for integer spaces. Nothing here does I/O.
"""

from __future__ import annotations

import math
from functools import singledispatch
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from envwire.errors import InvalidArgumentError, ProtocolError, UnsupportedError
from envwire.jsonio import JsonValue

__all__ = ["SUPPORTED_SPACES", "check_space", "from_wire", "to_wire"]

SUPPORTED_SPACES: tuple[type[spaces.Space[Any]], ...] = (
    spaces.Discrete,
    spaces.Box,
    spaces.MultiDiscrete,
    spaces.MultiBinary,
)


def check_space(space: object, role: str) -> None:
    """Refuse a space whose samples this protocol cannot carry.

    Args:
        space: the configured space.
        role: ``"action"`` or ``"observation"``, for the message.

    Raises:
        UnsupportedError: ``space`` is not one of :data:`SUPPORTED_SPACES`.
    """
    if not isinstance(space, SUPPORTED_SPACES):
        names = ", ".join(cls.__name__ for cls in SUPPORTED_SPACES)
        raise UnsupportedError(
            f"the godot protocol carries {names} spaces; {role} space is {space}"
        )


@singledispatch
def to_wire(space: spaces.Space[Any], sample: object) -> list[JsonValue]:
    """The wire form of ``sample``, a member of ``space``.

    Raises:
        UnsupportedError: the space is not supported (see :func:`check_space`).
        InvalidArgumentError: the sample cannot be cast to the space's dtype.
    """
    check_space(space, "the")
    raise AssertionError("unreachable")  # pragma: no cover


@to_wire.register
def _discrete_to_wire(space: spaces.Discrete, sample: Any) -> list[JsonValue]:
    # Any: whatever came is handed to int(), whose TypeError or ValueError is the check.
    try:
        return [int(sample)]
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{sample!r} is not an integer sample of {space}") from None


@to_wire.register(spaces.Box)
@to_wire.register(spaces.MultiDiscrete)
@to_wire.register(spaces.MultiBinary)
def _array_to_wire(space: spaces.Space[Any], sample: object) -> list[JsonValue]:
    try:
        flat = np.asarray(sample, dtype=space.dtype).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"{sample!r} is not a sample of {space}") from None
    values: list[JsonValue] = flat.tolist()  # numbers (bools for a MultiBinary)
    return values


@singledispatch
def from_wire(
    space: spaces.Space[Any], value: JsonValue, what: str = "observation"
) -> int | npt.NDArray[Any]:
    """The sample of ``space`` that ``value`` (a decoded JSON value) encodes.

    Args:
        space: the configured space.
        value: the wire form: a list of numbers (a bare number is accepted too).
        what: names the value in error messages (``"observation"``, ``"action"``).

    Raises:
        ProtocolError: not a list of numbers, the wrong number of values, or a non-integral
            value (or one its dtype cannot hold) for an integer space. Values are not checked
            against a Box's bounds: that is the space's membership, for the caller to judge.
        UnsupportedError: the space is not supported.
    """
    check_space(space, what)
    raise AssertionError("unreachable")  # pragma: no cover


@from_wire.register
def _discrete_from_wire(space: spaces.Discrete, value: object, what: str = "observation") -> int:
    flat = _numbers(value, 1, space, what)
    number = float(flat[0])
    if not (math.isfinite(number) and number.is_integer()):
        raise ProtocolError(f"{what} {value!r} is not an integer sample of {space}")
    return int(number)


@from_wire.register(spaces.Box)
@from_wire.register(spaces.MultiDiscrete)
@from_wire.register(spaces.MultiBinary)
def _array_from_wire(
    space: spaces.Space[Any], value: object, what: str = "observation"
) -> npt.NDArray[Any]:
    assert space.shape is not None
    assert space.dtype is not None
    flat = _numbers(value, math.prod(space.shape), space, what)
    if space.dtype.kind in "biu" and not np.all(np.isfinite(flat) & (flat == np.round(flat))):
        raise ProtocolError(f"{what} {value!r} has non-integral values for {space}")
    if space.dtype.kind in "iu":
        # The cast below would wrap such a value round (300 -> 44 in uint8) without a word.
        limits = np.iinfo(space.dtype)
        if flat.size and (flat.min() < limits.min or flat.max() > limits.max):
            raise ProtocolError(
                f"{what} {value!r} has values outside {space.dtype}'s range "
                f"[{limits.min}, {limits.max}] for {space}"
            )
    with np.errstate(over="ignore", invalid="ignore"):
        return flat.astype(space.dtype).reshape(space.shape)


def _numbers(value: object, size: int, space: spaces.Space[Any], what: str) -> npt.NDArray[Any]:
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):  # ragged nesting
        array = np.asarray([], dtype=object)
    if array.dtype.kind not in "biuf" or (array.size == 0 and size != 0):
        raise ProtocolError(f"{what} must be a list of numbers for {space}, got {value!r}")
    if array.size != size:
        raise ProtocolError(f"{what} {value!r} has {array.size} values; {space} needs {size}")
    return array.reshape(-1).astype(np.float64)
