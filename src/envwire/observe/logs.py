"""Logs as one JSON object per line (``envwire serve --log-format json``).

Session events are logged by :class:`~envwire.observe.live.Activity` on the ``envwire.events``
logger with structured fields (``event``, ``front_end``, ``session``, ``env``, ``peer`` and
the event's own: ``episode_return``, ``length``, ``code``); :class:`JsonFormatter` writes them,
with the time, level and message, as JSON. The text format (the default) is unchanged.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

__all__ = ["EVENT_FIELDS", "JsonFormatter", "configure_logging"]

#: The structured fields an event record may carry (``logging``'s ``extra``).
EVENT_FIELDS = (
    "event",
    "front_end",
    "session",
    "env",
    "peer",
    "episode_return",
    "length",
    "copy",
    "code",
    "steps",
    "episodes",
)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``time`` (ISO 8601, UTC), ``level``, ``logger``,
    ``message``, the event fields the record has, and ``exception`` when there is one."""

    #: Says to code that cannot import this module (the Ray runtime) that lines are JSON.
    json_lines = True

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in EVENT_FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure_logging(level: str, fmt: str = "text") -> None:
    """Log to stderr at ``level``, as text or as JSON lines (unless logging is configured).

    Raises:
        ValueError: ``fmt`` is neither 'text' nor 'json'.
    """
    if fmt not in ("text", "json"):
        raise ValueError(f"log format must be 'text' or 'json', got {fmt!r}")
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(message)s"))
    # As logging.basicConfig: a program that configured logging already keeps its handlers.
    logging.basicConfig(level=level, handlers=[handler])
