"""JSON-RPC 2.0, as MCP carries it over OpenEnv's ``/mcp`` route and WebSocket ``mcp``
messages: requests parsed and checked, responses and error responses built. Sans-IO."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from envwire import jsonio

__all__ = ["RpcCode", "RpcRequest", "parse_rpc", "rpc_error", "rpc_result"]


class RpcCode(IntEnum):
    """JSON-RPC 2.0 error codes (and the implementation-defined server error)."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    SERVER_ERROR = -32000


_RPC_DEFAULT_MESSAGES = {
    RpcCode.PARSE_ERROR: "Parse error",
    RpcCode.INVALID_REQUEST: "Invalid Request",
    RpcCode.METHOD_NOT_FOUND: "Method not found",
    RpcCode.INVALID_PARAMS: "Invalid params",
    RpcCode.INTERNAL_ERROR: "Internal error",
    RpcCode.SERVER_ERROR: "Server error",
}


@dataclass(frozen=True, slots=True)
class RpcRequest:
    """A valid JSON-RPC 2.0 request; ``notification`` when it carried no ``id``."""

    method: str
    params: dict[str, Any]
    id: str | int | None
    notification: bool = False


class _RpcModel(BaseModel):
    model_config = ConfigDict(extra="forbid")

    jsonrpc: Literal["2.0"]
    method: str
    params: dict[str, Any] = Field(default_factory=dict)
    id: str | int | None = None


def rpc_result(request_id: str | int | None, result: object) -> dict[str, Any]:
    """A JSON-RPC success response."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def rpc_error(
    request_id: str | int | None, code: RpcCode, text: str | None = None, data: object = None
) -> dict[str, Any]:
    """A JSON-RPC error response (``data`` null unless given, as openenv-core sends it)."""
    error = {"code": int(code), "message": text or _RPC_DEFAULT_MESSAGES[code], "data": data}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def parse_rpc(raw: bytes | str | Any, *, decoded: bool = False) -> RpcRequest | dict[str, Any]:
    """A JSON-RPC request, or the error response that answers a malformed one."""
    if not decoded:
        try:
            raw = jsonio.loads(raw)
        except (ValueError, UnicodeDecodeError, TypeError):
            return rpc_error(None, RpcCode.PARSE_ERROR)
    if not isinstance(raw, dict):
        if not decoded:  # JSON that is not an object is no request at all: openenv-core's code
            return rpc_error(None, RpcCode.PARSE_ERROR)
        return rpc_error(None, RpcCode.INVALID_REQUEST, "Invalid request: not a JSON object")
    try:
        parsed = _RpcModel.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'request'}: {e['msg']}" for e in exc.errors()
        )
        request_id = raw.get("id") if isinstance(raw.get("id"), str | int) else None
        return rpc_error(request_id, RpcCode.INVALID_REQUEST, f"Invalid request: {problems}")
    return RpcRequest(parsed.method, parsed.params, parsed.id, "id" not in raw)
