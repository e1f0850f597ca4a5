"""OpenEnv's own envs on the wire: the binding of an env hosted by
:class:`~envwire.kinds.openenv_core.gymenv.OpenEnvGymEnv`.

It differs from a typed env's binding where openenv-core's server does:

- reset keywords go to the env as the client sent them (the env's signature filters them);
- an action is validated as openenv-core validates it: ``{"type": "list_tools"}`` and
  ``{"type": "call_tool", ...}`` become openenv-core's MCP actions when the env's Action model
  is the generic base or an MCP action (an ``MCPEnvironment``), anything else is the env's
  Action model;
- HTTP ``/step`` keywords besides the action (``timeout_s``, ``request_id``, extra keys) reach
  an env whose ``step`` accepts them;
- MCP tools are asked of the env itself (its FastMCP server), not listed once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from envwire import messages as m
from envwire.frontends.openenv.bindings import ActionRejected, TypedBinding
from envwire.kinds.openenv_core.appmodule import StepCall
from envwire.kinds.openenv_core.gymenv import OpenEnvSpace
from envwire.protocols.openenv import ResetRequest, validation_detail

__all__ = ["OpenEnvBinding"]


def _mcp_actions() -> tuple[type[BaseModel], dict[str, type[BaseModel]]]:
    """openenv-core's Action base and its MCP actions by ``type`` (imported on first use:
    only OpenEnv envs need openenv-core)."""
    from openenv.core.env_server.mcp_types import CallToolAction, ListToolsAction
    from openenv.core.env_server.types import Action

    return Action, {"list_tools": ListToolsAction, "call_tool": CallToolAction}


class OpenEnvBinding(TypedBinding):
    """An OpenEnv env's wire forms (see the module docstring)."""

    native = True

    def __init__(
        self, env_id: str, action_space: OpenEnvSpace, observation_space: OpenEnvSpace
    ) -> None:
        super().__init__(env_id, action_space, observation_space)
        self.production = action_space.production

    def reset(self, args: ResetRequest) -> tuple[m.Reset, str | None]:
        options = args.model_dump(exclude_unset=True)
        episode_id = options.get("episode_id")
        return m.Reset(seed=None, options=options), episode_id if isinstance(
            episode_id, str
        ) else None

    def action(self, data: dict[str, Any], prefix: tuple[str, ...] = ()) -> BaseModel:
        model: type[BaseModel] = self.action_model
        kind = data.get("type")
        if isinstance(kind, str):
            base, mcp = _mcp_actions()
            if kind in mcp and (model is base or model in mcp.values()):
                model = mcp[kind]
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            detail = validation_detail(exc, prefix)
            raise ActionRejected("Invalid message", detail) from None

    def step_call(self, action: object, kwargs: Mapping[str, Any]) -> object:
        """The step request for an action and the HTTP body's other keywords."""
        if not kwargs:
            return action
        assert isinstance(action, BaseModel)  # made by action(): a model
        return StepCall(action, dict(kwargs))

    def tools(self) -> list[dict[str, Any]]:
        return []
