"""Entry points the coding tests serve through ``envwire serve``."""

from __future__ import annotations

from typing import Any

from envwire.envs.coding import CodingEnv

__all__ = ["attack_coding"]


def attack_coding(**kwargs: Any) -> CodingEnv:
    """The coding env with small limits: 5 s, 256 MiB, 4 KiB of output, 8 MiB of disk."""
    return CodingEnv(wall_time=5.0, memory=256 << 20, output=4096, disk=8 << 20, **kwargs)
