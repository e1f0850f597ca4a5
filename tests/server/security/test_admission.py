"""The gate of the threaded front ends: refusals, the pending queue, the handshake deadline."""

from __future__ import annotations

import threading
import time

from envwire.errors import CapacityError, EnvwireError
from envwire.server.security.admission import Admission, ConnectionLimits, Ticket


class Recorder:
    def __init__(self, limits: ConnectionLimits) -> None:
        self.started: list[Ticket] = []
        self.refused: list[tuple[object, EnvwireError]] = []
        self.lock = threading.Lock()
        self.admission = Admission(limits, self.start, self.refuse)

    def start(self, ticket: Ticket) -> None:
        with self.lock:
            self.started.append(ticket)

    def refuse(self, sock: object, error: EnvwireError) -> None:
        with self.lock:
            self.refused.append((sock, error))

    def names(self) -> list[object]:
        return [t.sock for t in self.started]


def test_connection_caps_refuse_at_once() -> None:
    rec = Recorder(ConnectionLimits(max_connections=3, per_address=2, max_pending=None))
    for n, address in enumerate(["a", "a", "a", "b", "c"]):
        rec.admission.admit(n, None, address)
    assert rec.names() == [0, 1, 3]
    assert [sock for sock, _ in rec.refused] == [2, 4]
    assert all(isinstance(error, CapacityError) for _, error in rec.refused)
    assert "client a holds 2 connections" in str(rec.refused[0][1])
    assert "at capacity (3 connections)" in str(rec.refused[1][1])
    rec.started[0].end()
    rec.started[0].end()  # idempotent
    rec.admission.admit(5, None, "a")
    assert rec.names()[-1] == 5


def test_pending_slots_queue_in_order_without_threads() -> None:
    limits = ConnectionLimits(max_pending=2, pending_per_address=1, handshake_timeout=30)
    rec = Recorder(limits)
    for n, address in enumerate(["a", "a", "b", "c", "a"]):
        rec.admission.admit(n, None, address)
    assert rec.names() == [0, 2]  # a's second waits for a's slot, c for a free slot
    assert rec.refused == []
    rec.started[1].passed()  # b is through its handshake: c (first that fits) starts
    assert rec.names() == [0, 2, 3]
    rec.started[0].end()  # a's slot frees: a's next in line starts
    assert rec.names() == [0, 2, 3, 1]
    rec.started[3].passed()
    assert rec.names() == [0, 2, 3, 1, 4]
    assert rec.admission.pending.held() == 2
    assert rec.admission.stop() == []


def test_waiting_past_the_queue_timeout_gets_the_capacity_answer() -> None:
    limits = ConnectionLimits(max_pending=1, handshake_timeout=30, queue_timeout=0.3)
    rec = Recorder(limits)
    rec.admission.admit("first", None, "a")
    rec.admission.admit("second", None, "a")
    assert rec.names() == ["first"]
    time.sleep(0.6)
    assert [sock for sock, _ in rec.refused] == ["second"]
    refusal = rec.refused[0][1]
    assert isinstance(refusal, CapacityError) and "the server is busy" in str(refusal)
    assert rec.admission.connections.held() == 1  # the refused one released its connection
    rec.admission.stop()


def test_the_deadline_counts_from_when_reading_starts() -> None:
    """A connection that waited in the queue still gets its whole handshake time."""
    rec = Recorder(ConnectionLimits(max_pending=1, handshake_timeout=0.5, queue_timeout=30))
    rec.admission.admit("first", None, "a")
    rec.admission.admit("second", None, "a")
    first = rec.started[0]
    assert 0.4 < first.remaining() <= 0.5
    time.sleep(0.3)
    first.passed()  # the first handshake is done: the second starts being read now
    second = rec.started[1]
    assert 0.4 < second.remaining() <= 0.5
    time.sleep(0.55)
    assert second.remaining() == 0


def test_stop_hands_back_the_waiting() -> None:
    rec = Recorder(ConnectionLimits(max_pending=1, handshake_timeout=30))
    rec.admission.admit("first", None, "a")
    rec.admission.admit("second", None, "b")
    waiting = rec.admission.stop()
    assert [t.sock for t in waiting] == ["second"]
