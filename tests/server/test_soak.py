"""A bounded soak: 5,000 connect/step/disconnect cycles over the four front ends of one server.

Every cycle opens a connection, opens a session, steps, and goes away. Afterwards the server
holds no session but the arena agent's unfinished run, and its file descriptors, threads and
resident memory are where they were after the warm-up: nothing a client left behind piles up.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from dm_env_rpc.v1 import connection as dm_connection
from dm_env_rpc.v1 import dm_env_adaptor

from envwire.arena.admin import ArenaAdmin
from envwire.arena.store import Store
from envwire.client.dmenvrpc.stream import CHANNEL_OPTIONS
from envwire.testing import ServerProcess
from tests.rawsock import exact

pytestmark = pytest.mark.slow

CYCLES = 5_000
WARMUP = 1_000
#: Resident memory the server may gain between the warm-up and the end (allocator slack).
RSS_SLACK_KIB = 16 * 1024


def proc_status(pid: int) -> dict[str, int]:
    """The server's resident memory (KiB), threads and open file descriptors."""
    found: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "Threads"):
                found[key] = int(value.split()[0])
    found["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return found


def thread_names(pid: int) -> Counter[str]:
    """The server's threads by kernel name (gRPC's own threads are named; Python's are not)."""
    names: Counter[str] = Counter()
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as comm:
                names[comm.read().strip()] += 1
        except FileNotFoundError:  # the thread ended meanwhile
            pass
    return names


def gym_socket_cycle(port: int) -> None:
    """Handshake (ERRORS flag), Reset, Step 1, close: three pipelined requests."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        name = b"CartPole-v1"
        sock.sendall(b"\x01" + struct.pack("<I", len(name)) + name + b"\x00" + b"\x01\x00")
        sock.sendall(struct.pack("<I", 1) + b"1")
        assert exact(sock, 4) == b"\x00\x00\x00\x00"  # handshake: no error
        for _ in range(2):  # the reset's and the step's observations
            head = exact(sock, 6)
            assert head[0] == 0, head
            exact(sock, struct.unpack_from("<I", head, 2)[0])
        tail = exact(sock, 13)  # reward, done, info length
        info = exact(sock, struct.unpack_from("<I", tail, 9)[0])
        assert info == b"{}"


def _frame(payload: bytes, opcode: int = 1) -> bytes:
    mask = os.urandom(4)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes((0x80 | opcode, 0x80 | len(payload))) + mask + masked


def _read_frame(sock: socket.socket) -> tuple[int, bytes]:
    head = exact(sock, 2)
    size = head[1] & 0x7F
    if size == 126:
        size = struct.unpack("!H", exact(sock, 2))[0]
    return head[0] & 0x0F, exact(sock, size)


def websocket_cycle(port: int) -> None:
    """OpenEnv's WebSocket: reset, step, close handshake."""
    key = base64.b64encode(os.urandom(16)).decode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            f"GET /envs/envwire/Echo-v0/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n\r\n".encode()
            + _frame(b'{"type":"reset"}')
            + _frame(b'{"type":"step","data":{"message":"soak"}}')
        )
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            head += exact(sock, 1)
        assert head.startswith(b"HTTP/1.1 101"), head
        for _ in range(2):
            opcode, data = _read_frame(sock)
            assert opcode == 1 and json.loads(data)["type"] == "observation", data
        sock.sendall(_frame(b"\x03\xe8", opcode=8))
        assert _read_frame(sock)[0] == 8


def http_cycle(port: int) -> None:
    """OpenEnv's stateful HTTP: /reset opens a session, /step continues it, DELETE closes it."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"content-type": "application/json"}
    try:
        conn.request("POST", "/envs/envwire/Echo-v0/reset", b"{}", headers)
        reply = conn.getresponse()
        reply.read()
        session = reply.getheader("envwire-session")
        assert reply.status == 200 and session
        body = b'{"action": {"message": "soak"}}'
        conn.request(
            "POST", "/envs/envwire/Echo-v0/step", body, {**headers, "envwire-session": session}
        )
        reply = conn.getresponse()
        assert reply.status == 200, reply.read()
        reply.read()
        conn.request("DELETE", "/envs/envwire/Echo-v0/session", None, {"envwire-session": session})
        reply = conn.getresponse()
        assert reply.status == 200, reply.read()
        reply.read()
    finally:
        conn.close()


def openenv_cycle(port: int, count: list[int] = [0]) -> None:  # noqa: B006 (a counter)
    """WebSocket and HTTP in turn."""
    count[0] += 1
    (websocket_cycle if count[0] % 2 else http_cycle)(port)


class ArenaAgent:
    """One agent playing Nim through the act endpoint, a new connection per request."""

    def __init__(self, config: dict[str, str]) -> None:
        self.config = config
        self.actions: list[dict[str, Any]] = []

    def __call__(self, port: int) -> None:
        body = {
            "agent": self.config["agent"],
            "pwd": self.config["pwd"],
            "protocol_version": 1,
            "actions": self.actions,
            "parallel_runs": False,
        }
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        try:
            conn.request("PUT", "/act/nim", json.dumps(body), {"content-type": "application/json"})
            response = conn.getresponse()
            reply = json.loads(response.read())
        finally:
            conn.close()
        assert response.status == 200, reply
        self.actions = [
            {"run": r["run"], "act_no": r["act_no"], "action": 1} for r in reply["action_requests"]
        ]
        assert self.actions


def dm_env_rpc_cycle(port: int) -> None:
    """The official client: a channel, create and join a world, step, leave, destroy."""
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=CHANNEL_OPTIONS)
    try:
        with dm_connection.Connection(channel) as conn:
            env, world = dm_env_adaptor.create_and_join_world(conn, {"env": "CartPole-v1"}, {})
            env.reset()
            env.step({"action": 1})
            env.close()
            conn.send(dm_env_adaptor.dm_env_rpc_pb2.DestroyWorldRequest(world_name=world))
    finally:
        channel.close()


def _run(cycles: dict[str, tuple[Callable[[int], None], int]], each: int) -> None:
    """``each`` cycles on every front end, the front ends concurrently."""
    errors: list[BaseException] = []

    def loop(cycle: Callable[[int], None], port: int) -> None:
        try:
            for _ in range(each):
                cycle(port)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=loop, args=pair) for pair in cycles.values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def _sessions(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", "/status")
        return int(json.loads(conn.getresponse().read())["sessions"])
    finally:
        conn.close()


@pytest.mark.timeout(600)
def test_five_thousand_cycles_leave_nothing_behind(tmp_path: Path) -> None:
    db = tmp_path / "arena.sqlite3"
    admin = ArenaAdmin(Store(db))
    admin.create_env("nim", "envwire/Nim-v0", {})
    config = admin.add_agent("nim", "soak")
    admin.store.close()
    envs = ("CartPole-v1", "envwire/Echo-v0", "envwire/Nim-v0")
    args = ("--arena-db", str(db))
    with ServerProcess(envs, args, front_ends=("gym-socket", "http", "grpc")) as server:
        assert server.process is not None
        pid, ports = server.process.pid, server.ports
        cycles = {
            "gym-socket": (gym_socket_cycle, ports["gym-socket"]),
            "openenv": (openenv_cycle, ports["http"]),
            "arena": (ArenaAgent(config), ports["http"]),
            "dm_env_rpc": (dm_env_rpc_cycle, ports["grpc"]),
        }
        _run(cycles, WARMUP // len(cycles))
        # What stays open: the arena agent's unfinished run.
        assert server.wait_for(lambda: _sessions(ports["http"]) <= 1, timeout=30)
        before, names = proc_status(pid), thread_names(pid)
        _run(cycles, (CYCLES - WARMUP) // len(cycles))
        assert server.wait_for(lambda: _sessions(ports["http"]) <= 1, timeout=30)
        assert server.wait_for(lambda: proc_status(pid)["fds"] <= before["fds"], timeout=30)
        # Idle stream threads exit after 10 s, and gRPC's own idle threads after 20 s.
        threads_back = server.wait_for(
            lambda: proc_status(pid)["Threads"] <= before["Threads"], timeout=60
        )
        assert threads_back, (names, thread_names(pid))
        after = proc_status(pid)
        print(f"after {WARMUP} cycles: {before}; after {CYCLES}: {after}")
        assert after["VmRSS"] - before["VmRSS"] < RSS_SLACK_KIB, (before, after)
