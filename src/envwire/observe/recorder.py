"""Recording served episodes as Minari datasets (``envwire serve --record DIR``; needs the
``minari`` extra): a session observer whose taps gather episodes
(:mod:`envwire.observe.episodes`) and hand them to a :class:`~envwire.observe.datasets.
DatasetWriter`."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from envwire.errors import EnvwireError
from envwire.observe.datasets import DatasetWriter, list_episodes, load_episode
from envwire.observe.episodes import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_EPISODE_BYTES,
    DEFAULT_MAX_EPISODE_STEPS,
    DEFAULT_QUEUE_SIZE,
    DEFAULT_WAIT_TIMEOUT,
    Episode,
    EpisodeTap,
)
from envwire.registry import EnvSpec
from envwire.session import Session

__all__ = ["Recorder"]

log = logging.getLogger("envwire.record")


class Recorder:
    """Records the episodes of the sessions it is told of.

    Args:
        root: the recording directory (one Minari dataset per env id).
        everything: record every env; else only ``envs``.
        envs: env ids to record when ``everything`` is False (``record = true`` tables).
        fraction: the share of sessions recorded (each session drawn at random).
        frames: keep rendered frames (in each step's ``infos["render"]``).
        max_bytes, queue_size: the writer's bounds (see :class:`DatasetWriter`).
        max_episode_steps: longest episode recorded, in steps.
        max_episode_bytes: largest episode gathered in memory, in bytes.
        overflow: what a full queue does: ``wait`` or ``drop`` (see :class:`DatasetWriter`).
        wait_timeout: seconds a session waits for room in a full queue (overflow ``wait``)
            before its episode is dropped (``wait_timeout``).
        on_written, on_drop: told of each episode written or dropped (metrics).
        forward: where finished episodes go instead of this recorder's writer (a worker of
            several sends them to worker 0's: :mod:`envwire.observe.shipping`); it returns
            False for an episode it could not deliver, which counts as dropped.

    Raises:
        ValueError: a bound is out of range.
        OSError: the recording directory cannot be made or written.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        everything: bool = True,
        envs: Collection[str] = (),
        fraction: float = 1.0,
        frames: bool = False,
        max_bytes: int = DEFAULT_MAX_BYTES,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        max_episode_steps: int = DEFAULT_MAX_EPISODE_STEPS,
        max_episode_bytes: int = DEFAULT_MAX_EPISODE_BYTES,
        overflow: str = "wait",
        wait_timeout: float = DEFAULT_WAIT_TIMEOUT,
        on_written: Callable[[str], None] = lambda env: None,
        on_drop: Callable[[str, str], None] = lambda env, reason: None,
        forward: Callable[[Episode], bool] | None = None,
    ) -> None:
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"record fraction must be within 0..1, got {fraction}")
        self.everything = everything
        self.envs = frozenset(envs)
        self.fraction = fraction
        self.frames = frames
        self.max_episode_steps = max_episode_steps
        self.max_episode_bytes = max_episode_bytes
        self.on_drop = on_drop
        self.forward = forward
        self.writer = DatasetWriter(
            root,
            on_written=on_written,
            on_drop=on_drop,
            queue_size=queue_size,
            max_bytes=max_bytes,
            overflow=overflow,
            wait_timeout=wait_timeout,
        )
        self.root = self.writer.root  # absolute
        self._supported: dict[str, bool] = {}
        self._no_frames: set[str] = set()  # envs warned about once
        self._lock = threading.Lock()

    def records(self, env_id: str) -> bool:
        """Whether sessions of ``env_id`` are recorded (some of them, with a fraction)."""
        return self.fraction > 0 and (self.everything or env_id in self.envs)

    def check_frames(self, catalog: Mapping[str, EnvSpec]) -> list[str]:
        """With ``frames``, warn once (now, at start) about each recorded env that renders
        no ``rgb_array`` frames; return their ids. Its episodes are recorded without frames.
        """
        if not self.frames:
            return []
        found = []
        for env_id, spec in catalog.items():
            mode = spec.render_mode() if self.records(env_id) else "rgb_array"
            if mode != "rgb_array":
                self._frames_missing(env_id, f"its render mode is {mode!r}, not 'rgb_array'")
                found.append(env_id)
        return found

    def _frames_missing(self, env_id: str, why: str) -> None:
        """Warn once per env that its episodes are recorded without frames, saying why."""
        with self._lock:
            if env_id in self._no_frames:
                return
            self._no_frames.add(env_id)
        log.warning(
            "%s: --record-frames: its episodes are recorded without frames (%s)", env_id, why
        )

    @property
    def failed(self) -> int:
        """Episodes that could not be written (a disk or encoding failure)."""
        return self.writer.failed

    def wants(self, session: Session) -> bool:
        """Whether the session's episodes are to be recorded."""
        env = session.env_id
        if not env or not (self.everything or env in self.envs):
            return False
        if self.fraction < 1.0 and random.random() >= self.fraction:
            return False
        supported = self._supported.get(env)
        if supported is None:
            supported = DatasetWriter.supports(session.observation_space, session.action_space)
            self._supported[env] = supported
            if not supported:
                log.warning(
                    "%s: Minari cannot store its spaces; its episodes are not recorded", env
                )
        return supported

    def opened(self, session: Session) -> EpisodeTap | None:
        """A tap gathering the session's episodes, or None when it is not recorded."""
        if not self.wants(session):
            return None
        if self.frames and session.autoreset_mode is not None:
            self._frames_missing(session.env_id, "vector sessions record no frames")
        return EpisodeTap(
            session,
            self.writer.offer if self.forward is None else self._send,
            self.on_drop,
            frames=self.frames,
            on_no_frame=lambda env: self._frames_missing(env, "the env drew no frame"),
            max_steps=self.max_episode_steps,
            max_bytes=self.max_episode_bytes,
        )

    def _send(self, episode: Episode) -> None:
        """Hand a finished episode to ``forward``; count it dropped when it is not taken."""
        assert self.forward is not None
        if not self.forward(episode):
            self.on_drop(episode.env_id, "error")

    def refused(self, front_end: str, env_id: str, error: EnvwireError) -> None:
        """Nothing to record."""

    def episodes(self) -> dict[str, list[dict[str, Any]]]:
        """The recorded episodes, per dataset id (see :func:`list_episodes`)."""
        return list_episodes(self.root)

    def episode(self, dataset: str, number: int) -> dict[str, Any]:
        """One recorded episode (see :func:`load_episode`; raises KeyError)."""
        return load_episode(self.root, dataset, number)

    def close(self) -> None:
        """Write the queued episodes, then stop the writer."""
        self.writer.close()
