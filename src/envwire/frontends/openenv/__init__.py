"""The OpenEnv front end: HTTP and WebSocket, as openenv-core 0.3.0 speaks them.

- :mod:`.wire`: HTTP/1.1 and WebSocket over a blocking socket (keep-alive, upgrades, pings),
  with the sans-IO codecs of :mod:`envwire.protocols.http.http11` and
  :mod:`envwire.protocols.http.websocket`;
- :mod:`.service`: OpenEnv sessions over the shared session table, and MCP;
- :mod:`.bindings`: typed envs and Gymnasium envs on the wire;
- :mod:`.routes`: the HTTP endpoints; :mod:`.openapi`: their OpenAPI document;
- :mod:`.frontend`: the listener, the connection threads, the reaper and keepalive timers.
"""

from envwire.frontends.openenv.frontend import Mount, OpenEnvFrontEnd

__all__ = ["Mount", "OpenEnvFrontEnd"]
