"""OpenEnv (as openenv-core 0.3.0 speaks it): message shapes, codes and validation.

Sans-IO: text and decoded JSON in, typed events and JSON-ready dicts out. The front end
(``envwire.frontends.openenv``) and our client (``envwire.client.openenv``) do the I/O.

WebSocket ``/ws``, one JSON object per text frame, replies in order::

    client  {"type": "reset", "data": {seed, episode_id, ...}}   -> observation
            {"type": "step", "data": {action fields}}            -> observation
            {"type": "state"}                                    -> state
            {"type": "close"}                                    -> (the server closes)
            {"type": "mcp", "data": {JSON-RPC 2.0 request}}      -> mcp
            {"type": "spaces"} / {"type": "sample"}              -> envwire extensions
    server  {"type": "observation", "data": {"observation": {...}, "reward": r, "done": b}}
            {"type": "state", "data": {"episode_id": ..., "step_count": n, ...}}
            {"type": "mcp", "data": {JSON-RPC 2.0 response}}
            {"type": "error", "data": {"message": ..., "code": ErrorCode, ...}}

HTTP bodies follow FastAPI's conventions, as openenv-core's server does: bad input is a 422
whose ``detail`` lists ``{"type", "loc", "msg", "input"}`` entries (``loc`` starts with
``"body"`` for the request body itself, and is the field path for an action's own fields).

The error codes are in :mod:`.status`, JSON data and validation details in :mod:`.jsondata`,
the WebSocket messages in :mod:`.messages` and the HTTP bodies in :mod:`.bodies`.
"""

from envwire.jsonio import dumps
from envwire.protocols.jsonrpc import RpcCode, RpcRequest, parse_rpc, rpc_error, rpc_result
from envwire.protocols.openenv.bodies import (
    BodyError,
    ResetRequest,
    StepRequest,
    parse_reset_body,
    parse_step_body,
    undeclared_body,
)
from envwire.protocols.openenv.jsondata import jsonable, sanitized, validation_detail
from envwire.protocols.openenv.messages import (
    ServerMessage,
    WsClose,
    WsEvent,
    WsInvalid,
    WsMcp,
    WsReset,
    WsSample,
    WsSpaces,
    WsState,
    WsStep,
    error_data,
    error_message,
    message,
    parse_client_message,
    parse_server_message,
    step_data,
    step_result,
)
from envwire.protocols.openenv.status import ERROR_CODES, ERROR_TABLE, ErrorCode, code_of

__all__ = [
    "ERROR_CODES",
    "ERROR_TABLE",
    "BodyError",
    "ErrorCode",
    "ResetRequest",
    "RpcCode",
    "RpcRequest",
    "ServerMessage",
    "StepRequest",
    "WsClose",
    "WsEvent",
    "WsInvalid",
    "WsMcp",
    "WsReset",
    "WsSample",
    "WsSpaces",
    "WsState",
    "WsStep",
    "code_of",
    "dumps",
    "error_data",
    "error_message",
    "jsonable",
    "message",
    "parse_client_message",
    "parse_reset_body",
    "parse_rpc",
    "parse_server_message",
    "parse_step_body",
    "rpc_error",
    "rpc_result",
    "sanitized",
    "step_data",
    "step_result",
    "undeclared_body",
    "validation_detail",
]
