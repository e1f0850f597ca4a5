"""gym-socket: a sans-IO codec for both ends of the binary TCP protocol.

Feed received bytes with ``receive_data`` (``b""`` means EOF), take events with
``next_event`` (``NEED_DATA`` when a packet is incomplete), and turn replies or requests into
bytes with ``send_*``. Nothing here touches a socket.

The original wire format is kept byte for byte for clients that send handshake flags 0. The flag
bits are our extensions (documented in ``docs/protocols/gym-socket.md``):

- ``ERRORS`` (0x01): every command gets a reply that starts with a status byte: 0 and the usual
  payload, or 1 and an error string, after which the session goes on.
- ``MONITOR_REPLY`` (0x02): the Monitor packet carries a ``video`` byte after ``force`` and is
  answered with an error string ("" = ok), as the Go client of gym-socket's later revision does.
  Without the flag the server tells the two Monitor layouts apart by their bytes
  (:func:`monitor_has_video`), since that Go client sends flags 0.
- ``EXTENDED`` (0x04): Reset-with-options (packet 7), Step-with-truncation (packet 8), typed
  tensor observations (type 2) and actions (type 1), and envwire's exact space descriptions.
- ``VECTOR`` (0x08): one session of N copies; Reset and Step carry batches (packets 9 and 10).
- ``AUTH`` (0x10): the handshake carries a token, right after the flags byte.
- ``FINAL_OBS`` (0x20): with ``VECTOR``, SameStep's final observations travel as a tensor
  field after a vector step's info instead of inside its JSON (:mod:`.finals`).

The shared wire format is in :mod:`.wire`, the server's end in :mod:`.server`, the client's in
:mod:`.client`.
"""

from envwire.protocols.gymsocket.client import ClientConnection
from envwire.protocols.gymsocket.packets import (
    MAX_FIELD,
    MAX_MONITOR_DIR,
    MONITOR_LAYOUTS,
    NEED_DATA,
    Flags,
    Handshake,
    HandshakeReply,
    Invalid,
    MonitorLayout,
    Packet,
    Upload,
    json_default,
    monitor_has_video,
)
from envwire.protocols.gymsocket.server import ServerConnection

__all__ = [
    "MAX_FIELD",
    "MAX_MONITOR_DIR",
    "MONITOR_LAYOUTS",
    "NEED_DATA",
    "ClientConnection",
    "Flags",
    "Handshake",
    "HandshakeReply",
    "Invalid",
    "MonitorLayout",
    "Packet",
    "ServerConnection",
    "Upload",
    "json_default",
    "monitor_has_video",
]
