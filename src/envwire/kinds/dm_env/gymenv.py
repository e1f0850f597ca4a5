"""A ``dm_env.Environment`` as a ``gymnasium.Env``, the way Shimmy converts dm_control envs.

:class:`DmEnvGym` is how a dm_env env lives in envwire's workers and sessions, so that every
front end serves it: spaces from its specs (:mod:`envwire.kinds.dm_env.specs`), and time
steps turned into Gymnasium's five values by Shimmy's rules:

- ``reset`` returns the FIRST step's observation; ``step`` the next one's;
- the reward is the time step's (0.0 when it has none, as on FIRST steps);
- a LAST step with discount 0 *terminated*; a LAST step with a discount above 0 was
  *truncated* (dm_env's convention for time limits);
- ``info`` holds the time step's ``"timestep.discount"`` and ``"timestep.step_type"``, under
  Shimmy's keys.

Seeding: ``reset(seed=s)`` gives dm_control envs a fresh ``numpy.random.RandomState(s)`` where
Shimmy puts it (the task's random state of a ``control.Environment``, the environment's of a
``composer.Environment``, looked for through wrappers), and calls ``env.seed(s)`` on other envs
that have such a method. Envs with neither cannot be seeded: the seed is ignored and a warning
logged once per env.

The dm_env_rpc front end reads the env's own specs through :meth:`DmEnvGym.dm_specs`, so that
dm_env_rpc clients see them exactly instead of their Gymnasium form.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import dm_env
import gymnasium
import numpy as np
import numpy.typing as npt

from envwire.errors import ConfigError
from envwire.kinds.dm_env.specs import DmSpecs, one_number, space_of, to_dm, to_gym

__all__ = ["DmEnvGym", "as_gymnasium", "is_dm_env", "seed_dm_env"]

log = logging.getLogger("envwire.kinds.dm_env")

#: Where Shimmy keeps a dm_control env's random state, by the env's class.
_RANDOM_STATES = (
    ("dm_control.rl.control", "Environment", ("task", "_random")),
    ("dm_control.composer.environment", "Environment", ("_random_state",)),
)
_WRAPPED = ("_env", "env")  # the attributes through which dm_env wrappers hold their env


def is_dm_env(env: object) -> bool:
    """True for ``dm_env.Environment`` instances."""
    return isinstance(env, dm_env.Environment)


def seed_dm_env(env: object, seed: int) -> bool:
    """Seed ``env`` as the module docstring says; False when it cannot be seeded."""
    target = env
    for _ in range(16):  # a chain of wrappers, not a cycle
        for module_name, class_name, path in _RANDOM_STATES:
            module = sys.modules.get(module_name)  # imported already if the env is one
            if module is not None and isinstance(target, getattr(module, class_name)):
                holder = target
                for name in path[:-1]:
                    holder = getattr(holder, name)
                setattr(holder, path[-1], np.random.RandomState(seed))
                return True
        seeder = getattr(target, "seed", None)
        if callable(seeder):
            seeder(seed)
            return True
        inner = next((getattr(target, a) for a in _WRAPPED if hasattr(target, a)), None)
        if not is_dm_env(inner):
            return False
        target = inner
    return False


class DmEnvGym(gymnasium.Env[Any, Any]):
    """A dm_env env as a Gymnasium env (see the module docstring).

    Args:
        env: the ``dm_env.Environment``.
        render_mode: ``"rgb_array"`` renders the env's MuJoCo physics (``physics.render``;
            dm_control envs only), or None.
        render_kwargs: arguments of ``physics.render`` (``height``, ``width``,
            ``camera_id``).

    Raises:
        ConfigError: a spec without a Gymnasium space, a reward that is not a scalar, or a
            render mode the env cannot draw.
    """

    def __init__(
        self,
        env: dm_env.Environment,
        render_mode: str | None = None,
        render_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.dm_env = env
        self.specs = DmSpecs.of(env)
        name = type(env).__name__
        self.observation_space = space_of(self.specs.observation, f"{name} observation spec")
        self.action_space = space_of(self.specs.action, f"{name} action spec")
        one_number(self.specs.reward, f"{name} reward spec", "rewards")
        one_number(self.specs.discount, f"{name} discount spec", "discounts")
        physics = getattr(env, "physics", None)
        self.metadata = {"render_modes": ["rgb_array"] if physics is not None else []}
        timestep = getattr(env, "control_timestep", None)
        if callable(timestep):
            self.metadata["render_fps"] = 1.0 / float(timestep())
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ConfigError(f"{name} cannot render in mode {render_mode!r}")
        self.render_mode = render_mode
        self.render_kwargs = dict(render_kwargs or {})
        self._unseeded_warned = False

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode: the FIRST step's observation and info."""
        super().reset(seed=seed)
        if seed is not None and not seed_dm_env(self.dm_env, seed) and not self._unseeded_warned:
            self._unseeded_warned = True
            log.warning("%s has no way to be seeded; seeds are ignored", type(self.dm_env).__name__)
        observation, _, _, _, info = self._convert(self.dm_env.reset())
        return observation, info

    def step(self, action: object) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """One step, with ``action`` cast to the env's action spec."""
        return self._convert(self.dm_env.step(to_dm(action, self.specs.action)))

    def _convert(self, timestep: dm_env.TimeStep) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        observation = to_gym(timestep.observation, self.specs.observation)
        reward = 0.0 if timestep.reward is None else float(np.asarray(timestep.reward).item())
        last = timestep.step_type == dm_env.StepType.LAST
        discount = timestep.discount
        ended_for_good = last and not (discount is not None and float(np.asarray(discount)) > 0)
        info = {"timestep.discount": timestep.discount, "timestep.step_type": timestep.step_type}
        return observation, reward, ended_for_good, last and not ended_for_good, info

    def dm_specs(self) -> DmSpecs:
        """The env's own specs."""
        return self.specs

    def render(self) -> npt.NDArray[np.uint8] | None:
        """A frame of the env's physics, in ``rgb_array`` mode (else None)."""
        if self.render_mode != "rgb_array":
            return None
        frame: npt.NDArray[np.uint8] = self.dm_env.physics.render(**self.render_kwargs)
        return frame

    def close(self) -> None:
        self.dm_env.close()


def as_gymnasium(
    env: object, render_mode: str | None = None, render_kwargs: dict[str, Any] | None = None
) -> DmEnvGym:
    """Host a dm_env env as a ``gymnasium.Env`` (``render_mode``, ``render_kwargs``: as
    :class:`DmEnvGym` takes them).

    Raises:
        ConfigError: ``env`` is not a ``dm_env.Environment``, or cannot be converted.
    """
    if not is_dm_env(env):
        raise ConfigError(f"{type(env).__name__} is not a dm_env.Environment")
    return DmEnvGym(env, render_mode, render_kwargs)
