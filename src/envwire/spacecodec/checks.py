"""Membership checks: :func:`check`, ``value in space`` with an error that says what is wrong."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces

from envwire.errors import InvalidActionError, InvalidArgumentError
from envwire.spacecodec._common import _cap, _int_limits, _show, _space_repr
from envwire.spacecodec._structure import _pairs, _unstack

__all__ = ["check", "checker"]


def check(space: spaces.Space[Any], value: object, *, what: str = "action") -> None:
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


def checker(space: spaces.Space[Any], *, what: str = "action") -> Callable[[object], None]:
    """:func:`check` for one space, with what can be worked out once done once: a session
    checks every action against the same space, so a ``Discrete`` space's bounds are settled
    here and the common value (an ``int`` or a scalar of the space's dtype) costs a type test
    and a range test.

    Returns:
        A callable that raises :class:`InvalidActionError` exactly when :func:`check` would.
    """
    if isinstance(space, spaces.MultiDiscrete):
        return _multi_discrete_checker(space, what)
    if not isinstance(space, spaces.Discrete):
        return functools.partial(check, space, what=what)
    lo, hi = _int_limits(space.dtype)
    start = int(space.start)
    low, high = max(start, lo), min(start + int(space.n) - 1, hi)
    scalar: type[np.integer[Any]] = space.dtype.type  # a Discrete's dtype is an integer

    def check_discrete(value: object) -> None:
        kind = type(value)  # a scalar compared as an int: numpy's own comparisons cost more
        if kind is int:
            if low <= value <= high:  # type: ignore[operator]
                return
        elif kind is scalar and low <= int(value) <= high:  # type: ignore[call-overload]
            return
        check(space, value, what=what)

    return check_discrete


def _multi_discrete_checker(space: spaces.MultiDiscrete, what: str) -> Callable[[object], None]:
    """A vector session's batched ``Discrete`` actions: one ``MultiDiscrete`` whose copies
    share their bounds. An array of the space's own shape and dtype (what the codecs decode)
    is accepted by its smallest and largest entry; anything else, and spaces with per-entry
    bounds, go through :func:`check`, so the verdict and the message are always ``check``'s."""
    fallback = functools.partial(check, space, what=what)
    low, high = space.start, space.start + (space.nvec - 1)
    if low.size == 0 or np.any(low != low.flat[0]) or np.any(high != high.flat[0]):
        return fallback
    # Plain ints: comparing an integer of any width with them never overflows.
    lo, hi = int(low.flat[0]), int(high.flat[0])
    shape, dtype = space.shape, space.dtype
    # Up to this many entries, Python's min and max over tolist() beat two numpy reductions
    # (each a ufunc call of a few microseconds); beyond it, the reductions win.
    few = 64
    smallest, largest = np.minimum.reduce, np.maximum.reduce
    # With few allowed values, one C call checks tolist()'s ints against the set of them,
    # where min() and max() each parse their keywords.
    allowed = frozenset(range(lo, hi + 1)) if hi - lo < 1024 else None

    def check_multi_discrete(value: object) -> None:
        if type(value) is np.ndarray and value.dtype == dtype and value.shape == shape:
            if value.size <= few:
                items = value.tolist() if value.ndim == 1 else value.ravel().tolist()
                if allowed is not None:
                    if allowed.issuperset(items):
                        return
                elif lo <= min(items) and max(items) <= hi:
                    return
            elif lo <= smallest(value, axis=None) and largest(value, axis=None) <= hi:
                return
        fallback(value)

    return check_multi_discrete


def _not_in(space: spaces.Space[Any], value: object, what: str) -> str:
    return f"{what} {_show(value)} is not in {_space_repr(space)}"


@functools.singledispatch
def _problem(space: spaces.Space[Any], value: object, what: str) -> str | None:
    try:
        inside = bool(space.contains(value))
    except (TypeError, ValueError, AttributeError, IndexError, KeyError, AssertionError):
        inside = False
    return None if inside else _not_in(space, value, what)


@_problem.register(spaces.Discrete)
def _problem_discrete(space: spaces.Discrete[Any], value: object, what: str) -> str | None:
    # Fast accept for what from_json produces; everything else goes through contains().
    scalar: type[np.integer[Any]] = space.dtype.type  # a Discrete's dtype is an integer
    if type(value) is scalar or type(value) is int:
        start = int(space.start)
        if start <= value < start + int(space.n):
            lo, hi = _int_limits(space.dtype)
            if lo <= value <= hi:
                return None
    if space.contains(value):
        return None
    return _not_in(space, value, what)


def _num(x: object) -> str:
    text = str(x)
    return text[:-2] if text.endswith(".0") else text


@_problem.register(spaces.Box)
def _problem_box(space: spaces.Box[Any], value: object, what: str) -> str | None:
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
def _problem_tuple(space: spaces.Tuple[Any], value: object, what: str) -> str | None:
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
def _problem_dict(space: spaces.Dict, value: object, what: str) -> str | None:
    if not isinstance(value, dict) or value.keys() != space.spaces.keys():
        return f"{what} {_show(value)} is not a dict with keys {list(space.spaces)}"
    for key, sub in space.spaces.items():
        problem = _problem(sub, value[key], f"{what}[{key!r}]")
        if problem is not None:
            return problem
    return None


@_problem.register(spaces.Sequence)
def _problem_sequence(space: spaces.Sequence, value: object, what: str) -> str | None:
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
def _problem_oneof(space: spaces.OneOf[Any], value: object, what: str) -> str | None:
    count = len(space.spaces)
    if not (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], int | np.int64)
        and 0 <= value[0] < count
    ):
        return f"{what} {_show(value)} is not an (index in [0, {count}), sample) pair"
    return _problem(space.spaces[value[0]], value[1], f"{what}[1]")
