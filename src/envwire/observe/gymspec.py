"""A served env as a Gymnasium ``EnvSpec``: what a recorded dataset stores as Minari's
``env_spec``, so that ``MinariDataset.recover_environment()`` rebuilds the env."""

from __future__ import annotations

from dataclasses import replace

import gymnasium
from gymnasium.envs.registration import EnvSpec as GymnasiumSpec

from envwire.errors import ConfigError
from envwire.registry import EnvSpec

__all__ = ["gymnasium_spec"]


def gymnasium_spec(spec: EnvSpec) -> str | None:
    """``spec`` as a Gymnasium ``EnvSpec`` in JSON, which ``gymnasium.make`` makes the env from:
    for Gymnasium ids and for entry points that name a ``gymnasium.Env`` class, with the
    entry's ``kwargs`` and ``max_episode_steps``. None for the others (factories, whose env is
    known only once called; ``dm_env``, typed and OpenEnv envs, which ``gymnasium.make`` does
    not make), and where the entry point cannot be loaded or its arguments are not JSON.
    """
    if spec.openenv is not None:
        return None
    try:
        if spec.entry_point.startswith("gym:"):
            found = gymnasium.spec(spec.entry_point[4:])
            kwargs = {**found.kwargs, **spec.kwargs}
            steps = kwargs.pop("max_episode_steps", found.max_episode_steps)
            made = replace(found, kwargs=kwargs, max_episode_steps=steps)
        else:
            target = spec.target()
            if not (isinstance(target, type) and issubclass(target, gymnasium.Env)):
                return None
            made = GymnasiumSpec(
                spec.id,
                spec.entry_point,
                kwargs=dict(spec.kwargs),
                max_episode_steps=spec.max_episode_steps,
            )
        return made.to_json()
    except (ConfigError, gymnasium.error.Error, ValueError, TypeError):
        return None
