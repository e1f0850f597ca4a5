"""The pydantic base models of typed (OpenEnv-style) environments.

A typed env speaks in three models: its :class:`Action` (what an agent sends), its
:class:`Observation` (what comes back; ``done`` and ``reward`` travel beside the other fields, at
the top level of the wire message) and its :class:`State` (the episode bookkeeping that
``/state`` returns). ``metadata`` fields exist on actions and observations but never travel.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticSerializationError

__all__ = ["Action", "EnvMetadata", "Observation", "State", "wire_fields", "wire_json"]


class Action(BaseModel):
    """Base of every typed action: unknown fields are refused."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, arbitrary_types_allowed=True
    )

    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Free-form data for logs and tracing; never sent back"
    )


class Observation(BaseModel):
    """Base of every typed observation."""

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, arbitrary_types_allowed=True
    )

    done: bool = Field(default=False, description="Whether the episode has ended")
    reward: bool | int | float | None = Field(
        default=None, description="Reward for the last action (None when there is none)"
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Free-form diagnostics; never sent on the wire"
    )


class State(BaseModel):
    """Base of every typed state; subclasses (or instances) may carry extra fields."""

    model_config = ConfigDict(extra="allow", validate_assignment=True, arbitrary_types_allowed=True)

    episode_id: str | None = Field(default=None, description="Identifier of the current episode")
    step_count: int = Field(default=0, ge=0, description="Steps taken in the current episode")


class EnvMetadata(BaseModel):
    """What ``/metadata`` says about an env."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    readme_content: str | None = None
    version: str | None = None
    author: str | None = None
    documentation_url: str | None = None


_NOT_ON_THE_WIRE = frozenset({"done", "reward", "metadata"})


def wire_fields(observation: BaseModel) -> dict[str, Any]:
    """The observation's own fields as JSON data: everything but done, reward and metadata."""
    return observation.model_dump(mode="json", exclude=_NOT_ON_THE_WIRE)  # type: ignore[arg-type]


def wire_json(observation: BaseModel) -> str:
    """:func:`wire_fields` as JSON text, serialised by pydantic in one pass.

    A string holding a lone surrogate (a client's ``"\\ud800"``, echoed by the env) has no UTF-8
    form, so pydantic cannot write it; such an observation is written by :mod:`json` instead,
    with the surrogate as the escape it came in as.
    """
    try:
        return observation.model_dump_json(exclude=_NOT_ON_THE_WIRE)  # type: ignore[arg-type]
    except PydanticSerializationError:
        return json.dumps(wire_fields(observation), separators=(",", ":"))
