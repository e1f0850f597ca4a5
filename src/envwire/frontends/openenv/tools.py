"""Tools of envwire's typed envs, as openenv-core words them.

A typed env's :func:`~envwire.kinds.typed.tool` methods are listed as ``{"name",
"description", "input_schema"}`` and called in a record's session; a call's result is
``{"content": [{"type": "text", "text", ...}], "structured_content", "meta", "data",
"is_error"}``. Two consumers: MCP's ``tools/list`` and ``tools/call`` (:mod:`.mcp`), and the
step (:mod:`.steps`), where openenv-core's ``MCPToolClient`` sends ``{"type": "list_tools"}``
and ``{"type": "call_tool", ...}`` actions.
"""

from __future__ import annotations

from typing import Any

from envwire.errors import EnvwireError, InvalidArgumentError
from envwire.frontends.openenv.service import OpenEnvService, Record
from envwire.jsonio import JsonObject
from envwire.protocols.openenv import dumps, jsonable

__all__ = ["UnknownToolError", "call_tool", "listed", "tool_step"]


class UnknownToolError(InvalidArgumentError):
    """A tool call names no tool of the env, or gives it no argument object."""


def listed(spec: dict[str, Any]) -> dict[str, Any]:
    """A tool spec as ``tools/list`` (and ``ListToolsObservation``) lists it."""
    return {
        "name": spec["name"],
        "description": spec["description"],
        "input_schema": spec["inputSchema"],
    }


def call_tool(service: OpenEnvService, record: Record, name: str, arguments: object) -> JsonObject:
    """A typed env's tool called in the record's session, as openenv-core words the result.

    Raises:
        EnvwireError: the tool is unknown, its arguments are not an object, or it failed.
    """
    if not any(spec["name"] == name for spec in record.binding.tools()):
        raise UnknownToolError(f"Unknown tool: {name!r}")
    if not isinstance(arguments, dict):
        raise UnknownToolError(f"tool {name!r}: arguments must be an object")
    value = jsonable(service.extension(record, "call_tool", name, arguments), service.arrays)
    text = value if isinstance(value, str) else dumps(value)
    return {
        "content": [{"type": "text", "text": text, "annotations": None, "meta": None}],
        "structured_content": value if isinstance(value, dict) else {"result": value},
        "meta": None,
        "data": value,
        "is_error": False,
    }


def tool_step(service: OpenEnvService, record: Record, data: dict[str, Any]) -> str | None:
    """openenv-core's MCP actions (``{"type": "list_tools"}``, ``{"type": "call_tool",
    "tool_name", "arguments"}``: what ``MCPToolClient`` sends in its default mode) as a step
    of an envwire typed env with tools: the step payload, as JSON text, with a
    ``ListToolsObservation`` or ``CallToolObservation``. None when ``data`` is no such action
    for this env (OpenEnv's own envs take them as their own actions)."""
    binding = record.binding
    kind = data.get("type")
    if binding.native or kind not in ("list_tools", "call_tool") or not binding.tools():
        return None
    observation: dict[str, Any]
    if kind == "list_tools":
        observation = {"tools": [listed(spec) for spec in binding.tools()]}
    else:
        name = data.get("tool_name")
        observation = {"tool_name": name, "result": None, "error": None}
        try:
            observation["result"] = call_tool(service, record, str(name), data.get("arguments"))
        except UnknownToolError as exc:
            observation["error"] = {"error_type": "tool_not_found", "message": str(exc)}
        except EnvwireError as exc:
            observation["error"] = {"error_type": "execution_error", "message": str(exc)}
    observation["metadata"] = {}
    return dumps({"observation": observation, "reward": None, "done": False})
