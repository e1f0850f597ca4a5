"""JSON from and for peers: bounded on the way in, exact for arrays on the way out.

From the wire (every codec follows these two rules for text a peer sent):

- :func:`loads` refuses JSON nested deeper than :data:`MAX_DEPTH` levels. Python's own decoder
  only stops near the interpreter's recursion limit (about 1,000 levels, a 2 KB message), and
  what it returns below that still breaks whatever walks it recursively afterwards (pydantic,
  ``json.dumps`` of an error that quotes the input, the env). The refusal is a
  :class:`TooDeepError`, a :class:`json.JSONDecodeError` (and so a ``ValueError``) like every
  other malformed-JSON error, so the codecs' existing handlers answer it in each protocol's own
  error channel; a codec that answers it differently (OpenEnv's HTTP bodies: 400, as FastAPI
  answers JSON that Python's decoder cannot read) catches the subclass first.
- :func:`utf8` encodes JSON text that may quote a lone surrogate (``"\\ud800"`` decodes to one):
  strict UTF-8 cannot encode it, so it is written back as the JSON escape it came in as.

Info dicts (:func:`dumps_info`, :func:`loads_info`): plain for peers that expect plain JSON,
typed for envwire's clients. Plain: numpy scalars become numbers and arrays nested lists (what
gym-socket's original clients read). Typed: arrays travel as ``{"__ndarray__": <base64 of
C-order little-endian bytes>, "dtype": "float32", "shape": [...]}`` (object arrays as
``{"__ndarray__": [items...], "dtype": "object", "shape": [...]}``) and numpy scalars as
``{"__npscalar__": 3, "dtype": "int64"}``, so Gymnasium's vector infos, with their boolean
``_key`` masks and ``final_obs`` object arrays, come back as the same arrays.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any, Final, TypeAlias, overload

import numpy as np

__all__ = [
    "MAX_DEPTH",
    "JsonObject",
    "JsonValue",
    "TooDeepError",
    "depth_exceeds",
    "dumps",
    "dumps_info",
    "loads",
    "loads_info",
    "plain_default",
    "typed_default",
    "utf8",
]


#: What JSON decodes to (and what encodes as JSON without a hook).
JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None
#: A JSON object.
JsonObject: TypeAlias = dict[str, JsonValue]

#: Deepest nesting of arrays and objects accepted from a peer (the top level counts as 1).
MAX_DEPTH: Final = 100

_CONTAINERS: Final = (dict, list)


class TooDeepError(json.JSONDecodeError):
    """JSON nested deeper than the limit."""


def depth_exceeds(value: object, limit: int) -> bool:
    """Whether decoded JSON nests arrays and objects more than ``limit`` levels deep.

    Only plain ``dict`` and ``list`` count as levels (not their subclasses, nor what an
    ``object_hook`` made of an object). Iterative (level by level), so no input can exhaust
    the stack.
    """
    level: list[object] = [value] if type(value) in _CONTAINERS else []
    for _ in range(limit):
        below: list[object] = []
        for item in level:  # each a list or a dict
            if type(item) is list:
                below += [c for c in item if type(c) in _CONTAINERS]
            elif type(item) is dict:
                below += [c for c in item.values() if type(c) in _CONTAINERS]
        if not below:
            return False
        level = below
    return bool(level)


# Without a hook the result is JSON; a hook may put anything in place of an object.
@overload
def loads(
    data: str | bytes | bytearray, *, max_depth: int = ..., object_hook: None = None
) -> JsonValue: ...
@overload
def loads(
    data: str | bytes | bytearray,
    *,
    max_depth: int = ...,
    object_hook: Callable[[dict[str, Any]], object],
) -> object: ...
def loads(
    data: str | bytes | bytearray,
    *,
    max_depth: int = MAX_DEPTH,
    object_hook: Callable[[dict[str, Any]], object] | None = None,
) -> object:
    """``json.loads`` for text from a peer, nesting at most ``max_depth`` levels.

    Returns:
        The decoded :data:`JsonValue`; with ``object_hook``, whatever the hook made of each
        object (its argument's values are what the hook made of the objects inside).

    Raises:
        json.JSONDecodeError: malformed JSON; :class:`TooDeepError` when nested too deeply
            (both are ``ValueError``).
        UnicodeDecodeError: ``data`` is bytes that are not UTF-8 (also a ``ValueError``).
    """
    try:
        value: object = json.loads(data, object_hook=object_hook)
    except RecursionError:
        raise _too_deep(data, max_depth) from None
    # A text with at most max_depth opening brackets cannot nest deeper: skip the walk.
    if isinstance(data, str):
        openings = data.count("[") + data.count("{")
    else:
        openings = data.count(b"[") + data.count(b"{")
    if openings > max_depth and depth_exceeds(value, max_depth):
        raise _too_deep(data, max_depth)
    return value


def _too_deep(data: str | bytes | bytearray, max_depth: int) -> TooDeepError:
    text = data if isinstance(data, str) else bytes(data[:64]).decode("utf-8", "replace")
    return TooDeepError(f"JSON nested deeper than {max_depth} levels", text, 0)


def dumps(value: object) -> str:
    """Compact JSON text (NaN and infinities allowed, as Python's json reads them back; text
    kept as it is: :func:`utf8` encodes it)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def utf8(text: str) -> bytes:
    """``text`` as UTF-8; lone surrogates (from ``\\udXXX`` escapes a peer sent) become those
    escapes again.

    Only JSON text may be passed: there every character that is not ASCII punctuation is
    inside a string literal, where ``\\udXXX`` is the escape JSON defines for it.
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace")


def plain_default(value: object) -> object:
    """``json.dumps`` hook for plain JSON: what to encode in place of ``value``."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return _other(value)


def typed_default(value: object) -> object:
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


def _other(value: object) -> object:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return repr(value)


def dumps_info(info: dict[str, Any], *, typed: bool) -> bytes:
    """Compact JSON of ``info`` (``b"{}"`` when empty)."""
    if not info:
        return b"{}"
    hook = typed_default if typed else plain_default
    return json.dumps(info, separators=(",", ":"), default=hook).encode()


def _hook(obj: dict[str, Any]) -> object:
    # Called for every object of an info: the usual ones (not typed) leave at the first test,
    # and the keys are checked by count and membership rather than by building a set.
    size = len(obj)
    if size == 2 and "__npscalar__" in obj and "dtype" in obj:
        return np.dtype(obj["dtype"]).type(obj["__npscalar__"])
    if size != 3 or "__ndarray__" not in obj or "dtype" not in obj or "shape" not in obj:
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


def loads_info(raw: bytes | str) -> dict[str, Any]:
    """The inverse of :func:`dumps_info` (typed arrays come back as arrays)."""
    if raw in (b"{}", "{}"):
        return {}
    value = loads(raw, object_hook=_hook)
    return value if isinstance(value, dict) else {"info": value}
