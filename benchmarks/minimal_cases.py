"""Minimal hand-written Python servers and clients of two more gym-socket cases, each writing
exactly the bytes envwire writes for it (:mod:`bench_minimal` checks that before it measures):

- ``vector``: ``envwire.make_vec(url, 8)`` of CartPole, gym-socket's vector path. The server
  steps Gymnasium's ``SyncVectorEnv`` of 8 CartPoles (its own ``NextStep`` autoreset) and
  writes the reply from fixed headers and the four arrays' bytes; the client sends a fixed
  header and the actions' bytes with one ``sendall``, reads the 272-byte reply with
  ``recv_into`` and copies the four arrays out of it with ``np.frombuffer``.
- ``frames``: one step of :class:`envwire.testing.envs.FramesEnv` (84x84x4 uint8) over the
  extended path; the client copies the frame out of its reply buffer.

Like the one-step baseline, the servers answer the handshake, the reset and the step and
nothing else, one connection at a time.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import socket
import struct
from collections.abc import Iterator
from typing import Any

import gymnasium
import numpy as np

from envwire.testing.envs import FramesEnv
from harness import read_exactly as _read

__all__ = [
    "FRAMES_REPLY",
    "FramesClient",
    "VECTOR_N",
    "VECTOR_REPLY",
    "VectorClient",
    "frames_requests",
    "minimal_case_server",
    "vector_requests",
]

_U32 = struct.Struct("<I")
_EMPTY_INFO = _U32.pack(2) + b"{}"
_OK = b"\x00\x00\x00\x00"

# --- the vector step: make_vec(url, 8) of CartPole ------------------------------------------

VECTOR_N = 8
_VECTOR_FLAGS = 0x0F  # ERRORS | MONITOR_REPLY | EXTENDED | VECTOR: envwire's make_vec's own
_VECTOR_OPTIONS = json.dumps(
    {"num_envs": VECTOR_N, "autoreset_mode": "NextStep", "workers": 1}, separators=(",", ":")
).encode()
_VECTOR_HELLO = (
    bytes([_VECTOR_FLAGS])
    + _U32.pack(11)
    + b"CartPole-v1"
    + _U32.pack(len(_VECTOR_OPTIONS))
    + _VECTOR_OPTIONS
)
_VRESET, _VSTEP = 9, 10
#: The step request's header: packet 10, action kind 1 (an array), its field: int64 (code 4),
#: one dimension of 8, then the 64 bytes of the actions.
_VSTEP_HEAD = bytes([_VSTEP, 1]) + struct.pack("<IBII", 9 + 8 * VECTOR_N, 4, 1, VECTOR_N)
#: The observations' field: status 0, kind 2 (an array), float32 (code 10), shape (8, 4).
_VOBS_HEAD = b"\x00\x02" + struct.pack("<IBIII", 13 + 16 * VECTOR_N, 10, 2, VECTOR_N, 4)
_VREW_HEAD = struct.pack("<IBII", 9 + 8 * VECTOR_N, 11, 1, VECTOR_N)  # float64
_VBOOL_HEAD = struct.pack("<IBII", 9 + VECTOR_N, 0, 1, VECTOR_N)  # bool
#: Where each array of the step reply begins, and the reply's size.
_VOBS_AT = len(_VOBS_HEAD)
_VREW_AT = _VOBS_AT + 16 * VECTOR_N + len(_VREW_HEAD)
_VTERM_AT = _VREW_AT + 8 * VECTOR_N + len(_VBOOL_HEAD)
_VTRUNC_AT = _VTERM_AT + VECTOR_N + len(_VBOOL_HEAD)
VECTOR_REPLY = _VTRUNC_AT + VECTOR_N + len(_EMPTY_INFO)
_VECTOR_RESET_REPLY = _VOBS_AT + 16 * VECTOR_N + len(_EMPTY_INFO)


def _reset_request(packet: int, seed: int | None) -> bytes:
    options = json.dumps({"seed": seed, "options": None}, separators=(",", ":")).encode()
    return bytes([packet]) + _U32.pack(len(options)) + options


def vector_requests(steps: int) -> list[tuple[bytes, int]]:
    """The handshake, a reset with seed 0 and ``steps`` steps of actions 0, with the size
    of each reply: what both servers must answer alike."""
    step = _VSTEP_HEAD + np.zeros(VECTOR_N, np.int64).tobytes()
    return [
        (_VECTOR_HELLO, 4),
        (_reset_request(_VRESET, 0), _VECTOR_RESET_REPLY),
        *[(step, VECTOR_REPLY)] * steps,
    ]


def _serve_vector(client: socket.socket) -> None:
    """One make_vec connection: the handshake (with its options), vector resets and steps."""
    head = memoryview(bytearray(5))
    if not _read(client, head):
        return
    rest = bytearray(_U32.unpack_from(head, 1)[0] + 4)  # the name, then the options' length
    _read(client, memoryview(rest))
    _read(client, memoryview(bytearray(_U32.unpack_from(rest, len(rest) - 4)[0])))
    client.sendall(_OK)
    envs = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * VECTOR_N)
    header = bytearray(6)
    header_view = memoryview(header)
    body = bytearray(9 + 8 * VECTOR_N)  # a step's action field
    body_view = memoryview(body)
    while _read(client, header_view):
        if header[0] == _VSTEP:
            _read(client, body_view)
            obs, rewards, terminated, truncated, _ = envs.step(
                np.frombuffer(body, np.int64, VECTOR_N, 9)
            )
            client.sendall(
                b"".join(
                    (
                        _VOBS_HEAD,
                        obs.tobytes(),
                        _VREW_HEAD,
                        rewards.tobytes(),
                        _VBOOL_HEAD,
                        terminated.tobytes(),
                        _VBOOL_HEAD,
                        truncated.tobytes(),
                        _EMPTY_INFO,
                    )
                )
            )
        else:  # the reset: its options' JSON, 1 byte of it already read
            rest = bytearray(_U32.unpack_from(header, 1)[0] - 1)
            _read(client, memoryview(rest))
            options = json.loads(bytes(header[5:]) + rest)
            obs, _ = envs.reset(seed=options["seed"])
            client.sendall(_VOBS_HEAD + obs.tobytes() + _EMPTY_INFO)


class VectorClient:
    """The baseline make_vec client: one ``sendall`` out, the reply read into one buffer."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(_VECTOR_HELLO)
        answer = memoryview(bytearray(4))
        if not _read(self.sock, answer) or answer != _OK:
            raise ConnectionError(f"the handshake was refused: {bytes(answer)!r}")
        self.reply = memoryview(bytearray(VECTOR_REPLY))

    def reset(self, seed: int | None = None) -> np.ndarray[Any, Any]:
        self.sock.sendall(_reset_request(_VRESET, seed))
        view = self.reply[:_VECTOR_RESET_REPLY]
        if not _read(self.sock, view):
            raise ConnectionError("the server closed the connection")
        return np.frombuffer(view, np.float32, 4 * VECTOR_N, _VOBS_AT).reshape(VECTOR_N, 4).copy()

    def step(self, actions: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], ...]:
        self.sock.sendall(_VSTEP_HEAD + actions.tobytes())
        reply = self.reply
        if not _read(self.sock, reply):
            raise ConnectionError("the server closed the connection")
        return (
            np.frombuffer(reply, np.float32, 4 * VECTOR_N, _VOBS_AT).reshape(VECTOR_N, 4).copy(),
            np.frombuffer(reply, np.float64, VECTOR_N, _VREW_AT).copy(),
            np.frombuffer(reply, np.bool_, VECTOR_N, _VTERM_AT).copy(),
            np.frombuffer(reply, np.bool_, VECTOR_N, _VTRUNC_AT).copy(),
        )

    def close(self) -> None:
        self.sock.close()


# --- 84x84x4 uint8 frames, one step ---------------------------------------------------------

_FRAMES_NAME = b"bench/Frames-v0"
_FRAMES_HELLO = bytes([0x07]) + _U32.pack(len(_FRAMES_NAME)) + _FRAMES_NAME
_RESET, _STEP = 7, 8
_SHAPE = (84, 84, 4)
_FRAME = 84 * 84 * 4
#: status 0, kind 1 (uint8 array): its field's length, 3 dimensions, 84, 84, 4.
_FRAME_HEAD = b"\x00\x01" + struct.pack("<IIIII", 16 + _FRAME, 3, *_SHAPE)
_FRAME_AT = len(_FRAME_HEAD)
_TAIL = struct.Struct("<d??")
FRAMES_REPLY = _FRAME_AT + _FRAME + _TAIL.size + len(_EMPTY_INFO)
_FRAMES_RESET_REPLY = _FRAME_AT + _FRAME + len(_EMPTY_INFO)
#: The step request for action 1: packet 8, action type 0 (JSON), "1".
_FRAMES_STEP = bytes([_STEP, 0]) + _U32.pack(1) + b"1"


def frames_requests(steps: int) -> list[tuple[bytes, int]]:
    """The handshake, a reset with seed 0 and ``steps`` steps of action 1, with the size of
    each reply."""
    return [
        (_FRAMES_HELLO, 4),
        (_reset_request(_RESET, 0), _FRAMES_RESET_REPLY),
        *[(_FRAMES_STEP, FRAMES_REPLY)] * steps,
    ]


def _serve_frames(client: socket.socket) -> None:
    """One frames connection: the handshake, extended resets and steps."""
    fixed = memoryview(bytearray(5))
    if not _read(client, fixed):
        return
    _read(client, memoryview(bytearray(_U32.unpack_from(fixed, 1)[0])))
    client.sendall(_OK)
    env = FramesEnv()
    tail = _TAIL.pack
    request = bytearray(7)
    view = memoryview(request)
    while _read(client, view):
        if request[0] == _STEP:  # action type 0, one JSON digit
            obs, reward, terminated, truncated, _ = env.step(np.int64(request[6] - 48))
            client.sendall(
                b"".join((_FRAME_HEAD, obs.data, tail(reward, terminated, truncated), _EMPTY_INFO))
            )
        else:  # the reset: its options' JSON, 2 bytes of it already read
            rest = bytearray(_U32.unpack_from(request, 1)[0] - 2)
            _read(client, memoryview(rest))
            options = json.loads(bytes(request[5:]) + rest)
            obs, _ = env.reset(seed=options["seed"])
            client.sendall(b"".join((_FRAME_HEAD, obs.data, _EMPTY_INFO)))


class FramesClient:
    """The baseline frames client: the step's 7 bytes out, the reply read into one buffer and
    the frame copied out of it."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(_FRAMES_HELLO)
        answer = memoryview(bytearray(4))
        if not _read(self.sock, answer) or answer != _OK:
            raise ConnectionError(f"the handshake was refused: {bytes(answer)!r}")
        self.reply = memoryview(bytearray(FRAMES_REPLY))

    def reset(self) -> np.ndarray[Any, Any]:
        self.sock.sendall(_reset_request(_RESET, None))
        view = self.reply[:_FRAMES_RESET_REPLY]
        if not _read(self.sock, view):
            raise ConnectionError("the server closed the connection")
        return np.frombuffer(view, np.uint8, _FRAME, _FRAME_AT).reshape(_SHAPE).copy()

    def step(self) -> tuple[np.ndarray[Any, Any], float, bool, bool]:
        self.sock.sendall(_FRAMES_STEP)
        reply = self.reply
        if not _read(self.sock, reply):
            raise ConnectionError("the server closed the connection")
        reward, terminated, truncated = _TAIL.unpack_from(reply, _FRAME_AT + _FRAME)
        frame = np.frombuffer(reply, np.uint8, _FRAME, _FRAME_AT).reshape(_SHAPE).copy()
        return frame, reward, terminated, truncated

    def close(self) -> None:
        self.sock.close()


# --- the servers' process -------------------------------------------------------------------

_SERVE = {"vector": _serve_vector, "frames": _serve_frames}


def _server_main(conn: Any, case: str, pin: int | None) -> None:
    if pin is not None:
        os.sched_setaffinity(0, {pin})
    listener = socket.create_server(("127.0.0.1", 0))
    conn.send(listener.getsockname()[1])
    serve = _SERVE[case]
    while True:
        client, _ = listener.accept()
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with client:
            serve(client)


@contextlib.contextmanager
def minimal_case_server(case: str, pin: int | None) -> Iterator[tuple[int, int]]:
    """The baseline server of ``case`` (``vector`` or ``frames``) in a process of its own:
    yields (port, pid)."""
    parent, child = multiprocessing.Pipe()
    ctx = multiprocessing.get_context("spawn")
    process = ctx.Process(target=_server_main, args=(child, case, pin), daemon=True)
    process.start()
    try:
        if not parent.poll(60):
            raise RuntimeError(f"the minimal {case} server did not start")
        assert process.pid is not None
        yield int(parent.recv()), process.pid
    finally:
        process.kill()
        process.join(5)
