"""The env host: the object that owns env instances and calls into them.

A host lives wherever the env lives (the server process for inline envs, a worker process
otherwise) and is driven through :meth:`EnvHost.call` with a method name and arguments, so that
every worker kind forwards the same calls. It holds one env; a session that steps N copies at
once uses a ``VectorHost`` (``envwire.runtime.vector``) instead.
"""

from __future__ import annotations

import contextlib
from typing import Any

import gymnasium
import numpy as np

from envwire.errors import EnvError, EnvwireError, InvalidArgumentError, UnsupportedError
from envwire.registry import EnvSpec
from envwire.runtime.monitor import EpisodeMonitor

__all__ = ["HOST_METHODS", "EnvHost", "dispatch"]

#: The methods a worker may forward to its host; anything else is refused.
HOST_METHODS = frozenset(
    {"spaces", "reset", "step", "render", "monitor", "close", "extension", "dm_specs"}
)


def dispatch(
    host: Any, methods: frozenset[str], env_id: str, method: str, args: tuple[Any, ...]
) -> Any:
    """Call ``host.method(*args)`` if ``methods`` allows it; foreign exceptions from the env
    become :class:`EnvError` naming the env and the method.

    Raises:
        InvalidArgumentError: a method the host does not offer.
        EnvwireError: what the call raised.
    """
    if method not in methods:
        raise InvalidArgumentError(f"unknown host method {method!r}")
    try:
        return getattr(host, method)(*args)
    except EnvwireError:
        raise
    except Exception as exc:
        raise EnvError(f"{env_id}: {method} raised {type(exc).__name__}: {exc}") from exc


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

    def call(self, method: str, args: tuple[Any, ...]) -> Any:
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

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step the env."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        result = (obs, float(reward), bool(terminated), bool(truncated), info)
        if self.monitor_ is not None:
            self.monitor_.on_step(self.env, result[1], result[2] or result[3])
        return result

    def render(self) -> Any:
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

    def extension(self, name: str, *args: Any) -> Any:
        """An env-specific operation outside the Gymnasium API (a typed env's ``state`` and
        MCP tools): forwarded to ``env.unwrapped.extension(name, *args)``.

        Raises:
            UnsupportedError: the env has no such operations.
        """
        target = getattr(self.env.unwrapped, "extension", None)
        if not callable(target):
            raise UnsupportedError(f"{self.spec.id} has no {name!r} operation")
        return target(name, *args)

    def dm_specs(self) -> Any:
        """A dm_env env's own specs (:class:`~envwire.kinds.dm_env.DmSpecs`); None for other
        envs."""
        own = getattr(self.env.unwrapped, "dm_specs", None)
        return own() if callable(own) else None

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
        from envwire.kinds.openenv_core.app import resolve
        from envwire.kinds.openenv_core.gymenv import OpenEnvGymEnv

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
