"""The OpenEnv front end: OpenEnv's HTTP routes and WebSocket sessions, as openenv-core 0.3.0
speaks them, mounted on the server's HTTP front end (:mod:`envwire.server.http`).

- :mod:`.service`: OpenEnv sessions over the shared session table;
- :mod:`.bindings` and :mod:`.corebinding`: typed envs, Gymnasium envs and openenv-core's own
  envs on the wire;
- :mod:`.steps`: the step, which every transport takes; :mod:`.tools`: typed envs' tools;
- :mod:`.mcp`: MCP (JSON-RPC 2.0), over the service;
- :mod:`.routes`: the HTTP route table; :mod:`.httpsessions`: HTTP sessions' tokens;
  :mod:`.answers`: HTTP answers and error statuses; :mod:`.openapi`: the OpenAPI document;
- :mod:`.wsession`: one WebSocket session (``/ws``, ``/mcp``);
- :mod:`.mount`: the mount: routes, WebSocket sessions, the reaper;
- :mod:`.compat`: ``--openenv-compat strict``.
"""

from envwire.frontends.openenv.answers import error_response
from envwire.frontends.openenv.httpsessions import session_tokens
from envwire.frontends.openenv.mount import OpenEnvMount

__all__ = ["OpenEnvMount", "error_response", "session_tokens"]
