"""MCP (JSON-RPC 2.0) for the OpenEnv front end, answered as openenv-core 0.3.0 answers it.

Methods: ``tools/list``, ``tools/call``, OpenEnv's ``openenv/session/create`` and
``openenv/session/close``, and (envwire extensions, off in strict mode) ``initialize`` and
``ping``. A request runs in the caller's own session (a WebSocket's, or the HTTP MCP session
its ``session_id`` names); without one, in a session opened for that request alone.

- OpenEnv's own envs answer ``tools/list`` and ``tools/call`` themselves (their FastMCP tools,
  through :class:`~envwire.kinds.openenv_core.gymenv.OpenEnvGymEnv`), so the results are the ones
  openenv-core returns: the same objects, turned into JSON the same way.
- envwire's typed envs answer with their :func:`~envwire.kinds.typed.tool` methods, in the same
  shapes (:mod:`.tools`); a tool that fails or is unknown is error ``-32603``.

MCP takes no step: a step action that calls a tool is the step's (:mod:`.steps`).
"""

from __future__ import annotations

from typing import Any

from envwire._version import __version__
from envwire.errors import CapacityError, EnvCapacityError, EnvwireError, UnknownEnvError
from envwire.frontends.openenv.service import OpenEnvService, Record
from envwire.frontends.openenv.tools import call_tool, listed
from envwire.jsonio import JsonObject, JsonValue
from envwire.kinds.openenv_core.gymenv import McpAnswer
from envwire.protocols.openenv import RpcCode, RpcRequest, rpc_error, rpc_result

__all__ = ["answer"]

_NO_MCP = "Environment does not support MCP"


class _Failure(Exception):
    def __init__(self, code: RpcCode, message: str, data: JsonValue = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def answer(
    service: OpenEnvService,
    request: RpcRequest,
    env_id: str,
    record: Record | None = None,
    peer: str = "",
) -> dict[str, Any]:
    """The JSON-RPC response to one request; ``record`` is the caller's own session, if any;
    a session it opens counts against the client address ``peer``."""
    rid = request.id
    try:
        return rpc_result(rid, _result(service, request, env_id, record, peer))
    except _Failure as exc:
        return rpc_error(rid, exc.code, exc.message, exc.data)
    except EnvCapacityError as exc:
        limits = {"active_sessions": exc.active, "max_sessions": exc.limit}
        return rpc_error(rid, RpcCode.SERVER_ERROR, str(exc), limits)
    except CapacityError as exc:
        table = service.table
        data: dict[str, Any] = {"active_sessions": len(table), "max_sessions": table.capacity}
        return rpc_error(rid, RpcCode.SERVER_ERROR, str(exc), data)
    except UnknownEnvError as exc:
        return rpc_error(rid, RpcCode.SERVER_ERROR, str(exc), {"env_id": env_id})
    except EnvwireError as exc:
        return rpc_error(rid, RpcCode.INTERNAL_ERROR, str(exc))


def _result(
    service: OpenEnvService, request: RpcRequest, env_id: str, record: Record | None, peer: str
) -> JsonValue:
    params, method = request.params, request.method
    extensions = service.compat.extensions
    match method:
        case "initialize" if extensions:
            return {
                "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "envwire", "version": __version__},
            }
        case "ping" if extensions:
            return {}
        case "openenv/session/create":
            if record is not None:
                return {"session_id": record.token or record.session.id}
            return {"session_id": service.open(env_id, "mcp", peer).token}
        case "openenv/session/close":
            return _close(service, params, record)
        case "tools/list" | "tools/call":
            return _tools(service, method, params, env_id, record)
    raise _Failure(RpcCode.METHOD_NOT_FOUND, f"Method not found: {method}")


def _close(service: OpenEnvService, params: dict[str, Any], record: Record | None) -> JsonObject:
    token = params.get("session_id")
    if not isinstance(token, str) or not token:
        raise _Failure(RpcCode.INVALID_PARAMS, "Invalid params - 'session_id' is required")
    if record is not None and token in (record.token, record.session.id):
        raise _Failure(
            RpcCode.INVALID_REQUEST, "Cannot close active WebSocket-managed session via MCP method"
        )
    service.close(_find(service, token))
    return {"session_id": token, "closed": True}


def _find(service: OpenEnvService, token: str) -> Record:
    """The HTTP MCP session a ``session_id`` names (``-32602`` if there is none)."""
    record = service.find(token)
    if record is None:
        raise _Failure(RpcCode.INVALID_PARAMS, f"Unknown session_id: {token}")
    return record


def _tools(
    service: OpenEnvService,
    method: str,
    params: dict[str, Any],
    env_id: str,
    record: Record | None,
) -> JsonValue:
    token = params.get("session_id")
    if record is None and isinstance(token, str) and token:
        record = _find(service, token)
    binding = service.binding(env_id) if record is None else record.binding
    if not binding.native:
        return _typed_tools(service, method, params, env_id, record)
    temporary = record is None
    target = service.open(env_id, "mcp", transient=True) if record is None else record
    try:
        answered: McpAnswer = service.extension(target, "mcp", method, dict(params))
    finally:
        if temporary:
            service.close(target)
    if "error" in answered:
        error = answered["error"]
        if method == "tools/list" and error["message"] == _NO_MCP and service.compat.empty_tools:
            return {"tools": []}
        raise _Failure(RpcCode(error["code"]), error["message"])
    return answered["result"]


def _typed_tools(
    service: OpenEnvService,
    method: str,
    params: dict[str, Any],
    env_id: str,
    record: Record | None,
) -> JsonValue:
    """An envwire typed env's tools (a Gymnasium env has none)."""
    binding = service.binding(env_id) if record is None else record.binding
    specs = binding.tools()
    if not specs and not (method == "tools/list" and service.compat.empty_tools):
        raise _Failure(RpcCode.INTERNAL_ERROR, _NO_MCP)
    if method == "tools/list":
        return {"tools": [listed(spec) for spec in specs]}
    name, arguments = params.get("name"), params.get("arguments", {})
    if not isinstance(name, str) or not name:
        raise _Failure(RpcCode.INVALID_PARAMS, "Missing 'name' in params")
    temporary = record is None
    target = service.open(env_id, "mcp", transient=True) if record is None else record
    try:
        return call_tool(service, target, name, arguments)
    except EnvwireError as exc:
        raise _Failure(RpcCode.INTERNAL_ERROR, str(exc)) from None
    finally:
        if temporary:
            service.close(target)
