"""The OpenAPI document and Swagger UI page of one env's OpenEnv endpoints.

Paths are relative (``/reset``, ``/step``, ...) with the env's prefix as the document's server
URL, so ``openenv validate --url http://host:8000/envs/<id>`` sees the endpoint set of an
OpenEnv server in simulation mode.
"""

from __future__ import annotations

import html
import json
from typing import Any

from envwire.frontends.openenv.bindings import Binding
from envwire.protocols.openenv import ResetRequest, StepRequest

__all__ = ["API_VERSION", "document", "swagger_page"]

#: OpenEnv's runtime API version (``openenv validate`` maps 1.x to "openenv-http/1.x").
API_VERSION = "1.0.0"


def _hoisted(name: str, schema: dict[str, Any], into: dict[str, Any]) -> dict[str, Any]:
    """Move a JSON Schema's ``$defs`` into the components and point its refs there."""
    text = json.dumps(schema).replace('"#/$defs/', '"#/components/schemas/')
    moved: dict[str, Any] = json.loads(text)
    for key, value in moved.pop("$defs", {}).items():
        into.setdefault(key, value)
    into[name] = moved
    return {"$ref": f"#/components/schemas/{name}"}


def _json(ref: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ref}}}


def document(binding: Binding, prefix: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document for ``binding``'s env served under ``prefix``."""
    schemas: dict[str, Any] = {}
    env_schemas = binding.schema()
    action = _hoisted("Action", env_schemas["action"], schemas)
    observation = _hoisted("Observation", env_schemas["observation"], schemas)
    state = _hoisted("State", env_schemas["state"], schemas)
    reset_request = _hoisted("ResetRequest", ResetRequest.model_json_schema(), schemas)
    step_request = StepRequest.model_json_schema()
    step_request["properties"]["action"] = action
    step = _hoisted("StepRequest", step_request, schemas)
    result = _hoisted(
        "StepResult",
        {
            "type": "object",
            "properties": {
                "observation": {"type": "object", "description": "the observation's own fields"},
                "reward": {"anyOf": [{"type": "number"}, {"type": "null"}]},
                "done": {"type": "boolean"},
            },
            "required": ["observation", "reward", "done"],
            "description": "observation fields as in the Observation schema, minus reward/done",
        },
        schemas,
    )
    schemas["ObservationFields"] = observation
    invalid = _json({"$ref": "#/components/schemas/HTTPValidationError"}, "Validation Error")
    schemas["HTTPValidationError"] = {
        "type": "object",
        "properties": {"detail": {"type": "array", "items": {"type": "object"}}},
    }
    session_note = (
        "Needs the session that /reset returned: the Envwire-Session header or the "
        "envwire_session cookie."
    )
    any_json = {"type": "object"}
    paths: dict[str, Any] = {
        "/reset": {
            "post": {
                "tags": ["Environment Control"],
                "summary": "Reset the environment",
                "description": "Starts an episode. Without a session, opens one and returns it "
                "in the Envwire-Session header and the envwire_session cookie.",
                "requestBody": {"content": {"application/json": {"schema": reset_request}}},
                "responses": {"200": _json(result, "The first observation"), "422": invalid},
            }
        },
        "/step": {
            "post": {
                "tags": ["Environment Control"],
                "summary": "Execute an action in the environment",
                "description": session_note,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": step}},
                },
                "responses": {"200": _json(result, "The next observation"), "422": invalid},
            }
        },
        "/state": {
            "get": {
                "tags": ["State Management"],
                "summary": "Get current environment state",
                "description": session_note,
                "responses": {"200": _json(state, "The episode's state")},
            }
        },
        "/metadata": {
            "get": {
                "tags": ["Environment Info"],
                "summary": "Get environment metadata",
                "responses": {"200": _json(any_json, "Name, description, readme, version")},
            }
        },
        "/health": {
            "get": {
                "tags": ["Health"],
                "summary": "Health check",
                "responses": {"200": _json(any_json, '{"status": "healthy"}')},
            }
        },
        "/schema": {
            "get": {
                "tags": ["Schema"],
                "summary": "Get all JSON schemas",
                "responses": {"200": _json(any_json, "action, observation and state schemas")},
            }
        },
        "/mcp": {
            "post": {
                "tags": ["MCP"],
                "summary": "MCP JSON-RPC 2.0 endpoint",
                "description": "tools/list, tools/call, openenv/session/create|close",
                "requestBody": {"content": {"application/json": {"schema": any_json}}},
                "responses": {"200": _json(any_json, "A JSON-RPC 2.0 response")},
            }
        },
        "/session": {
            "post": {
                "tags": ["Sessions (envwire)"],
                "summary": "Open a session without starting an episode",
                "responses": {"200": _json(any_json, "session_id and the env's description")},
            },
            "get": {
                "tags": ["Sessions (envwire)"],
                "summary": "Describe the current session",
                "responses": {"200": _json(any_json, "the session")},
            },
            "delete": {
                "tags": ["Sessions (envwire)"],
                "summary": "Close the current session",
                "responses": {"200": _json(any_json, "closed")},
            },
        },
        "/sample": {
            "post": {
                "tags": ["Sessions (envwire)"],
                "summary": "Sample an action server-side",
                "responses": {"200": _json(any_json, '{"action": ...}')},
            }
        },
    }
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": f"envwire OpenEnv API: {binding.env_id}",
            "version": API_VERSION,
            "description": (
                f"OpenEnv HTTP API of {binding.env_id} ({binding.kind} env), served by envwire. "
                "The WebSocket protocol is at ./ws; HTTP sessions persist across requests."
            ),
        },
        "paths": paths,
        "components": {"schemas": schemas},
    }
    if prefix:
        doc["servers"] = [{"url": prefix}]
    return doc


def swagger_page(env_id: str, prefix: str) -> str:
    """An HTML page that renders the env's OpenAPI document with Swagger UI (from a CDN)."""
    title = html.escape(f"envwire: {env_id}")
    url = json.dumps(f"{prefix}/openapi.json")
    return f"""<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>{title}</title>
<link rel="stylesheet" href="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="https://cdn.jsdelivr.net/npm/swagger-ui-dist@5/swagger-ui-bundle.js"></script>
<script>
window.ui = SwaggerUIBundle({{url: {url}, dom_id: "#swagger-ui", deepLinking: true}});
</script>
</body>
</html>
"""
