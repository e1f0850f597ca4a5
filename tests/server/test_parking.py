"""The thread pool and the parking: idle connections hold no thread, work waits in order,
deadlines close silent connections, a stuck thread's place is given back."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from envwire.server.parking import Parking
from envwire.server.threads import ThreadPool
from envwire.testing import wait_until


class Conn:
    """A parked connection that records what happened to it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.events: list[str] = []
        self.done = threading.Event()

    def fileno(self) -> int:
        return self.sock.fileno()

    def resume(self) -> None:
        self.events.append("resume:" + self.sock.recv(100).decode())
        self.done.set()

    def expire(self) -> None:
        self.events.append("expire")
        self.sock.close()
        self.done.set()


@pytest.fixture
def pool() -> Iterator[ThreadPool]:
    made = ThreadPool(4, idle_seconds=0.2, name="test-pool")
    yield made
    made.stop()


@pytest.fixture
def parking(pool: ThreadPool) -> Iterator[Parking]:
    made = Parking(pool)
    made.start()
    yield made
    made.stop()


def test_work_beyond_the_bound_waits(pool: ThreadPool) -> None:
    release = threading.Event()
    done: list[int] = []
    for n in range(10):
        pool.submit(lambda n=n: (release.wait(10), done.append(n)))
    wait_until(lambda: pool.threads == 4 and pool.waiting == 6, timeout=5)
    release.set()
    wait_until(lambda: len(done) == 10, timeout=5)
    assert pool.threads <= 4


def test_waiting_work_runs_in_arrival_order() -> None:
    pool = ThreadPool(1, idle_seconds=0.2)
    release = threading.Event()
    order: list[int] = []
    pool.submit(lambda: release.wait(10))
    for n in range(20):
        pool.submit(lambda n=n: order.append(n))
    release.set()
    wait_until(lambda: len(order) == 20, timeout=5)
    assert order == list(range(20))
    pool.stop()


def test_idle_threads_exit(pool: ThreadPool) -> None:
    for _ in range(4):
        pool.submit(lambda: time.sleep(0.05))
    wait_until(lambda: pool.threads == 4, timeout=5)
    wait_until(lambda: pool.threads == 0, timeout=5)  # 0.2 s without work each


def test_a_forsaken_thread_gives_its_place_back(pool: ThreadPool) -> None:
    stuck = threading.Event()
    idents: list[int] = []

    def hang() -> None:
        idents.append(threading.get_ident())
        stuck.wait(10)

    for _ in range(4):
        pool.submit(hang)
    ran = threading.Event()
    pool.submit(ran.set)
    wait_until(lambda: len(idents) == 4, timeout=5)
    assert not ran.wait(0.2)  # every thread is stuck
    pool.forsake(idents[0])  # the watchdog gave that thread up
    assert ran.wait(5)
    stuck.set()


def test_a_parked_connection_resumes_when_its_client_sends(parking: Parking) -> None:
    server, client = socket.socketpair()
    conn = Conn(server)
    before = threading.active_count()
    parking.park(conn, time.monotonic() + 30)
    wait_until(lambda: len(parking) == 1, timeout=5)
    assert threading.active_count() == before  # parked: no thread of its own
    client.sendall(b"step")
    assert conn.done.wait(5) and conn.events == ["resume:step"]
    assert len(parking) == 0
    server.close()
    client.close()


def test_a_silent_connection_expires_at_its_deadline(parking: Parking) -> None:
    server, client = socket.socketpair()
    conn = Conn(server)
    parked_at = time.monotonic()
    parking.park(conn, parked_at + 0.3)
    assert conn.done.wait(5) and conn.events == ["expire"]
    assert time.monotonic() - parked_at >= 0.3
    assert client.recv(10) == b""  # closed
    client.close()


def test_a_client_that_hangs_up_resumes_its_connection(parking: Parking) -> None:
    server, client = socket.socketpair()
    conn = Conn(server)
    parking.park(conn, None)
    client.close()
    assert conn.done.wait(5) and conn.events == ["resume:"]  # reads EOF
    server.close()


def test_many_parked_connections_hold_one_thread(parking: Parking) -> None:
    pairs = [socket.socketpair() for _ in range(300)]
    conns = [Conn(server) for server, _ in pairs]
    before = threading.active_count()
    for conn in conns:
        parking.park(conn, time.monotonic() + 60)
    wait_until(lambda: len(parking) == 300, timeout=5)
    assert threading.active_count() <= before
    for _, client in pairs[::3]:
        client.sendall(b"x")
    wait_until(lambda: sum(c.done.is_set() for c in conns) == 100, timeout=10)
    assert len(parking) == 200
    for server, client in pairs:
        server.close()
        client.close()


def test_stopping_expires_every_parked_connection(pool: ThreadPool) -> None:
    parking = Parking(pool)
    parking.start()
    pairs = [socket.socketpair() for _ in range(5)]
    conns = [Conn(server) for server, _ in pairs]
    for conn in conns:
        parking.park(conn, None)
    wait_until(lambda: len(parking) == 5, timeout=5)
    parking.stop()
    assert all(c.events == ["expire"] for c in conns)
    late_server, late_client = socket.socketpair()
    late = Conn(late_server)
    parking.park(late, None)  # after the stop: expired at once
    assert late.done.wait(5) and late.events == ["expire"]
    for _, client in [*pairs, (late_server, late_client)]:
        client.close()


def test_a_reused_descriptor_of_a_closed_connection_does_not_block_a_new_one(
    parking: Parking,
) -> None:
    server, client = socket.socketpair()
    stale = Conn(server)
    parking.park(stale, None)
    wait_until(lambda: len(parking) == 1, timeout=5)
    number = server.fileno()
    server.close()  # closed behind the parking's back (the connection was dropped)
    client.close()
    fresh_pair = socket.socketpair()
    fresh_sock = fresh_pair[0] if fresh_pair[0].fileno() == number else fresh_pair[1]
    other = fresh_pair[1] if fresh_sock is fresh_pair[0] else fresh_pair[0]
    fresh = Conn(fresh_sock)
    parking.park(fresh, None)
    other.sendall(b"hi")
    assert fresh.done.wait(5) and fresh.events == ["resume:hi"]
    fresh_sock.close()
    other.close()


def test_deadlines_of_resumed_connections_do_not_pile_up(parking: Parking) -> None:
    """A connection that parks after every step pushes a deadline an hour away each time;
    behind an idle connection's earlier deadline those entries are never at the heap's top."""
    idle_server, idle_client = socket.socketpair()
    parking.park(Conn(idle_server), time.monotonic() + 3000)
    server, client = socket.socketpair()
    for n in range(2000):
        conn = Conn(server)
        parking.park(conn, time.monotonic() + 3600)
        client.sendall(b"x")
        assert conn.done.wait(5), f"step {n} was not resumed"
    assert len(parking._deadlines) <= 2 * len(parking) + 64 + 1
    for sock in (server, client, idle_server, idle_client):
        sock.close()
