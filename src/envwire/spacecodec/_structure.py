"""Sample structure, shared by :mod:`~envwire.spacecodec.samples` and
:mod:`~envwire.spacecodec.checks`: Tuple pairs, Dict keys, and batches split and stacked the
way Gymnasium stacks samples."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn, TypeVar

import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from envwire.errors import InvalidArgumentError
from envwire.spacecodec._common import _at, _cap, _show

__all__ = ["_bad", "_check_keys", "_pairs", "_stack", "_unstack"]

_T = TypeVar("_T")


def _bad(path: str, expected: str, value: object) -> NoReturn:
    raise InvalidArgumentError(f"expected {expected}, got {_show(value)}{_at(path)}")


def _pairs(
    space: spaces.Tuple[Any], x: Iterable[_T]
) -> Iterable[tuple[int, tuple[spaces.Space[Any], _T]]]:
    return enumerate(zip(space.spaces, x, strict=True))


def _check_keys(space: spaces.Dict, x: object, path: str) -> Mapping[str, object]:
    """``x`` when it is a mapping with exactly the keys of ``space``; InvalidArgumentError if
    not."""
    if not isinstance(x, Mapping):
        _bad(path, f"an object with keys {list(space.spaces)}", x)
    if x.keys() != space.spaces.keys():
        missing = [k for k in space.spaces if k not in x]
        extra = [k for k in x if k not in space.spaces]
        raise InvalidArgumentError(
            _cap(f"expected keys {list(space.spaces)}, missing {missing}, unexpected {extra}")
            + _at(path)
        )
    return x


# Samples are typed ``object``: which one a space has is known only by dispatching on it. An
# implementation registered for a space class takes the samples of that class.


@functools.singledispatch
def _unstack(space: spaces.Space[Any], batch: object) -> list[object]:
    """Split a batch (as Gymnasium stacks samples) into its samples."""
    if not isinstance(batch, tuple | list):
        raise InvalidArgumentError(f"expected a tuple of samples, got {_show(batch)}")
    return list(batch)


@_unstack.register(spaces.Box)
@_unstack.register(spaces.Discrete)
@_unstack.register(spaces.MultiBinary)
@_unstack.register(spaces.MultiDiscrete)
def _unstack_array(space: spaces.Space[Any], batch: object) -> list[object]:
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
def _unstack_tuple(space: spaces.Tuple[Any], batch: object) -> list[object]:
    if not isinstance(batch, tuple | list) or len(batch) != len(space.spaces):
        raise InvalidArgumentError(f"expected a tuple of {len(space.spaces)} stacked parts")
    columns = [_unstack(sub, part) for sub, part in zip(space.spaces, batch, strict=True)]
    if len({len(c) for c in columns}) > 1:
        raise InvalidArgumentError("stacked tuple parts have different lengths")
    return list(zip(*columns, strict=True))


@_unstack.register(spaces.Dict)
def _unstack_dict(space: spaces.Dict, batch: object) -> list[object]:
    parts = _check_keys(space, batch, "")
    columns = [_unstack(sub, parts[k]) for k, sub in space.spaces.items()]
    if len({len(c) for c in columns}) > 1:
        raise InvalidArgumentError("stacked dict parts have different lengths")
    return [dict(zip(space.spaces, row, strict=True)) for row in zip(*columns, strict=True)]


@functools.singledispatch
def _stack(space: spaces.Space[Any], items: list[object]) -> object:
    """Stack samples the way Gymnasium's ``concatenate`` does (so types match its samples)."""
    return tuple(items)


@_stack.register(spaces.Box)
@_stack.register(spaces.Discrete)
@_stack.register(spaces.MultiBinary)
@_stack.register(spaces.MultiDiscrete)
def _stack_array(space: spaces.Space[Any], items: list[object]) -> npt.NDArray[Any]:
    out = np.zeros((len(items), *(space.shape or ())), dtype=space.dtype)
    for i, item in enumerate(items):
        out[i] = item
    return out


@_stack.register(spaces.Tuple)
def _stack_tuple(space: spaces.Tuple[Any], items: list[tuple[object, ...]]) -> tuple[object, ...]:
    return tuple(_stack(sub, [item[i] for item in items]) for i, sub in enumerate(space.spaces))


@_stack.register(spaces.Dict)
def _stack_dict(space: spaces.Dict, items: list[Mapping[str, object]]) -> dict[str, object]:
    return {k: _stack(sub, [item[k] for item in items]) for k, sub in space.spaces.items()}
