"""JSON data for OpenEnv's messages and bodies: free values made JSON (:func:`jsonable`) and
pydantic validation errors as FastAPI ``detail`` lists (:func:`validation_detail`)."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

import numpy as np
from pydantic import BaseModel, ValidationError

from envwire import tensor
from envwire.errors import ProtocolError
from envwire.jsonio import JsonObject, JsonValue

__all__ = ["jsonable", "sanitized", "validation_detail"]


# A mapping given at the top (depth 0) becomes an object; deeper than 32 levels, repr() takes over.
@overload
def jsonable(
    value: Mapping[Any, object], arrays: Literal["list", "base64"] = ..., depth: Literal[0] = ...
) -> JsonObject: ...
@overload
def jsonable(
    value: object, arrays: Literal["list", "base64"] = ..., depth: int = ...
) -> JsonValue: ...
def jsonable(
    value: object, arrays: Literal["list", "base64"] = "base64", depth: int = 0
) -> JsonValue:
    """``value`` as JSON data: numpy scalars become numbers, arrays follow ``arrays`` (the
    ``__ndarray__`` form of :mod:`envwire.spacecodec` for "base64"), tuples become lists,
    anything else unknown becomes its ``repr``. Used for ``info`` dicts, whose types are free.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value
    if depth > 32:
        return repr(value)
    if isinstance(value, np.generic):
        if isinstance(value, np.void):
            return repr(value)
        scalar: JsonValue = value.item()  # a bool, int, float or str (a complex is no JSON)
        return scalar
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            return [jsonable(v, arrays, depth + 1) for v in value.tolist()]
        if arrays == "list":
            nested: JsonValue = value.tolist()  # nested lists of bools, ints and floats
            return nested
        try:
            packed = tensor.encode(value)
        except ProtocolError:
            nested = value.tolist()
            return nested
        return {
            "__ndarray__": base64.b64encode(packed.data).decode("ascii"),
            "dtype": packed.dtype.name,
            "shape": list(packed.shape),
        }
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, arrays, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v, arrays, depth + 1) for v in value]
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return repr(value)


def sanitized(errors: Sequence[object]) -> list[dict[str, Any]]:
    """Validation error entries made JSON-safe (``ctx`` may hold exception objects)."""
    out: list[dict[str, Any]] = json.loads(json.dumps(errors, default=str))
    return out


def validation_detail(
    exc: ValidationError, prefix: tuple[str | int, ...] = (), *, include_url: bool = True
) -> list[dict[str, Any]]:
    """A pydantic error as a FastAPI ``detail`` list, ``loc`` prefixed with ``prefix``."""
    errors = exc.errors(include_url=include_url)
    for error in errors:
        error["loc"] = (*prefix, *error["loc"])
    return sanitized(list(errors))
