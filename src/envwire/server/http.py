"""The ``http`` front end (``envwire serve --http PORT``): OpenEnv over HTTP and WebSocket.

See :mod:`envwire.server.openenv` and ``docs/openenv.md``.
"""

from envwire.server.openenv.frontend import HttpFrontEnd

__all__ = ["HttpFrontEnd"]
