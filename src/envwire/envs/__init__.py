"""envwire's built-in environments, registered with Gymnasium under ``envwire/...`` ids."""

from __future__ import annotations

import gymnasium

from envwire.envs.catch import CatchEnv

__all__ = ["CatchEnv"]

if "envwire/Catch-v0" not in gymnasium.registry:
    gymnasium.register("envwire/Catch-v0", entry_point="envwire.envs.catch:CatchEnv")
