"""Progress lines of the arena's long commands (``envwire arena migrate``, ``export``).

A :class:`Progress` logs one line at most every ``every`` seconds, and one at the end, on the
logger ``envwire.arena.progress`` at INFO: quiet where the arena is used from code (unless the
program logs INFO), and shown by the command line, which turns that logger on
(:func:`show_progress`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["EVERY", "LOGGER", "Progress", "show_progress"]

#: The logger of progress lines.
LOGGER = "envwire.arena.progress"
#: Seconds between two progress lines.
EVERY = 5.0

log = logging.getLogger(LOGGER)


def show_progress() -> None:
    """Show progress lines (INFO) unless logging was set to be quieter than WARNING."""
    if logging.getLogger().getEffectiveLevel() <= logging.WARNING:
        log.setLevel(logging.INFO)


class Progress:
    """Counts work done out of ``total`` and logs ``"<what>: <done>/<total> <unit> (<pct>%),
    <elapsed>"`` now and then, with ``detail()`` appended when given.

    Args:
        what: what is being done ("migrate", "export nim").
        total: how much there is to do (None: unknown).
        unit: what is counted ("runs").
        every: seconds between two lines (0: a line per step, for tests).
        detail: more figures for the line ("12 with percepts"), asked only when logging.
    """

    def __init__(
        self,
        what: str,
        total: int | None,
        unit: str,
        *,
        every: float = EVERY,
        detail: Callable[[], str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what, self.total, self.unit = what, total, unit
        self.every, self.detail, self.clock = every, detail, clock
        self.done = 0
        self.started = self.last = clock()

    def line(self) -> str:
        """The progress line as of now."""
        count = f"{self.done:,}" if self.total is None else f"{self.done:,}/{self.total:,}"
        share = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        extra = f", {self.detail()}" if self.detail is not None else ""
        elapsed = self.clock() - self.started
        return f"{self.what}: {count} {self.unit}{share}{extra}, {elapsed:.1f} s"

    def advance(self, count: int = 1) -> None:
        """``count`` more done; a line when ``every`` seconds passed since the last one."""
        self.done += count
        now = self.clock()
        if now - self.last >= self.every and log.isEnabledFor(logging.INFO):
            self.last = now
            log.info("%s", self.line())

    def finish(self) -> None:
        """The last line."""
        log.info("%s (done)", self.line())
