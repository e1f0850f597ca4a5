"""The OpenEnv front end: OpenEnv's HTTP routes and WebSocket sessions, as openenv-core 0.3.0
speaks them, mounted on the server's HTTP front end (:mod:`envwire.server.http`).

- :mod:`.service`: OpenEnv sessions over the shared session table;
- :mod:`.bindings` and :mod:`.corebinding`: typed envs, Gymnasium envs and openenv-core's own
  envs on the wire;
- :mod:`.mcp`: MCP (JSON-RPC 2.0), over the service;
- :mod:`.routes`: the HTTP endpoints; :mod:`.openapi`: their OpenAPI document;
- :mod:`.mount`: the mount: routes, WebSocket sessions, the reaper;
- :mod:`.compat`: ``--openenv-compat strict``.
"""

from envwire.frontends.openenv.mount import OpenEnvMount
from envwire.frontends.openenv.routes import error_response, session_tokens

__all__ = ["OpenEnvMount", "error_response", "session_tokens"]
