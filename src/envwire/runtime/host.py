"""The env host: the object that owns env instances and calls into them.

A host lives wherever the env lives (the server process for inline envs, a worker process
otherwise) and is driven through :meth:`EnvHost.call` with a method name and arguments, so that
every worker kind forwards the same calls. It holds ``num_envs`` copies of one env; the
single-env methods act on copy 0, the ``*_all`` methods on every copy at once.
"""

from __future__ import annotations

import contextlib
from typing import Any

import gymnasium
import numpy as np

from envwire.errors import EnvError, EnvwireError, InvalidArgumentError
from envwire.registry import EnvSpec
from envwire.runtime.monitor import EpisodeMonitor

__all__ = ["EnvHost", "HOST_METHODS"]

#: The methods a worker may forward to its host; anything else is refused.
HOST_METHODS = frozenset(
    {"spaces", "reset", "step", "render", "monitor", "reset_all", "step_all", "close"}
)


class EnvHost:
    """``num_envs`` copies of the env ``spec`` describes, plus their monitors.

    Raises (from the constructor):
        ConfigError, EnvError: as :meth:`EnvSpec.make`.
    """

    def __init__(self, spec: EnvSpec, num_envs: int = 1) -> None:
        if num_envs < 1:
            raise InvalidArgumentError(f"num_envs must be >= 1, got {num_envs}")
        self.spec = spec
        self.envs = [_make_rendering(spec) for _ in range(num_envs)]
        self.monitor_: EpisodeMonitor | None = None

    def call(self, method: str, args: tuple[Any, ...]) -> Any:
        """Run ``method(*args)``; env exceptions become :class:`EnvError` naming the env.

        Raises:
            EnvwireError: the env failed, or the request was invalid.
        """
        if method not in HOST_METHODS:
            raise InvalidArgumentError(f"unknown host method {method!r}")
        try:
            return getattr(self, method)(*args)
        except EnvwireError:
            raise
        except Exception as exc:
            raise EnvError(f"{self.spec.id}: {method} raised {type(exc).__name__}: {exc}") from exc

    def spaces(self) -> tuple[gymnasium.Space[Any], gymnasium.Space[Any]]:
        """The action and observation spaces of copy 0."""
        env = self.envs[0]
        return env.action_space, env.observation_space

    def reset(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        """Reset copy 0."""
        obs, info = self.envs[0].reset(seed=seed, options=options)
        if self.monitor_ is not None:
            self.monitor_.on_reset(self.envs[0])
        return obs, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step copy 0."""
        obs, reward, terminated, truncated, info = self.envs[0].step(action)
        result = (obs, float(reward), bool(terminated), bool(truncated), info)
        if self.monitor_ is not None:
            self.monitor_.on_step(self.envs[0], result[1], result[2] or result[3])
        return result

    def render(self) -> Any:
        """Render copy 0; the frame also goes to the monitor's current video."""
        frame = self.envs[0].render()
        if self.monitor_ is not None and isinstance(frame, np.ndarray):
            self.monitor_.add_frame(frame)
        return frame

    def monitor(self, directory: str, resume: bool, force: bool, video: bool) -> str:
        """Start recording into ``directory`` (already confined by the session)."""
        if self.monitor_ is not None:
            self.monitor_.close()
        self.monitor_ = EpisodeMonitor(directory, resume=resume, force=force, video=video)
        return directory

    def reset_all(self, seeds: list[int | None]) -> tuple[list[Any], list[dict[str, Any]]]:
        """Reset every copy; ``seeds`` has one entry per copy."""
        results = [env.reset(seed=seed) for env, seed in zip(self.envs, seeds, strict=True)]
        return [r[0] for r in results], [r[1] for r in results]

    def step_all(self, actions: list[Any]) -> list[tuple[Any, float, bool, bool, dict[str, Any]]]:
        """Step every copy with its action."""
        return [env.step(a) for env, a in zip(self.envs, actions, strict=True)]  # type: ignore[misc]

    def close(self) -> None:
        """Close the monitor and every copy; errors while closing are not raised."""
        if self.monitor_ is not None:
            self.monitor_.close()
            self.monitor_ = None
        for env in self.envs:
            with contextlib.suppress(Exception):  # closing must free the rest regardless
                env.close()


def _make_rendering(spec: EnvSpec) -> gymnasium.Env[Any, Any]:
    """Make the env with ``render_mode="rgb_array"`` when it offers it, so Render and the
    monitor's videos work without re-making the env; rendering only happens when asked."""
    probe_modes = _declared_render_modes(spec)
    if "rgb_array" in probe_modes and "render_mode" not in spec.kwargs:
        return spec.make(render_mode="rgb_array")
    return spec.make()


def _declared_render_modes(spec: EnvSpec) -> list[str]:
    if spec.entry_point.startswith("gym:"):
        try:
            gym_spec = gymnasium.spec(spec.entry_point[4:])
        except gymnasium.error.Error:
            return []
        target = gym_spec.entry_point
        if isinstance(target, str):
            from envwire.registry import load_entry_point

            target = load_entry_point(target)
        return list(getattr(target, "metadata", {}).get("render_modes", []))
    from envwire.registry import load_entry_point

    target = load_entry_point(spec.entry_point)
    return list(getattr(target, "metadata", {}).get("render_modes", []))
