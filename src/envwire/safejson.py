"""JSON that peers send and JSON that carries what peers sent: bounded both ways.

Two rules every codec follows for text from the wire:

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
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

__all__ = ["MAX_DEPTH", "TooDeepError", "depth_exceeds", "loads", "utf8"]

#: Deepest nesting of arrays and objects accepted from a peer (the top level counts as 1).
MAX_DEPTH: Final = 100

_CONTAINERS: Final = (dict, list)


class TooDeepError(json.JSONDecodeError):
    """JSON nested deeper than the limit."""


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether decoded JSON nests arrays and objects more than ``limit`` levels deep.

    Iterative (level by level), so no input can exhaust the stack.
    """
    level = [value] if type(value) in _CONTAINERS else []
    for _ in range(limit):
        below: list[Any] = []
        for item in level:
            children = item.values() if type(item) is dict else item
            below += [c for c in children if type(c) in _CONTAINERS]
        if not below:
            return False
        level = below
    return bool(level)


def loads(
    data: str | bytes | bytearray,
    *,
    max_depth: int = MAX_DEPTH,
    object_hook: Callable[[dict[str, Any]], Any] | None = None,
) -> Any:
    """``json.loads`` for text from a peer, nesting at most ``max_depth`` levels.

    Raises:
        json.JSONDecodeError: malformed JSON; :class:`TooDeepError` when nested too deeply
            (both are ``ValueError``).
        UnicodeDecodeError: ``data`` is bytes that are not UTF-8 (also a ``ValueError``).
    """
    try:
        value = json.loads(data, object_hook=object_hook)
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
