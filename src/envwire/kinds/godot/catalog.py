"""Godot games as catalog entries: a launch command, the spaces, the pace and the timeouts.

A :class:`GodotGameSpec` is plain data (it can come from a config file: spaces may be given as
JSON-style descriptions), and :func:`make_godot_env` turns it into a fresh :class:`GodotEnv`
that launches its own game instance, so every session gets its own game::

    spec = GodotGameSpec(
        command=("godot3-server", "--path", "godot/example"),
        action_space={"type": "Discrete", "n": 3},
        observation_space={"type": "Box", "low": -1, "high": 1, "shape": [2]},
    )
    env = make_godot_env(spec)

Space descriptions are :mod:`envwire.spacecodec`'s (``docs/protocols/spaces.md``), e.g.
``{"type": "Discrete", "n": 3}`` or ``{"type": "Box", "low": -1, "high": 1, "shape": [2]}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from envwire.errors import ConfigError, ProtocolError
from envwire.kinds.godot.gymenv import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_REPLY_TIMEOUT,
    DEFAULT_SHUTDOWN_TIMEOUT,
    GodotEnv,
)
from envwire.spacecodec import from_description

__all__ = [
    "GodotGameSpec",
    "SpaceLike",
    "example_spec",
    "godot_game",
    "make_godot_env",
    "space_from_description",
]

SpaceLike = spaces.Space[Any] | Mapping[str, Any]


@dataclass(frozen=True)
class GodotGameSpec:
    """How to launch a Godot game and talk to it.

    Attributes:
        command: the launch command, as arguments or as a string (see
            :class:`~envwire.kinds.godot.GodotEnv`'s ``exe_cmd``); the protocol's contract arguments
            are appended to it.
        action_space: a space, or its description (see the module docstring).
        observation_space: a space, or its description.
        fixed_fps: the game's simulated frames per second (``--fixed-fps``).
        frames_per_step: physics frames per step, sent as ``--framesPerStep=N`` (an extension
            envwire's addon reads); None leaves the game's own setting.
        window_render: False sends ``--disable-render-loop``.
        extra_args: more game arguments, placed before the contract's.
        cwd: the game's working directory.
        host: the address the env listens on (port: always a free one).
        connect_timeout: seconds to wait for the game to connect.
        reply_timeout: seconds to wait for each reply.
        shutdown_timeout: seconds given to the game to quit, before SIGTERM and again before
            SIGKILL.
    """

    command: str | tuple[str, ...]
    action_space: SpaceLike
    observation_space: SpaceLike
    fixed_fps: int = 60
    frames_per_step: int | None = None
    window_render: bool = False
    extra_args: tuple[str, ...] = field(default=())
    cwd: str | None = None
    host: str = "127.0.0.1"
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    reply_timeout: float = DEFAULT_REPLY_TIMEOUT
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT


def make_godot_env(spec: GodotGameSpec, *, render_mode: str | None = None) -> GodotEnv:
    """A new env that launches its own instance of the game ``spec`` describes.

    Raises:
        ConfigError: a bad space description, or the game cannot be started.
        UnsupportedError: a space the protocol cannot carry.
    """
    extra = list(spec.extra_args)
    if spec.frames_per_step is not None:
        extra.append(f"--framesPerStep={spec.frames_per_step}")
    return GodotEnv(
        space_from_description(spec.action_space),
        space_from_description(spec.observation_space),
        spec.command,
        host=spec.host,
        port=0,
        fixed_fps=spec.fixed_fps,
        window_render=spec.window_render,
        extra_args=extra,
        cwd=spec.cwd,
        render_mode=render_mode,
        connect_timeout=spec.connect_timeout,
        reply_timeout=spec.reply_timeout,
        shutdown_timeout=spec.shutdown_timeout,
    )


def example_spec(project_dir: str | Path, godot: str = "godot3-server") -> GodotGameSpec:
    """The spec of the example game in the repository (``godot/example``): 1-D reach-the-target.

    Args:
        project_dir: the example project's directory (holding ``project.godot``).
        godot: the Godot 3 binary (headless: Debian's ``godot3-server``).
    """
    return GodotGameSpec(
        command=(godot, "--path", str(project_dir)),
        action_space=spaces.Discrete(3),
        observation_space=spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32),
    )


def space_from_description(description: SpaceLike) -> spaces.Space[Any]:
    """The space a description stands for (a space is returned as it is).

    Descriptions are those of :func:`envwire.spacecodec.from_description`.

    Raises:
        ConfigError: a malformed description, naming what is wrong.
    """
    if isinstance(description, spaces.Space):
        return description
    try:
        return from_description(dict(description))
    except ProtocolError as exc:
        raise ConfigError(f"bad space description {dict(description)!r}: {exc}") from exc


def godot_game(*, render_mode: str | None = None, **fields: Any) -> GodotEnv:
    """An env entry point for the catalog: the fields of :class:`GodotGameSpec` as plain data
    (a config file's values, checked by :class:`GodotGameSpec` itself).

    So a config file can serve a game through every front end (each session launches its own
    game instance)::

        [[env]]
        id = "godot/Reach-v0"
        entry_point = "envwire.kinds.godot.catalog:godot_game"
        kwargs = { command = ["godot3-server", "--path", "godot/example"],
                   action_space = { type = "Discrete", n = 3 },
                   observation_space = { type = "Box", low = -1, high = 1, shape = [2] } }

    Raises:
        ConfigError: unknown or missing fields, bad space descriptions.
    """
    try:
        command = fields["command"]
        fields["command"] = command if isinstance(command, str) else tuple(command)
        fields["extra_args"] = tuple(fields.get("extra_args", ()))
        spec = GodotGameSpec(**fields)
    except (KeyError, TypeError) as exc:
        raise ConfigError(
            f"a Godot game needs command, action_space, observation_space: {exc}"
        ) from exc
    return make_godot_env(spec, render_mode=render_mode)
