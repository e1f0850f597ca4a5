"""The gym-socket front end: one thread per connection, blocking sockets.

- :mod:`.front`: the listener and each connection's loop (handshake, requests, replies);
- :mod:`.polling`: a connection's waits for its client (busy polling, the packet and idle
  limits);
- :mod:`.requests`: the answers to what a client asks for (vector options, Upload).

The sans-IO side is :mod:`envwire.protocols.gymsocket`. See ``docs/protocols/gym-socket.md``.
"""

from envwire.frontends.gymsocket.front import GymSocketFrontEnd

__all__ = ["GymSocketFrontEnd"]
