"""envwire's built-in environments, registered with Gymnasium under ``envwire/...`` ids.

Echo, Connect4 and Coding are typed (OpenEnv-style) envs; their Gymnasium registrations make
them hostable like any other env (see :mod:`envwire.kinds.typed.gymenv`).
"""

from __future__ import annotations

import gymnasium

from envwire.envs.catch import CatchEnv

__all__ = ["CatchEnv"]

if "envwire/Catch-v0" not in gymnasium.registry:
    gymnasium.register("envwire/Catch-v0", entry_point="envwire.envs.catch:CatchEnv")

for _name, _module in (("Echo", "echo"), ("Connect4", "connect4"), ("Coding", "coding")):
    if f"envwire/{_name}-v0" not in gymnasium.registry:
        gymnasium.register(
            f"envwire/{_name}-v0",
            entry_point=f"envwire.envs.{_module}:gymnasium_env",
            disable_env_checker=True,
        )

if "envwire/Nim-v0" not in gymnasium.registry:
    gymnasium.register("envwire/Nim-v0", entry_point="envwire.envs.nim:NimEnv")
