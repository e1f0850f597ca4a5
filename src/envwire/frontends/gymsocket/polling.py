"""The gym-socket front end's waits for a client's bytes: busy polling while its requests keep
coming, and the time limits of a packet begun and of a silent connection."""

from __future__ import annotations

import math
import threading
import time
from typing import Protocol

from envwire.protocols.gymsocket import ServerConnection
from envwire.sockets import RECV_SIZE, Stream, busy_poll

__all__ = ["Polling", "PollingFront"]


class PollingFront(Protocol):
    """What :class:`Polling` reads of its front end."""

    @property
    def pollers(self) -> threading.BoundedSemaphore: ...

    @property
    def packet_timeout(self) -> float: ...

    @property
    def idle_timeout(self) -> float | None: ...


class Polling:
    """A connection's waits for its client (the base of the front end's connection)."""

    front: PollingFront
    sock: Stream
    codec: ServerConnection
    #: When the command packet in the buffer began to arrive (None: no packet begun).
    packet_began: float | None
    #: Whether the next receive polls first (busy polling: see ``_receive_polled``).
    _poll: bool

    def _mark_packet(self) -> None:
        """Note when the command packet in the buffer began to arrive (it has packet_timeout
        to be whole), or that none is begun."""
        if not self.codec.buffered:
            self.packet_began = None
        elif self.packet_began is None:
            self.packet_began = time.monotonic()

    def _receive_polled(self, window: float) -> bytes:
        """The client's next bytes, polled for up to ``window`` seconds first while its
        requests keep coming within the window and a polling place is free."""
        began = time.perf_counter()
        polled = None
        if self._poll and self.front.pollers.acquire(blocking=False):
            try:
                polled = busy_poll(self._receive, window)
            finally:
                self.front.pollers.release()
        data = self.sock.recv(RECV_SIZE) if polled is None else polled
        self._poll = time.perf_counter() - began <= window
        return data

    def _silent_until(self) -> float:
        """The client fell silent: until when it may stay so (a packet begun: until it must
        be whole; between commands: the idle limit, or for ever)."""
        if self.packet_began is not None:
            return self.packet_began + self.front.packet_timeout
        idle = self.front.idle_timeout
        return math.inf if idle is None else time.monotonic() + idle

    def _receive(self, flags: int) -> bytes:
        return self.sock.recv(RECV_SIZE, flags)
