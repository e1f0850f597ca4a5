"""What is happening now: the open sessions, recent throughput, errors and env crashes (for the
dashboard), and the session events the log records.

Everything kept is bounded: the live table holds the open sessions (which the server's capacity
bounds), throughput history ``HISTORY`` samples per served env, and the last ``RECENT`` errors
and crashes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from envwire import messages as m
from envwire.errors import EnvwireError
from envwire.observe.metrics import crash_reason, ended_copies
from envwire.session import Session
from envwire.tensor import NDARRAY

__all__ = ["HISTORY", "MAX_ID", "MAX_MESSAGE", "RECENT", "SUMMED", "Activity"]

events = logging.getLogger("envwire.events")

#: Throughput samples kept per env (one per ``interval``: 5 minutes at 2 s).
HISTORY = 150
#: Characters of a client-supplied id, and of an error message, kept in the recent errors.
MAX_ID = 64
MAX_MESSAGE = 300
#: Recent errors and crashes kept.
RECENT = 50
#: A vector session's batches whose rewards are kept before they are added to the returns.
SUMMED = 64

_F8 = np.dtype(np.float64)
_add_reduce, _add_accumulate, _array = np.add.reduce, np.add.accumulate, np.array


class _LiveTap:
    """One session as the dashboard and the log see it.

    A one-env step that ends no episode changes nothing here (the session counts its return
    and length), so its ``steady`` (see ``SessionTap``) is None; a batch that ends none adds
    its rewards to its copies' returns, without asking whether it ended one, and one that
    ends some is told the copies by :meth:`ended`; or, while session events are not logged,
    up to ``BULK`` batches at once (its ``bulk_batches``).
    """

    def __init__(self, activity: Activity, session: Session) -> None:
        self.activity = activity
        self.session = session
        self.opened = time.time()
        self.returns = np.zeros(session.num_envs)
        # A vector session's copies' lengths: the batches stepped, less each copy's count of
        # them at its episode's start (one addition a batch, not one per copy).
        self.batches = 0
        self.starts = [0] * session.num_envs
        self.vector = session.autoreset_mode is not None
        # NextStep: a copy's next step is its reset, which Gymnasium counts in no episode, so
        # its next episode starts a batch later.
        self._next_step = int(session.autoreset_mode == "NextStep")
        # the rewards of the batches that ended no episode since the returns were summed
        self._unsummed: list[bytes] = []
        self._row = 8 * session.num_envs  # the bytes of a batch's float64 rewards
        self.steady: Callable[[m.Request, m.Reply, float], None] | None = (
            self._quiet_batch if self.vector else None
        )
        # Batches told in bulk (see SessionTap) unless each ended episode is logged as an event
        # (then at its step, as it ends)
        self.bulk_batches: Callable[[list[float], Any, list[tuple[int, int]]], None] | None = (
            self._bulk_batches if self.vector and not events.isEnabledFor(logging.INFO) else None
        )
        # A one-env session's return and length at its last episode's end (or reset): the
        # next episode's are the session's counts since.
        self._return_base, self._length_base = 0.0, 0
        self.episodes = 0
        self.last_return: float | None = None
        self.rate = 0.0
        self._sample = (time.monotonic(), 0)
        self.fields = {
            "front_end": session.front_end,
            "session": session.id,
            "env": session.env_id,
            "peer": session.peer,
        }
        self._event("session_opened", "session opened")

    def _event(self, event: str, message: str, level: int = logging.INFO, **extra: object) -> None:
        if events.isEnabledFor(level):
            events.log(level, "%s: %s", message, self.session.env_id,
                       extra={"event": event, **self.fields, **extra})  # fmt: skip

    def handled(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
        if type(reply) is m.StepReply:
            if reply.terminated or reply.truncated:
                session = self.session
                episode_return, length = session.episode_return, session.step_count
                self.returns[0] = episode_return - self._return_base
                self._ended(0, length - self._length_base)
                self._return_base, self._length_base = episode_return, length
        elif isinstance(reply, m.VectorStepReply):
            self.ended(request, reply, seconds, ended_copies(reply))
        elif isinstance(reply, m.ResetReply):
            self._unsummed.clear()
            self.returns[:] = 0
            self.starts = [self.batches] * len(self.starts)
            self._return_base, self._length_base = 0.0, 0

    def ended(self, request: m.Request, reply: m.Reply, seconds: float, copies: list[int]) -> None:
        """A batch that ended the episodes of ``copies`` (see ``SessionTap``; none, when
        :meth:`handled` tells it of a batch that ended none): its rewards and those kept
        added to the returns, and each ended episode told."""
        if self._unsummed:
            self._sum_quiet()
        self.returns += reply.rewards  # type: ignore[union-attr]
        self.batches += 1
        if copies:
            start = self.batches + self._next_step
            for i in copies:
                self._ended(i, self.batches - self.starts[i])
                self.starts[i] = start

    def _quiet_batch(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
        """A batch that ends no episode: its rewards are kept, as bytes, and added to the
        returns with the others kept when a batch ends an episode, or every :data:`SUMMED`
        batches (one NumPy addition, not one a batch)."""
        # (the session tells it a batch)
        rewards = reply.rewards  # type: ignore[union-attr]
        self.batches += 1
        if type(rewards) is NDARRAY and rewards.dtype is _F8:
            row = rewards.tobytes()
            if len(row) == self._row:
                self._unsummed.append(row)
                if len(self._unsummed) >= SUMMED:
                    self._sum_quiet()
                return
        self.returns += rewards

    def _sum_quiet(self) -> None:
        kept = self._unsummed
        if len(kept) == 1:  # (the usual between short episodes: one addition, no reduce)
            self.returns += np.frombuffer(kept[0], np.float64)
        else:
            rows = np.frombuffer(b"".join(kept), np.float64).reshape(-1, self._row // 8)
            self.returns += _add_reduce(rows, axis=0)  # rows.sum(axis=0), without its Python
        kept.clear()

    def _bulk_batches(
        self, seconds: list[float], rewards: npt.NDArray[np.float64], ended: list[tuple[int, int]]
    ) -> None:
        """Batches told at once (see ``SessionTap``): as :meth:`ended` of each in turn, their
        rewards added up in one NumPy call (a running sum of each copy's, down the rows: the
        same returns, to the bit where the rewards are whole numbers, else to the rounding
        of that order of additions)."""
        if self._unsummed:
            self._sum_quiet()
        base = self.batches
        self.batches += len(rewards)
        if not ended:
            self.returns += _add_reduce(rewards, axis=0)
            return
        sums = _add_accumulate(rewards, axis=0)
        # each copy's return before these rows (0 once it ended), and its running sum where
        # its last episode in them ended
        before, taken = self.returns.tolist(), [0.0] * len(self.returns)
        starts, next_step = self.starts, self._next_step
        for row, i in ended:
            total = float(sums[row, i])
            self._episode(i, base + row + 1 - starts[i], before[i] + (total - taken[i]))
            before[i], taken[i] = 0.0, total
            starts[i] = base + row + 1 + next_step
        self.returns[:] = _array(before) + (sums[-1] - _array(taken))

    def _ended(self, i: int, length: int) -> None:
        episode_return = float(self.returns[i])
        self.returns[i] = 0
        self._episode(i, length, episode_return)

    def _episode(self, i: int, length: int, episode_return: float) -> None:
        """Copy ``i``'s episode ended after ``length`` steps (a vector session's: batches)."""
        self.episodes += 1
        self.last_return = episode_return
        if events.isEnabledFor(logging.INFO):  # (the event's fields made only to be logged)
            extra: dict[str, Any] = {"episode_return": episode_return, "length": length}
            if self.vector:
                extra["copy"] = i
            self._event("episode_ended", "episode ended", **extra)

    def failed(self, request: m.Request, error: EnvwireError, seconds: float) -> None:
        self.activity.note_error(self.session.front_end, self.session.env_id, error)
        level = logging.INFO if error.remote else logging.WARNING
        self._event("error", f"error {error.code} ({error})", level, code=error.code)

    def closed(self) -> None:
        self.activity.forget(self)
        self._event(
            "session_closed",
            "session closed",
            steps=self.session.total_steps,
            episodes=self.episodes,
        )

    def row(self, now: float) -> dict[str, Any]:
        """The session as a dashboard row."""
        session = self.session
        return {
            "id": session.id[:8],
            "front_end": session.front_end,
            "env": session.env_id,
            "peer": session.peer,
            "age": round(now - self.opened, 1),
            "steps": session.total_steps,
            "episodes": self.episodes,
            "last_return": self.last_return,
            "steps_per_second": round(self.rate, 1),
        }


def _cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters (a copy: the whole string is not kept alive)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Activity:
    """The live picture of a server, and the session events of its log.

    A :class:`~envwire.session.SessionObserver`. :meth:`sample` (called every ``interval``
    seconds by :meth:`start`'s thread) records each env's steps per second.
    """

    def __init__(self, interval: float = 2.0) -> None:
        self.interval = interval
        self._taps: dict[str, _LiveTap] = {}
        self._lock = threading.Lock()
        self.history: deque[tuple[float, dict[str, float]]] = deque(maxlen=HISTORY)
        self.errors: deque[dict[str, Any]] = deque(maxlen=RECENT)
        self.crashes: deque[dict[str, Any]] = deque(maxlen=RECENT)
        self._closed_steps: dict[str, int] = {}  # steps of closed sessions, per env
        self._last_totals: dict[str, int] = {}
        self._last_time = time.monotonic()
        self._stop = threading.Event()

    def opened(self, session: Session) -> _LiveTap:
        """Add the session to the live table."""
        tap = _LiveTap(self, session)
        with self._lock:
            self._taps[session.id] = tap
        return tap

    def refused(self, front_end: str, env_id: str, error: EnvwireError) -> None:
        """Note a session that could not be opened."""
        self.note_error(front_end, env_id, error)
        events.info(
            "session refused: %s",
            error,
            extra={"event": "session_refused", "front_end": front_end, "code": error.code},
        )

    def forget(self, tap: _LiveTap) -> None:
        """A session closed: drop it from the table, keep its steps in the env's total."""
        env = tap.session.env_id
        with self._lock:
            if self._taps.pop(tap.session.id, None) is not None:
                self._closed_steps[env] = self._closed_steps.get(env, 0) + tap.session.total_steps

    def note_error(self, front_end: str, env_id: str, error: EnvwireError) -> None:
        """Keep an error (and a crash, when it is the env's) for the dashboard."""
        # The env id may be a client's (a refused session's): kept cut, as the message is, so
        # that neither the list nor the dashboard's answer grows with what clients send.
        entry = {
            "time": time.time(),
            "front_end": front_end,
            "env": _cut(env_id, MAX_ID),
            "code": _cut(error.code, MAX_ID),
            "message": _cut(str(error), MAX_MESSAGE),
        }
        self.errors.append(entry)
        reason = crash_reason(error)
        if reason is not None:
            self.crashes.append({**entry, "reason": reason})

    def _totals(self) -> dict[str, int]:
        with self._lock:
            totals = dict(self._closed_steps)
            taps = list(self._taps.values())
        for tap in taps:
            env = tap.session.env_id
            totals[env] = totals.get(env, 0) + tap.session.total_steps
        return totals

    def sample(self) -> None:
        """Record each env's and each session's steps per second since the last sample."""
        now = time.monotonic()
        elapsed = max(now - self._last_time, 1e-6)
        totals = self._totals()
        rates = {
            env: max(0.0, (steps - self._last_totals.get(env, 0)) / elapsed)
            for env, steps in totals.items()
        }
        self._last_totals, self._last_time = totals, now
        self.history.append((time.time(), rates))
        with self._lock:
            taps = list(self._taps.values())
        for tap in taps:
            then, steps = tap._sample
            tap.rate = (tap.session.total_steps - steps) / max(now - then, 1e-6)
            tap._sample = (now, tap.session.total_steps)

    def start(self) -> None:
        """Sample every ``interval`` seconds on a thread of its own until :meth:`stop`."""

        def run() -> None:
            while not self._stop.wait(self.interval):
                self.sample()

        threading.Thread(target=run, name="envwire-activity", daemon=True).start()

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()

    def snapshot(self) -> dict[str, Any]:
        """Everything the dashboard shows, JSON-able."""
        now = time.time()
        with self._lock:
            taps = list(self._taps.values())
        return {
            "time": now,
            "sessions": [tap.row(now) for tap in taps],
            "throughput": [{"time": t, "rates": rates} for t, rates in self.history],
            "errors": list(self.errors)[::-1],
            "crashes": list(self.crashes)[::-1],
        }
