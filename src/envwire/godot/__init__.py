"""Godot games as environments, and environments as Godot games (the GymGodot protocol).

- :class:`GodotEnv`: a ``gymnasium.Env`` that launches (or waits for) a Godot game and drives
  it over the protocol; the game side is the GDScript addon in ``godot/addons/envwire``.
- :func:`run_bridge`: the reverse direction: serve any Gymnasium env to a GymGodot-style
  Python side, as a game would.
- :class:`GodotGameSpec` and :func:`make_godot_env`: a Godot game as a catalog entry.

The wire codec is :mod:`envwire.protocols.godot`; see ``docs/godot.md``.
"""

from envwire.godot.bridge import run_bridge
from envwire.godot.catalog import GodotGameSpec, example_spec, make_godot_env
from envwire.godot.env import GodotEnv

__all__ = ["GodotEnv", "GodotGameSpec", "example_spec", "make_godot_env", "run_bridge"]
