"""Episodes as a session serves them: the steps of each episode (each copy's, in a vector
session), gathered on the step path and handed over whole when the episode ends.

Nothing here writes: an :class:`EpisodeTap` gives each finished :class:`Episode` to a ``sink``
callable (the dataset writer's non-blocking ``offer``). Memory is bounded per session: an
episode longer than ``max_steps`` steps, or than ``max_bytes`` bytes of observations and
frames (estimated from the reset's), is abandoned (reported to ``on_drop`` as ``too_long``)
instead of growing without end.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space, iterate

from envwire import messages as m
from envwire.errors import EnvError, EnvwireError
from envwire.session import Session

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_EPISODE_BYTES",
    "DEFAULT_MAX_EPISODE_STEPS",
    "DEFAULT_QUEUE_SIZE",
    "DEFAULT_WAIT_TIMEOUT",
    "Episode",
    "EpisodeTap",
]

#: Steps one episode may have and still be recorded (bounds a session's memory).
DEFAULT_MAX_EPISODE_STEPS = 100_000
#: Bytes of observations (and frames) one episode may gather in memory (256 MiB).
DEFAULT_MAX_EPISODE_BYTES = 256 << 20
#: Bytes the recording directory may hold before new episodes are dropped (1 GiB).
DEFAULT_MAX_BYTES = 1 << 30
#: Finished episodes waiting for the writer before new ones wait (or are dropped).
DEFAULT_QUEUE_SIZE = 64
#: Seconds an episode waits for room in a full queue (overflow ``wait``) before it is dropped
#: (``wait_timeout``): a stuck writer never holds a session's step for longer.
DEFAULT_WAIT_TIMEOUT = 60.0


@dataclass
class Episode:
    """One episode's data, Minari's way: ``observations`` and ``infos`` have one entry more
    than ``actions``, ``rewards``, ``terminations`` and ``truncations`` (the reset's)."""

    env_id: str
    observation_space: spaces.Space[Any]
    action_space: spaces.Space[Any]
    seed: int | None = None
    observations: list[Any] = field(default_factory=list)
    actions: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    terminations: list[bool] = field(default_factory=list)
    truncations: list[bool] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)
    frames: list[Any] | None = None

    def __len__(self) -> int:
        return len(self.rewards)

    @property
    def episode_return(self) -> float:
        """The sum of the rewards."""
        return float(sum(self.rewards))


def _copy_info(infos: dict[str, Any], index: int) -> dict[str, Any]:
    """Copy ``index``'s info out of a vector info dict (Gymnasium's ``_key`` masks say which
    copies have each key)."""
    info: dict[str, Any] = {}
    for key, values in infos.items():
        if key.startswith("_") or key in ("final_obs", "final_info"):
            continue
        mask = infos.get("_" + key)
        if mask is not None and not mask[index]:
            continue
        if isinstance(values, np.ndarray) and len(values) > index:
            info[key] = values[index]
    return info


def _nbytes(value: object) -> int:
    """Bytes of an observation or frame (arrays in dicts and tuples summed; others ~64)."""
    if isinstance(value, np.ndarray | np.generic):
        return int(value.nbytes)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, tuple | list):
        return sum(_nbytes(v) for v in value)
    return 64


class EpisodeTap:
    """A session tap that gathers episodes and gives each finished one to ``sink``.

    Args:
        session: the session (its spaces, its autoreset mode).
        sink: takes a finished episode; must not block.
        on_drop: told ``(env_id, reason)`` when an episode is abandoned.
        frames: also keep the env's rendered frame after the reset and every step (one-env
            sessions of envs with a render mode).
        on_no_frame: told the env id when ``frames`` is asked for and the env drew no frame
            after a reset (the episode is kept without frames).
        max_steps: longest episode kept, in steps.
        max_bytes: largest episode kept, in bytes of observations and frames.
    """

    def __init__(
        self,
        session: Session,
        sink: Callable[[Episode], None],
        on_drop: Callable[[str, str], None],
        *,
        frames: bool = False,
        on_no_frame: Callable[[str], None] = lambda env: None,
        max_steps: int = DEFAULT_MAX_EPISODE_STEPS,
        max_bytes: int = DEFAULT_MAX_EPISODE_BYTES,
    ) -> None:
        self.session = session
        self.on_no_frame = on_no_frame
        self.env_id = session.env_id
        self.sink = sink
        self.on_drop = on_drop
        self.frames = frames and session.autoreset_mode is None
        self.max_steps = max_steps
        self.max_bytes = max_bytes
        self.step_limit = [max_steps] * session.num_envs
        self.mode = session.autoreset_mode
        self.num_envs = session.num_envs
        self.observation_space = session.observation_space
        self.action_space = session.action_space
        # Vector sessions only (None for one env).
        self.batch_observations: spaces.Space[Any] | None = (
            batch_space(session.observation_space, self.num_envs) if self.mode else None
        )
        self.batch_actions = session.batch_action_space
        self.open: list[Episode | None] = [None] * self.num_envs
        # NextStep: a copy whose episode ended is reset by its next step.
        self.restarting = np.zeros(self.num_envs, dtype=bool)

    def _new(self, observation: object, info: dict[str, Any], seed: object, i: int = 0) -> Episode:
        episode = Episode(self.env_id, self.observation_space, self.action_space)
        episode.seed = seed if isinstance(seed, int) else None
        episode.observations.append(observation)
        episode.infos.append(info)
        per_step = _nbytes(observation)
        if self.frames:
            frame = self.session.frame()
            episode.frames = None if frame is None else [frame]
            if frame is None:
                self.on_no_frame(self.env_id)
            per_step += _nbytes(frame)
        self.step_limit[i] = min(self.max_steps, self.max_bytes // max(per_step, 1))
        return episode

    def handled(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
        if isinstance(reply, m.ResetReply):
            self._reset(request, reply)
        elif isinstance(reply, m.StepReply):
            assert isinstance(request, m.Step)
            self._step(0, request.action, reply)
        elif isinstance(reply, m.VectorStepReply):
            assert isinstance(request, m.Step)
            self._vector_step(request.action, reply)

    def _reset(self, request: m.Request, reply: m.ResetReply) -> None:
        seed = request.seed if isinstance(request, m.Reset) else None
        if self.mode is None:
            self.open[0] = self._new(reply.observation, reply.info, seed)
            return
        options = request.options if isinstance(request, m.Reset) else None
        mask = (options or {}).get("reset_mask")
        assert self.batch_observations is not None  # a vector session (mode is set)
        observations = list(iterate(self.batch_observations, reply.observation))
        seeds = seed if isinstance(seed, list | tuple) else [None] * self.num_envs
        for i in range(self.num_envs):
            if mask is None or bool(mask[i]):
                first_seed = seed + i if isinstance(seed, int) else seeds[i]
                info = _copy_info(reply.info, i)
                self.open[i] = self._new(observations[i], info, first_seed, i)
                self.restarting[i] = False

    def _step(self, i: int, action: object, reply: m.StepReply) -> None:
        obs, reward, info = reply.observation, reply.reward, reply.info
        term, trunc = reply.terminated, reply.truncated
        episode = self.open[i]
        if episode is None:
            return
        episode.actions.append(action)
        episode.observations.append(obs)
        episode.rewards.append(float(reward))
        episode.terminations.append(bool(term))
        episode.truncations.append(bool(trunc))
        episode.infos.append(info)
        if episode.frames is not None:
            frame = self.session.frame()
            if frame is None:
                episode.frames = None
            else:
                episode.frames.append(frame)
        if term or trunc:
            self.open[i] = None
            self.sink(episode)
        elif len(episode) >= self.step_limit[i]:
            self.open[i] = None
            self.on_drop(self.env_id, "too_long")

    def _vector_step(self, actions: object, reply: m.VectorStepReply) -> None:
        assert self.batch_observations is not None  # only vector sessions step in batches
        observations = list(iterate(self.batch_observations, reply.observations))
        assert self.batch_actions is not None  # set for every vector session
        per_copy = list(iterate(self.batch_actions, actions))
        infos = reply.infos
        final_obs = infos.get("final_obs")
        for i in range(self.num_envs):
            info = _copy_info(infos, i)
            if self.restarting[i]:  # NextStep: this step was copy i's reset
                self.restarting[i] = False
                self.open[i] = self._new(observations[i], info, None, i)
                continue
            term, trunc = reply.terminations[i], reply.truncations[i]
            obs = observations[i]
            done = bool(term or trunc)
            if done and self.mode == "SameStep" and final_obs is not None:
                obs = final_obs[i]  # the reply's observation is already the next episode's
            self._step(i, per_copy[i], m.StepReply(obs, reply.rewards[i], term, trunc, info))
            if done and self.mode == "NextStep":
                self.restarting[i] = True
            elif done and self.mode == "SameStep":
                self.open[i] = self._new(observations[i], {}, None, i)

    def failed(self, request: m.Request, error: EnvwireError, seconds: float) -> None:
        if isinstance(error, EnvError):  # the env failed mid-episode: no whole episode to keep
            for i, episode in enumerate(self.open):
                if episode is not None:
                    self.open[i] = None
                    self.on_drop(self.env_id, "env_failed")

    def closed(self) -> None:
        """Episodes still open when the session closes were not finished: not recorded."""
        self.open = [None] * self.num_envs
