"""dm_control's suite by name: ``dm_control/<domain>-<task>`` (``dm_control/cartpole-swingup``).

``envwire serve dm_control/cartpole-swingup`` serves ``dm_control.suite.load("cartpole",
"swingup")``; any name of ``dm_control.suite.ALL_TASKS`` works, with the domain and the task
joined by the first ``-`` (domains have none). The catalog entry's ``kwargs`` are
``suite.load``'s own (``task_kwargs``, ``environment_kwargs``, ``visualize_reward``).

dm_control is an optional extra (``pip install 'envwire[dm-control]'``). On a machine with no
display and no ``MUJOCO_GL`` setting, loading picks ``MUJOCO_GL=egl`` when an EGL library is
installed (rendering without a display), else turns rendering off, instead of letting
dm_control try GLFW, which needs a display. Physics never needs rendering.
"""

from __future__ import annotations

import ctypes.util
import difflib
import os
import types

import dm_env

from envwire.errors import ConfigError
from envwire.optional import requires

__all__ = ["PREFIX", "load", "require", "split_name", "suite_names"]

#: The prefix of dm_control suite names.
PREFIX = "dm_control/"


def _suite() -> types.ModuleType:
    """``dm_control.suite``, imported with a rendering backend that works here.

    Raises:
        ConfigError: dm_control is not installed.
    """
    headless = not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if headless and not os.environ.get("MUJOCO_GL"):
        os.environ["MUJOCO_GL"] = "egl" if ctypes.util.find_library("EGL") else "off"
    with requires("dm-control", "dm_control suite envs"):
        from dm_control import suite
    module: types.ModuleType = suite  # dm_control has no type hints
    return module


def suite_names() -> list[str]:
    """Every suite env, as ``dm_control/<domain>-<task>``.

    Raises:
        ConfigError: dm_control is not installed.
    """
    return [f"{PREFIX}{domain}-{task}" for domain, task in _suite().ALL_TASKS]


def split_name(name: str) -> tuple[str, str]:
    """``dm_control/cartpole-swingup`` -> ``("cartpole", "swingup")``.

    Raises:
        ConfigError: dm_control is not installed, or its suite has no such env (with
            did-you-mean).
    """
    domain, sep, task = name.removeprefix(PREFIX).partition("-")
    known = suite_names()
    if not (name.startswith(PREFIX) and sep and f"{PREFIX}{domain}-{task}" in known):
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = "; did you mean " + " or ".join(map(repr, close)) + "?" if close else ""
        raise ConfigError(
            f"{name!r} is not in dm_control's suite{hint} (names look like "
            f"'{PREFIX}<domain>-<task>', e.g. '{PREFIX}cartpole-swingup')"
        )
    return domain, task


def require() -> None:
    """Check that dm_control's suite can be imported here.

    Raises:
        ConfigError: dm_control is not installed.
    """
    _suite()


def load(name: str, **kwargs: object) -> dm_env.Environment:
    """The suite env called ``name`` (``dm_control/<domain>-<task>``), made by
    ``suite.load`` with ``kwargs``.

    Raises:
        ConfigError: dm_control is not installed, or its suite has no such env.
    """
    domain, task = split_name(name)
    return _suite().load(domain, task, **kwargs)
