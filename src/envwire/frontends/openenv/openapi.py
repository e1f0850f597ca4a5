"""The OpenAPI document and Swagger UI page of one env's OpenEnv endpoints.

The routes document themselves (an :class:`Operation` per row of the route table,
:mod:`.routes`); this module turns them, with the env's schemas, into the document. Paths are
relative (``/reset``, ``/step``, ...) with the env's prefix as the document's server
URL, so ``openenv validate --url http://host:8000/envs/<id>`` sees the endpoint set of an
OpenEnv server in simulation mode.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from envwire.frontends.openenv.bindings import Binding
from envwire.protocols.openenv import ResetRequest, StepRequest

__all__ = [
    "API_VERSION",
    "SESSION_NOTE",
    "Operation",
    "components",
    "document",
    "operation",
    "swagger_page",
]

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


@dataclass(frozen=True, slots=True)
class Operation:
    """How one route is documented: its tag and summary, the schema of its body (a name of
    :func:`components`' refs, or None) and that of its 200 answer, with the answer's words;
    ``invalid``: it may answer FastAPI's 422."""

    tag: str
    summary: str
    answer: str
    description: str = ""
    body: str | None = None
    body_required: bool = False
    answers: str = "object"
    invalid: bool = False


#: The description of a route that continues an episode.
SESSION_NOTE = (
    "Needs the session that /reset returned: the Envwire-Session header or the "
    "envwire_session cookie."
)

_RESULT = {
    "type": "object",
    "properties": {
        "observation": {"type": "object", "description": "the observation's own fields"},
        "reward": {"anyOf": [{"type": "number"}, {"type": "null"}]},
        "done": {"type": "boolean"},
    },
    "required": ["observation", "reward", "done"],
    "description": "observation fields as in the Observation schema, minus reward/done",
}


def components(binding: Binding) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The document's component schemas for ``binding``'s env, and the refs an
    :class:`Operation` names them by (``ResetRequest``, ``StepRequest``, ``StepResult``,
    ``State``, ``HTTPValidationError`` and ``object``, any JSON object)."""
    schemas: dict[str, Any] = {}
    env_schemas = binding.schema()
    action = _hoisted("Action", env_schemas["action"], schemas)
    observation = _hoisted("Observation", env_schemas["observation"], schemas)
    refs = {"State": _hoisted("State", env_schemas["state"], schemas)}
    refs["ResetRequest"] = _hoisted("ResetRequest", ResetRequest.model_json_schema(), schemas)
    step_request = StepRequest.model_json_schema()
    step_request["properties"]["action"] = action
    refs["StepRequest"] = _hoisted("StepRequest", step_request, schemas)
    refs["StepResult"] = _hoisted("StepResult", _RESULT, schemas)
    schemas["ObservationFields"] = observation
    schemas["HTTPValidationError"] = {
        "type": "object",
        "properties": {"detail": {"type": "array", "items": {"type": "object"}}},
    }
    refs["HTTPValidationError"] = {"$ref": "#/components/schemas/HTTPValidationError"}
    refs["object"] = {"type": "object"}
    return schemas, refs


def operation(op: Operation, refs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One route's entry under its path, its schemas named through ``refs``."""
    out: dict[str, Any] = {"tags": [op.tag], "summary": op.summary}
    if op.description:
        out["description"] = op.description
    if op.body is not None:
        content = {"application/json": {"schema": refs[op.body]}}
        out["requestBody"] = (
            {"required": True, "content": content} if op.body_required else {"content": content}
        )
    responses = {"200": _json(refs[op.answers], op.answer)}
    if op.invalid:
        responses["422"] = _json(refs["HTTPValidationError"], "Validation Error")
    out["responses"] = responses
    return out


def document(
    binding: Binding, prefix: str, routes: Iterable[tuple[str, str, Operation]]
) -> dict[str, Any]:
    """The OpenAPI 3.1 document for ``binding``'s env served under ``prefix``: one entry per
    (path, method, :class:`Operation`) of ``routes``."""
    schemas, refs = components(binding)
    paths: dict[str, dict[str, Any]] = {}
    for path, method, op in routes:
        paths.setdefault(path, {})[method.lower()] = operation(op, refs)
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
