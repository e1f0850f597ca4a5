"""The gym-socket client: a blocking transport (with request pipelining), opened from a URL.

- :mod:`.sockettransport`: :class:`GymSocketTransport`, one connection to one env (its
  opening, handshake, requests and lean steps);
- :mod:`.urls`: :func:`open_url` and :func:`open_vector_url` (the credentials, and a SameStep
  vector session's fallback for servers from before the FINAL_OBS flag).

The sans-IO side is :mod:`envwire.protocols.gymsocket`. See ``docs/protocols/gym-socket.md``.
"""

from envwire.client.gymsocket.sockettransport import (
    DEFAULT_FLAGS,
    DEFAULT_PORT,
    GymSocketTransport,
)
from envwire.client.gymsocket.urls import open_url, open_vector_url

__all__ = ["DEFAULT_FLAGS", "DEFAULT_PORT", "GymSocketTransport", "open_url", "open_vector_url"]
