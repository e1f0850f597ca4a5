"""Episode statistics and videos, written into a monitor directory on the server.

Gym's old ``Monitor`` semantics: ``force`` clears earlier monitor files, ``resume`` keeps and
adds to them, and with neither a directory that already holds monitor files is an error. Files:

- ``envwire.stats.<pid>.<n>.json``: episode lengths, returns, timestamps (rewritten after each
  episode, so it is always current), and ``video_error``: why videos lack frames (the env
  draws no RGB frames, or rendering failed), or null;
- ``envwire.video.<pid>.<n>.episode<k>.gif``: the frames of recorded episodes, for envs that
  render RGB frames. Episodes 0, 1, 8, 27, ... (cubes) up to 1000, then every 1000th, are
  recorded, as Gym did.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import numpy.typing as npt
from PIL import Image

from envwire.errors import InvalidArgumentError

__all__ = ["MONITOR_PREFIXES", "EpisodeMonitor", "video_schedule"]

#: File name prefixes that count as monitor files (ours and Gym's).
MONITOR_PREFIXES = ("envwire.", "openaigym.")
_MAX_FRAMES = 2000
_counter = itertools.count()


def video_schedule(episode: int) -> bool:
    """Gym's capped cubic schedule: 0, 1, 8, 27, ..., 729, 1000, 2000, 3000, ..."""
    if episode < 1000:
        return bool(round(episode ** (1 / 3)) ** 3 == episode)
    return episode % 1000 == 0


class EpisodeMonitor:
    """Records one session's episodes into ``directory``.

    Raises (from the constructor):
        InvalidArgumentError: the directory holds monitor files and neither ``resume`` nor
            ``force`` was given, or it cannot be created.
    """

    def __init__(self, directory: str, *, resume: bool, force: bool, video: bool) -> None:
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InvalidArgumentError(f"cannot create monitor directory: {exc}") from exc
        existing = [p for p in self.directory.iterdir() if p.name.startswith(MONITOR_PREFIXES)]
        if existing and force:
            for path in existing:
                path.unlink(missing_ok=True)
        elif existing and not resume:
            raise InvalidArgumentError(
                f"monitor directory {directory} already holds {len(existing)} monitor files; "
                "pass force to clear them or resume to add to them"
            )
        self.video = video
        tag = f"{os.getpid()}.{next(_counter)}"
        self.stats_path = self.directory / f"envwire.stats.{tag}.json"
        self._video_stem = f"envwire.video.{tag}"
        self.initial_reset_timestamp: float | None = None
        self.lengths: list[int] = []
        self.returns: list[float] = []
        self.timestamps: list[float] = []
        self._episode = -1
        self._steps = 0
        self._return = 0.0
        self._frames: list[npt.NDArray[np.uint8]] = []
        self._recording = False
        self.video_error: str | None = None

    def on_reset(self, env: gymnasium.Env[Any, Any]) -> None:
        """A new episode began: close the previous one and maybe start a video."""
        self._finish_episode()
        if self.initial_reset_timestamp is None:
            self.initial_reset_timestamp = time.time()
        self._episode += 1
        self._steps, self._return = 0, 0.0
        mode = getattr(env, "render_mode", None)
        if self.video and mode != "rgb_array":
            self.note_missing_frames(f"the env draws no RGB frames (render_mode={mode!r})")
        self._recording = self.video and self.video_error is None and video_schedule(self._episode)
        self._capture(env)

    def on_step(self, env: gymnasium.Env[Any, Any], reward: float, done: bool) -> None:
        """Account one step; at the episode's end, write statistics and video."""
        self._steps += 1
        self._return += reward
        self._capture(env)
        if done:
            self._finish_episode()

    def add_frame(self, frame: npt.NDArray[Any]) -> None:
        """Add an explicitly rendered frame to the current video."""
        if self._recording and len(self._frames) < _MAX_FRAMES:
            self._frames.append(np.asarray(frame, np.uint8))

    def note_missing_frames(self, reason: str) -> None:
        """Say in the statistics file why the video lacks frames, and stop recording.

        The first reason is kept (``video_error``); the file is rewritten at once, so the note
        is there even before an episode ends.
        """
        if not self.video or self.video_error is not None:
            return
        self.video_error = reason
        self._recording = False
        self._frames.clear()
        self._write_stats()

    def _capture(self, env: gymnasium.Env[Any, Any]) -> None:
        if not self._recording or getattr(env, "render_mode", None) != "rgb_array":
            return
        try:
            frame = env.render()
        except Exception as exc:
            self.note_missing_frames(f"rendering raised {type(exc).__name__}: {exc}")
            return
        if isinstance(frame, np.ndarray):
            self.add_frame(frame)

    def _finish_episode(self) -> None:
        if self._episode < 0 or (self._steps == 0 and not self._frames):
            return
        if len(self.lengths) <= self._episode:
            self.lengths.append(self._steps)
            self.returns.append(self._return)
            self.timestamps.append(time.time())
            self._write_stats()
        if self._frames:
            self._write_video()
        self._frames = []
        self._recording = False

    def _write_stats(self) -> None:
        record = {
            "initial_reset_timestamp": self.initial_reset_timestamp,
            "timestamps": self.timestamps,
            "episode_lengths": self.lengths,
            "episode_rewards": self.returns,
            "episode_types": ["t"] * len(self.lengths),
            "video_error": self.video_error,
        }
        tmp = self.stats_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(self.stats_path)

    def _write_video(self) -> None:
        path = self.directory / f"{self._video_stem}.episode{self._episode:06d}.gif"
        images = [Image.fromarray(f) for f in self._frames]
        images[0].save(path, save_all=True, append_images=images[1:], duration=100, loop=0)

    def close(self) -> None:
        """Flush the current episode's statistics and video."""
        self._finish_episode()
