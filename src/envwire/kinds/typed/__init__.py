"""Typed (OpenEnv-style) environments: pydantic actions, observations and state.

Write an env by subclassing :class:`TypedEnv`; envwire serves it over OpenEnv's HTTP and
WebSocket protocol (``envwire serve my/Env-v0=pkg.mod:MyEnv``) with its JSON Schema on
``/schema``, its :func:`tool` methods on ``/mcp``, and its observations passed through the
``transform`` it was given.
"""

from envwire.kinds.typed.env import RESERVED_TOOL_NAMES, Tool, TypedEnv, tool
from envwire.kinds.typed.gymenv import TypedGymEnv, as_gymnasium, is_typed_env
from envwire.kinds.typed.models import Action, EnvMetadata, Observation, State, wire_fields
from envwire.kinds.typed.transforms import Compose, RewardScaling, Transform
from envwire.spacecodec.modelspace import ModelSpace

__all__ = [
    "RESERVED_TOOL_NAMES",
    "Action",
    "Compose",
    "EnvMetadata",
    "ModelSpace",
    "Observation",
    "RewardScaling",
    "State",
    "Tool",
    "Transform",
    "TypedEnv",
    "TypedGymEnv",
    "as_gymnasium",
    "is_typed_env",
    "tool",
    "wire_fields",
]
