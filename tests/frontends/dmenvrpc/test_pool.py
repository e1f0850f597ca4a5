"""The stream threads of the gRPC front end: made as needed, bounded, and given back when idle."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import grpc
import pytest
from dm_env_rpc.v1 import connection as dm_connection
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from dm_env_rpc.v1.error import DmEnvRpcError

from envwire.app import Server
from envwire.client.dmenvrpc.stream import CHANNEL_OPTIONS
from envwire.frontends.dmenvrpc import service
from envwire.frontends.dmenvrpc.service import DmEnvRpcFrontEnd, _DaemonPool
from envwire.registry import Catalog, EnvSpec
from envwire.settings import Settings
from envwire.testing import wait_until


def test_threads_are_bounded_and_idle_ones_exit() -> None:
    pool = _DaemonPool(max_workers=4, idle_seconds=0.2)
    gate = threading.Event()
    started = threading.Semaphore(0)

    def hold() -> str:
        started.release()
        gate.wait(10)
        return "done"

    held = [pool.submit(hold) for _ in range(6)]
    for _ in range(4):
        assert started.acquire(timeout=5)
    assert pool.threads == 4  # the bound: two of the six wait for a thread
    assert not started.acquire(timeout=0.3)
    gate.set()
    assert [future.result(timeout=5) for future in held] == ["done"] * 6
    assert wait_until(lambda: pool.threads == 0, timeout=5)
    # A pool whose threads all left makes new ones for new work.
    assert pool.submit(lambda: 7).result(timeout=5) == 7
    pool.shutdown()


def test_no_work_is_lost_while_threads_retire() -> None:
    """Work submitted just as idle threads time out is always run (the retire/submit race)."""
    pool = _DaemonPool(max_workers=8, idle_seconds=0.001)
    for round_ in range(200):
        futures = [pool.submit(lambda n=n: n * 2) for n in range(round_ % 5 + 1)]
        assert [f.result(timeout=5) for f in futures] == [n * 2 for n in range(len(futures))]
        time.sleep(0.001 * (round_ % 3))
    assert pool.threads <= 8
    pool.shutdown()


@pytest.fixture
def front(monkeypatch: pytest.MonkeyPatch) -> Iterator[DmEnvRpcFrontEnd]:
    monkeypatch.setattr(service, "IDLE_THREAD_SECONDS", 0.5)
    catalog = Catalog([EnvSpec("CartPole-v1", "gym:CartPole-v1")])
    config = Settings.of(gym_socket=None, http=None, grpc=0, monitor_root=None)
    with Server(catalog, config) as server:
        [grpc_front] = server.front_ends
        assert isinstance(grpc_front, DmEnvRpcFrontEnd)
        yield grpc_front


def test_a_burst_of_streams_leaves_no_threads_behind(front: DmEnvRpcFrontEnd) -> None:
    """Twenty streams at once hold twenty threads; once they end, the threads exit."""
    pool = front._pool
    assert pool is not None
    channel = grpc.insecure_channel(f"127.0.0.1:{front.port}", options=CHANNEL_OPTIONS)
    connections = [dm_connection.Connection(channel) for _ in range(20)]
    for conn in connections:  # an error answered in-band: the stream is open, holding a thread
        with pytest.raises(DmEnvRpcError, match="needs the setting"):
            conn.send(pb.CreateWorldRequest())
    assert pool.threads >= 20
    for conn in connections:
        conn.close()
    channel.close()
    assert wait_until(lambda: pool.threads == 0, timeout=10), pool.threads
