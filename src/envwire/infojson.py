"""Info dicts as JSON: plain for peers that expect plain JSON, typed for envwire's clients.

Plain: numpy scalars become numbers and arrays nested lists (what gym-socket's seed clients
read). Typed: arrays travel as ``{"__ndarray__": <base64 of C-order little-endian bytes>,
"dtype": "float32", "shape": [...]}`` (object arrays as ``{"__ndarray__": [items...], "dtype":
"object", "shape": [...]}``) and numpy scalars as ``{"__npscalar__": 3, "dtype": "int64"}``, so
Gymnasium's vector infos, with their boolean ``_key`` masks and
``final_obs`` object arrays, come back as the same arrays.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

from envwire import safejson

__all__ = ["dumps", "loads", "plain_default", "typed_default"]


def plain_default(value: Any) -> Any:
    """``json.dumps`` hook for plain JSON."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return _other(value)


def typed_default(value: Any) -> Any:
    """``json.dumps`` hook that keeps arrays' dtype and shape, and numpy scalars' type."""
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return {"__npscalar__": value.item(), "dtype": value.dtype.name}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        shape = list(value.shape)
        if value.dtype.kind in "biuf":
            data = np.ascontiguousarray(value, value.dtype.newbyteorder("<")).tobytes()
            encoded = base64.b64encode(data).decode("ascii")
            return {"__ndarray__": encoded, "dtype": value.dtype.name, "shape": shape}
        return {"__ndarray__": value.ravel().tolist(), "dtype": "object", "shape": shape}
    return _other(value)


def _other(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return repr(value)


def dumps(info: dict[str, Any], *, typed: bool) -> bytes:
    """Compact JSON of ``info`` (``b"{}"`` when empty)."""
    if not info:
        return b"{}"
    hook = typed_default if typed else plain_default
    return json.dumps(info, separators=(",", ":"), default=hook).encode()


def _hook(obj: dict[str, Any]) -> Any:
    if "__npscalar__" in obj and set(obj) == {"__npscalar__", "dtype"}:
        return np.dtype(obj["dtype"]).type(obj["__npscalar__"])
    if "__ndarray__" not in obj or set(obj) != {"__ndarray__", "dtype", "shape"}:
        return obj
    shape = tuple(obj["shape"])
    if obj["dtype"] == "object":
        items = obj["__ndarray__"]
        array = np.empty(len(items), dtype=object)
        for i, item in enumerate(items):
            array[i] = item
        return array.reshape(shape)
    dtype = np.dtype(obj["dtype"]).newbyteorder("<")
    data = base64.b64decode(obj["__ndarray__"])
    return np.frombuffer(data, dtype).reshape(shape).astype(dtype.newbyteorder("="))


def loads(raw: bytes | str) -> dict[str, Any]:
    """The inverse of :func:`dumps` (typed arrays come back as arrays)."""
    if raw in (b"{}", "{}"):
        return {}
    value = safejson.loads(raw, object_hook=_hook)
    return value if isinstance(value, dict) else {"info": value}
