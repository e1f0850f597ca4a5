"""Progress lines for the training examples: long training runs say how far they are.

:class:`Progress` prints one line at most every ``every`` seconds (plain lines, so that the
output reads the same in a terminal, a log file or CI). It is also a Stable-Baselines3 callback:
``model.learn(steps, callback=progress)`` calls it after every env step with the training
loop's locals, and it reads the model's step count and its recent episodes' returns there.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["Progress"]


class Progress:
    """Counts steps out of ``total`` and prints ``"<name>: <done>/<total> steps (<pct>%),
    <rate> steps/s, mean return <r>, <elapsed> s"`` now and then.

    Args:
        name: what is training ("envwire", "local").
        total: the steps it will take.
        every: seconds between two lines.
        out: where lines go (standard output by default).
        clock: the time source (tests give their own).
    """

    def __init__(
        self,
        name: str,
        total: int,
        *,
        every: float = 10.0,
        out: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name, self.total, self.every = name, total, every
        self.out, self.clock = out, clock
        self.started = self.last = clock()

    def update(self, done: int, mean_return: float | None = None) -> None:
        """``done`` steps so far; a line when ``every`` seconds passed since the last one."""
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            self.print(done, mean_return)

    def print(self, done: int, mean_return: float | None = None) -> None:
        """A progress line now."""
        elapsed = self.clock() - self.started
        rate = done / elapsed if elapsed > 0 else 0.0
        shown = "" if mean_return is None else f", mean return {mean_return:.1f}"
        print(
            f"{self.name}: {done:,}/{self.total:,} steps ({100 * done / self.total:.0f}%), "
            f"{rate:,.0f} steps/s{shown}, {elapsed:.0f} s",
            file=self.out or sys.stdout,
            flush=True,
        )

    def __call__(self, locals_: dict[str, Any], globals_: dict[str, Any]) -> bool:
        """Stable-Baselines3's callback form: reads the model (``self`` in the training
        loop's locals); True: go on training."""
        model = locals_["self"]
        episodes = list(getattr(model, "ep_info_buffer", None) or [])
        mean = sum(e["r"] for e in episodes) / len(episodes) if episodes else None
        self.update(int(model.num_timesteps), mean)
        return True
