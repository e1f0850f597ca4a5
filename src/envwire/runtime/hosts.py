"""The env host: the object that owns env instances and calls into them.

A host lives wherever the env lives (the server process for inline envs, a worker process
otherwise) and is driven through :meth:`EnvHost.call` with a method name and arguments, so that
every worker kind forwards the same calls. It holds one env; a session that steps N copies at
once uses a :class:`VectorHost` instead (:func:`make_host` picks).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode

from envwire.errors import EnvError, EnvwireError, InvalidArgumentError, UnsupportedError
from envwire.kinds.dm_env import DmSpecs
from envwire.kinds.openenv_core.appmodule import resolve
from envwire.kinds.openenv_core.gymenv import OpenEnvGymEnv
from envwire.messages import autoreset_mode
from envwire.registry import EnvSpec
from envwire.runtime.monitor import EpisodeMonitor
from envwire.runtime.syncvector import LeanSyncVectorEnv

__all__ = ["HOST_METHODS", "EnvHost", "dispatch", "guarded"]

#: The methods a worker may forward to its host; anything else is refused.
HOST_METHODS = frozenset(
    {"spaces", "reset", "step", "render", "monitor", "close", "extension", "dm_specs"}
)


def dispatch(
    host: object, methods: frozenset[str], env_id: str, method: str, args: tuple[object, ...]
) -> object:
    """Call ``host.method(*args)`` if ``methods`` allows it; foreign exceptions from the env
    become :class:`EnvError` naming the env and the method.

    Returns:
        What the method returned, passed along as it is (its type depends on ``method``: the
        session that asked knows it).

    Raises:
        InvalidArgumentError: a method the host does not offer.
        EnvwireError: what the call raised.
    """
    if method not in methods:
        raise InvalidArgumentError(f"unknown host method {method!r}")
    return guarded(env_id, method, getattr(host, method), *args)


def guarded(env_id: str, method: str, call: Callable[..., object], *args: object) -> object:
    """``call(*args)``, its foreign exceptions turned into :class:`EnvError` naming the env
    and ``method`` (what :func:`dispatch` does once it has found the method).

    Raises:
        EnvwireError: what the call raised.
    """
    try:
        return call(*args)
    except EnvwireError:
        raise
    except Exception as exc:
        message = f"{env_id}: {method} raised {type(exc).__name__}: {exc}"
        raise EnvError.wrapping(message, exc) from exc


class EnvHost:
    """The env ``spec`` describes, plus its monitor.

    Raises (from the constructor):
        ConfigError, EnvError: as :meth:`EnvSpec.make`.
    """

    def __init__(self, spec: EnvSpec, num_envs: int = 1) -> None:
        if num_envs != 1:
            raise InvalidArgumentError(f"an EnvHost holds one env, not {num_envs}")
        self.spec = spec
        self.env = _make_rendering(spec)
        self.monitor_: EpisodeMonitor | None = None

    def call(self, method: str, args: tuple[object, ...]) -> object:
        """Run ``method(*args)``; env exceptions become :class:`EnvError` naming the env.

        Raises:
            EnvwireError: the env failed, or the request was invalid.
        """
        return dispatch(self, HOST_METHODS, self.spec.id, method, args)

    def spaces(self) -> tuple[gymnasium.Space[Any], gymnasium.Space[Any]]:
        """The env's action and observation spaces."""
        return self.env.action_space, self.env.observation_space

    def reset(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        """Reset the env."""
        obs, info = self.env.reset(seed=seed, options=options)
        if self.monitor_ is not None:
            self.monitor_.on_reset(self.env)
        return obs, info

    def step(self, action: object) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step the env (the session checked ``action`` against the action space)."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        result = (obs, float(reward), bool(terminated), bool(truncated), info)
        if self.monitor_ is not None:
            self.monitor_.on_step(self.env, result[1], result[2] or result[3])
        return result

    def render(self) -> object:
        """Render the env; the frame also goes to the monitor's current video.

        A render that raises is noted in the monitor's statistics (``video_error``), since
        the client may have no way to hear of it (gym-socket's Render has no reply).
        """
        try:
            frame = self.env.render()
        except Exception as exc:
            if self.monitor_ is not None:
                self.monitor_.note_missing_frames(f"Render raised {type(exc).__name__}: {exc}")
            raise
        if self.monitor_ is not None and isinstance(frame, np.ndarray):
            self.monitor_.add_frame(frame)
        return frame

    def extension(self, name: str, *args: object) -> object:
        """An env-specific operation outside the Gymnasium API (a typed env's ``state`` and
        MCP tools): forwarded to ``env.unwrapped.extension(name, *args)``.

        Raises:
            UnsupportedError: the env has no such operations.
        """
        target = getattr(self.env.unwrapped, "extension", None)
        if not callable(target):
            raise UnsupportedError(f"{self.spec.id} has no {name!r} operation")
        return target(name, *args)

    def dm_specs(self) -> DmSpecs | None:
        """A dm_env env's own specs; None for other envs."""
        own = getattr(self.env.unwrapped, "dm_specs", None)
        specs = own() if callable(own) else None
        return specs if isinstance(specs, DmSpecs) else None

    def monitor(self, directory: str, resume: bool, force: bool, video: bool) -> str:
        """Start recording into ``directory`` (already confined by the session)."""
        if self.monitor_ is not None:
            self.monitor_.close()
        self.monitor_ = EpisodeMonitor(directory, resume=resume, force=force, video=video)
        return directory

    def close(self) -> None:
        """Close the monitor and the env; errors while closing are not raised."""
        if self.monitor_ is not None:
            self.monitor_.close()
            self.monitor_ = None
        with contextlib.suppress(Exception):  # closing must not raise
            self.env.close()


def _make_rendering(spec: EnvSpec) -> gymnasium.Env[Any, Any]:
    """Make the env in the render mode its spec decides (``EnvSpec.render_mode``); an OpenEnv
    env (``spec.openenv``) as openenv-core would host it."""
    if spec.openenv is not None:
        env: gymnasium.Env[Any, Any] = OpenEnvGymEnv(
            resolve(spec.openenv, spec.entry_point), spec.id
        )
        if spec.max_episode_steps is not None:
            return gymnasium.wrappers.TimeLimit(env, spec.max_episode_steps)
        return env
    mode = spec.render_mode()
    if mode is not None and "render_mode" not in spec.kwargs:
        return spec.make(render_mode=mode)
    return spec.make()


class VectorHost:
    """``num_envs`` copies in one ``SyncVectorEnv`` (its lean-stepping kind,
    :class:`~envwire.runtime.syncvector.LeanSyncVectorEnv`); driven through :meth:`call` like
    EnvHost.

    With ``copy`` False, a step's or a reset's observations are the vector env's own buffer,
    which the next call overwrites: for a host whose every result is serialized before the
    next call (a worker process's), where Gymnasium's deep copy of each batch is wasted.
    """

    METHODS = frozenset({"spaces", "reset", "step", "close"})

    def __init__(
        self, spec: EnvSpec, num_envs: int, mode: str | AutoresetMode, *, copy: bool = True
    ) -> None:
        if num_envs < 1:
            raise InvalidArgumentError(f"num_envs must be >= 1, got {num_envs}")
        self.spec = spec
        try:
            self.vector = LeanSyncVectorEnv(
                [spec.make for _ in range(num_envs)],
                copy=copy,
                autoreset_mode=autoreset_mode(mode),
            )
        except EnvwireError:
            raise
        except Exception as exc:
            raise EnvError(f"{spec.id}: making {num_envs} copies raised {exc!r}") from exc

    def call(self, method: str, args: tuple[object, ...]) -> object:
        """Run ``method(*args)``; env exceptions become :class:`EnvError` naming the env."""
        return dispatch(self, self.METHODS, self.spec.id, method, args)

    def spaces(self) -> tuple[gymnasium.Space[Any], gymnasium.Space[Any]]:
        """The single (per-copy) action and observation spaces."""
        return self.vector.single_action_space, self.vector.single_observation_space

    def reset(
        self, seed: int | Sequence[int | None] | None, options: dict[str, Any] | None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every copy (copy ``i`` gets ``seed + i`` for an int seed)."""
        if options and isinstance(options.get("reset_mask"), list):
            # JSON transports carry the mask as a list; Gymnasium takes only a bool array
            options = {**options, "reset_mask": np.asarray(options["reset_mask"], np.bool_)}
        return self.vector.reset(seed=seed, options=options)  # type: ignore[arg-type]

    def step(self, actions: object) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Step every copy; arrays of rewards, terminations and truncations."""
        return self.vector.step(actions)

    def close(self) -> None:
        """Close every copy."""
        self.vector.close()


def make_host(
    spec: EnvSpec, num_envs: int = 1, mode: str | None = None, *, copy: bool = True
) -> EnvHost | VectorHost:
    """An :class:`EnvHost` (one env) or, with an autoreset ``mode``, a :class:`VectorHost`
    (``copy``: as :class:`VectorHost` takes it)."""
    if mode is None:
        return EnvHost(spec, num_envs)
    return VectorHost(spec, num_envs, mode, copy=copy)
