"""A game made in Godot as an environment (the GymGodot protocol).

- :class:`GodotEnv`: a ``gymnasium.Env`` that launches (or waits for) a Godot game and drives
  it over the protocol; the game side is the GDScript addon in ``godot/addons/envwire``.
- :class:`GodotGameSpec` and :func:`make_godot_env`: a Godot game as a catalog entry.

The reverse direction, any env served to a GymGodot-style Python side as a game would, is the
Godot front end, :mod:`envwire.frontends.godot`. The wire codec is
:mod:`envwire.protocols.godot`; see ``docs/protocols/godot.md``.
"""

from envwire.kinds.godot.catalog import GodotGameSpec, example_spec, make_godot_env
from envwire.kinds.godot.gymenv import GodotEnv

__all__ = ["GodotEnv", "GodotGameSpec", "example_spec", "make_godot_env"]
