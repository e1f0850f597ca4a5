"""The one observer a server gives its session table and its arena: it forwards every session
event to the metrics, the live activity (dashboard and event log) and, when recording is on,
the episode recorder, so every front end's sessions are seen the same way."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envwire import messages as m
from envwire.errors import ConfigError, EnvwireError
from envwire.observe.episodes import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_EPISODE_BYTES,
    DEFAULT_MAX_EPISODE_STEPS,
    DEFAULT_QUEUE_SIZE,
    DEFAULT_WAIT_TIMEOUT,
    Episode,
)
from envwire.observe.live import Activity
from envwire.observe.metrics import Metrics
from envwire.optional import requires
from envwire.session import Session, SessionObserver, SessionTap

if TYPE_CHECKING:  # imported when recording: minari is an optional extra
    from envwire.observe.recorder import Recorder

__all__ = ["Observability", "RecordSettings"]


@dataclass(frozen=True)
class RecordSettings:
    """What to record and where (``envwire serve --record DIR``, ``record = true``).

    Attributes:
        root: the recording directory: one Minari dataset per env id.
        everything: record every env (``--record``); else only ``envs``.
        envs: env ids whose ``[[env]]`` table says ``record = true``.
        fraction: the share of sessions recorded (``--record-fraction``).
        frames: keep rendered frames (``--record-frames``).
        max_bytes: bytes the directory may hold (``--record-max-bytes``; default 1 GiB).
        queue_size: finished episodes waiting for the writer (default 64).
        max_episode_steps: longest episode recorded (default 100 000 steps).
        max_episode_bytes: largest episode gathered in memory (default 256 MiB).
        overflow: ``wait`` (recorded sessions wait for the writer; nothing is lost) or
            ``drop`` (episodes that find the queue full are dropped, counted and logged) when
            episodes end faster than they are written (``--record-overflow``).
        wait_timeout: seconds a session waits for room with ``wait`` before its episode is
            dropped (``wait_timeout``; default 60).
        forward: where finished episodes go instead of a writer of this process (a worker
            of several: :mod:`envwire.observe.shipping`).
    """

    root: str
    everything: bool = True
    envs: frozenset[str] = frozenset()
    fraction: float = 1.0
    frames: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    queue_size: int = DEFAULT_QUEUE_SIZE
    max_episode_steps: int = DEFAULT_MAX_EPISODE_STEPS
    max_episode_bytes: int = DEFAULT_MAX_EPISODE_BYTES
    overflow: str = "wait"
    wait_timeout: float = DEFAULT_WAIT_TIMEOUT
    forward: Callable[[Episode], bool] | None = None


def _told_by_handled(tap: SessionTap) -> Callable[[m.Request, m.Reply, float, list[int]], None]:
    """An ``ended`` that tells ``tap``'s ``handled``, for a tap without one of its own."""
    handled = tap.handled

    def ended(request: m.Request, reply: m.Reply, seconds: float, copies: list[int]) -> None:
        handled(request, reply, seconds)

    return ended


class _FanOut:
    """Forwards a session's events to several taps. Its ``steady`` (see ``SessionTap``) tells
    each tap's own ``steady`` (its ``handled`` where it has none, nothing where it is None):
    where one tap alone hears those steps (the metrics tap: the live activity's hears a batch
    but not a one-env step), it is that tap's own, one call where there would be two. Its
    ``ended`` tells each tap's own ``ended`` (its ``handled`` where it has none). It has a
    ``bulk_steady`` (not None) where every tap that hears steady steps has one, and a
    ``bulk_batches`` where every tap has one."""

    __slots__ = (
        "batch_bulks",
        "bulk_batches",
        "bulk_steady",
        "bulks",
        "ended",
        "enders",
        "handlers",
        "steadies",
        "steady",
        "taps",
    )

    def __init__(self, taps: tuple[SessionTap, ...]) -> None:
        self.taps = taps
        # Bound once: the step path
        self.handlers = tuple(tap.handled for tap in taps)
        hearing = [tap for tap in taps if getattr(tap, "steady", tap.handled) is not None]
        self.steadies = tuple(getattr(tap, "steady", tap.handled) for tap in hearing)
        self.steady = self.steadies[0] if len(self.steadies) == 1 else self._steady
        self.bulks = tuple(getattr(tap, "bulk_steady", None) for tap in hearing)
        self.bulk_steady: Callable[[list[float]], None] | None = (
            None
            if None in self.bulks
            else self.bulks[0]
            if len(self.bulks) == 1
            else self._bulk_steady
        )
        self.batch_bulks = tuple(getattr(tap, "bulk_batches", None) for tap in taps)
        self.bulk_batches: Callable[[list[float], Any, list[tuple[int, int]]], None] | None = (
            None
            if None in self.batch_bulks
            else self.batch_bulks[0]
            if len(self.batch_bulks) == 1
            else self._bulk_batches
        )
        # and each tap's ended (see SessionTap), its handled where it has none
        self.enders = tuple(getattr(tap, "ended", None) or _told_by_handled(tap) for tap in taps)
        self.ended = self.enders[0] if len(self.enders) == 1 else self._ended

    def handled(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
        for handled in self.handlers:
            handled(request, reply, seconds)

    def _steady(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
        for steady in self.steadies:
            steady(request, reply, seconds)

    def _bulk_steady(self, seconds: list[float]) -> None:
        for bulk_steady in self.bulks:
            bulk_steady(seconds)  # type: ignore[misc]

    def _bulk_batches(
        self, seconds: list[float], rewards: Any, ended: list[tuple[int, int]]
    ) -> None:
        for bulk_batches in self.batch_bulks:
            bulk_batches(seconds, rewards, ended)  # type: ignore[misc]

    def _ended(self, request: m.Request, reply: m.Reply, seconds: float, copies: list[int]) -> None:
        for ended in self.enders:
            ended(request, reply, seconds, copies)

    def failed(self, request: m.Request, error: EnvwireError, seconds: float) -> None:
        for tap in self.taps:
            tap.failed(request, error, seconds)

    def closed(self) -> None:
        for tap in self.taps:
            tap.closed()


class Observability:
    """Metrics, live activity and (optionally) recording, as one session observer.

    Args:
        record: what to record, or None to record nothing.

    Raises:
        ConfigError: recording is asked for but the ``minari`` extra is not installed, or a
            setting is out of range.
    """

    def __init__(self, record: RecordSettings | None = None) -> None:
        self.metrics = Metrics()
        self.activity = Activity()
        self.recorder = self._recorder(record) if record is not None else None
        # The recorder is asked apart: it attaches a tap only to the sessions it records.
        self._observers: tuple[SessionObserver, ...] = (self.metrics, self.activity)
        # The sessions observed, whose kept steps tell_kept() tells: references that take
        # themselves out when their session is gone (a set's add, discard and copy are each
        # one step for the other threads, which open and drop sessions meanwhile)
        self._sessions: set[weakref.ref[Session]] = set()

    def _recorder(self, record: RecordSettings) -> Recorder:
        # minari is an optional extra: import it only when recording is on
        with requires("minari", "recording (--record)"):
            from envwire.observe.recorder import Recorder
        try:
            return Recorder(
                record.root,
                everything=record.everything,
                envs=record.envs,
                fraction=record.fraction,
                frames=record.frames,
                max_bytes=record.max_bytes,
                queue_size=record.queue_size,
                max_episode_steps=record.max_episode_steps,
                max_episode_bytes=record.max_episode_bytes,
                overflow=record.overflow,
                wait_timeout=record.wait_timeout,
                on_written=self.metrics.recorded_one,
                on_drop=self.metrics.dropped_one,
                forward=record.forward,
            )
        except (ValueError, OSError) as exc:
            raise ConfigError(f"cannot record to {record.root}: {exc}") from exc

    def opened(self, session: Session) -> SessionTap:
        """Every observer's tap for the session, as one."""
        self._sessions.add(weakref.ref(session, self._sessions.discard))
        taps = [o.opened(session) for o in self._observers]
        recording = self.recorder.opened(session) if self.recorder is not None else None
        if recording is not None:
            taps.append(recording)
        return _FanOut(tuple(taps))

    def tell_kept(self) -> None:
        """Tell the taps of the steps their sessions keep until the reply is sent
        (``Session.step``'s ``tell``), before what the taps count is read: a scrape after a
        client's step counts it. A session in the middle of a request told its own as the
        request began."""
        for ref in self._sessions.copy():
            session = ref()
            if session is not None:
                session.tell(blocking=False)

    def refused(self, front_end: str, env_id: str, error: EnvwireError) -> None:
        """Tell every observer of a session that could not be opened."""
        for observer in self._observers:
            observer.refused(front_end, env_id, error)
        if self.recorder is not None:
            self.recorder.refused(front_end, env_id, error)

    def error(self, front_end: str, error: EnvwireError, env_id: str = "") -> None:
        """An error a front end answered: counted and shown once (one a session raised, or a
        refused session, was seen already; a malformed message was not)."""
        if error.observed:
            return
        self.metrics.error(front_end, error)
        self.activity.note_error(front_end, env_id, error)

    def arena_acted(self, env: str, actions: int) -> None:
        """Count actions sent to an arena env."""
        self.metrics.arena_acted(env, actions)

    def start(self) -> None:
        """Start the background sampling of the live activity."""
        self.activity.start()

    def close(self) -> None:
        """Stop sampling; write the recorder's queued episodes."""
        self.activity.stop()
        if self.recorder is not None:
            self.recorder.close()
