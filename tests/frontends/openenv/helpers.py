"""Importable helpers for the OpenEnv tests (entry points served by test servers)."""

from __future__ import annotations

from typing import Any

from envwire.envs.echo import EchoEnv
from envwire.kinds.typed import RewardScaling


def scaled_echo(**kwargs: Any) -> EchoEnv:
    """The echo env with the OpenEnv guide's reward scaling (reward / 10, clipped to [0, 1])."""
    return EchoEnv(transform=RewardScaling(), **kwargs)


def quick_coding(**kwargs: Any) -> Any:
    """The coding env with a 2-second wall-time limit (hostile-code tests through a server)."""
    from envwire.envs.coding import CodingEnv

    return CodingEnv(wall_time=2.0, **kwargs)
