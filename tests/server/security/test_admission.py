"""The gate of the threaded front ends: refusals, the pending queue, the handshake deadline."""

from __future__ import annotations

import threading
import time

import pytest

from envwire.errors import CapacityError, EnvwireError
from envwire.server.security import connection_limits
from envwire.server.security.admission import Admission, ConnectionLimits, Ticket
from envwire.settings.sections import SecuritySettings


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


def test_a_token_is_a_principal_counted_by_itself() -> None:
    rec = Recorder(ConnectionLimits(max_connections=10, per_address=2, per_token=3))
    for n in range(2):
        rec.admission.admit(n, None, "nat")
    rec.admission.admit(2, None, "nat")  # the address is full before any token
    assert rec.names() == [0, 1] and [sock for sock, _ in rec.refused] == [2]
    first, second = rec.started
    first.authenticated("token:a")
    second.authenticated("token:a")
    assert first.trusted and second.trusted
    # the address's slots moved to the token: the same address may connect again
    for n in (3, 4):
        rec.admission.admit(n, None, "nat")
    assert rec.names() == [0, 1, 3, 4]
    rec.started[2].authenticated("token:a")  # the token's third connection fits
    with pytest.raises(CapacityError, match="token:a holds 3 connections"):
        rec.started[3].authenticated("token:a")
    assert rec.started[3].principal == "nat"
    first.end()  # released by its principal, not its address
    rec.started[3].authenticated("token:a")
    assert rec.started[3].principal == "token:a"


def test_a_full_front_end_evicts_an_idle_stranger_first() -> None:
    evicted: list[bool] = []
    answers = [True, False]

    def evict() -> bool:
        evicted.append(True)
        answer = answers.pop(0)
        if answer:
            rec.started[0].end()  # what eviction does: closes a connection, which ends it
        return answer

    rec = Recorder(ConnectionLimits(max_connections=2))
    rec.admission._evict = evict
    rec.admission.admit(0, None, "stranger")
    rec.admission.admit(1, None, "stranger")
    rec.admission.admit(2, None, "friend")  # full: a stranger is evicted, the friend admitted
    assert rec.names() == [0, 1, 2] and rec.refused == []
    rec.admission.admit(3, None, "friend")  # full, nobody to evict: the capacity answer
    assert [sock for sock, _ in rec.refused] == [3]
    assert isinstance(rec.refused[0][1], CapacityError)
    assert len(evicted) == 2


def test_loopback_binds_lift_per_address_caps() -> None:
    settings = SecuritySettings()
    local = connection_limits(settings, 1000, "127.0.0.1")
    assert local.per_address is None and local.pending_per_address is None
    assert local.max_connections == 1000 and local.per_token is None
    public = connection_limits(settings, 1000, "0.0.0.0")
    assert public.per_address == 500 and public.pending_per_address == 16
    fixed = connection_limits(
        SecuritySettings(max_connections_per_address=7, max_connections_per_token=9),
        1000,
        "127.0.0.1",
    )
    assert fixed.per_address == 7 and fixed.per_token == 9
    assert local.handshake_timeout == 60 and public.handshake_timeout == 10
    tokens = connection_limits(SecuritySettings(token_file="tokens.txt"), 1000, "127.0.0.1")
    assert tokens.handshake_timeout == 10  # tokens: strangers are expected, the short deadline
    assert connection_limits(SecuritySettings(handshake_timeout=3), 9, "::1").handshake_timeout == 3
