"""Minimal hand-written Python servers and clients of three more gym-socket cases, each writing
exactly the bytes envwire writes for it (:mod:`bench_minimal` checks that before it measures):

- ``vector``: ``envwire.make_vec(url, 8)`` of CartPole, gym-socket's vector path. The server
  steps Gymnasium's ``SyncVectorEnv`` of 8 CartPoles (its own ``NextStep`` autoreset) and
  writes the reply from fixed headers and the four arrays' bytes; the client sends a fixed
  header and the actions' bytes with one ``sendall``, reads the 272-byte reply with
  ``recv_into`` and copies the four arrays out of it with ``np.frombuffer``.
- ``sb3``: SB3's ``make_vec_env(url, 8)`` of CartPole: a SameStep vector session with the
  ``FINAL_OBS`` flag. The server steps 8 CartPoles in a loop (an ended copy reset in the same
  step) and writes the reply with its final field; the client reads it and makes SB3's step
  of it: float32 rewards, dones, and one info dict per copy (``TimeLimit.truncated``, an
  ended copy's ``terminal_observation``).
- ``frames``: one step of :class:`envwire.testing.envs.FramesEnv` (84x84x4 uint8) over the
  extended path; the client copies the frame out of its reply buffer.

Like the one-step baseline, the servers answer the handshake, the reset and the step and
nothing else, one connection at a time.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np

from envwire.testing.envs import FramesEnv
from harness import read_exactly as _read
from harness import serve_forever, spawned_server

__all__ = [
    "CARTPOLE_VECTOR",
    "FRAMES_REPLY",
    "SB3_FIXED",
    "SB3_N",
    "FramesClient",
    "Sb3Client",
    "VECTOR_N",
    "VECTOR_REPLY",
    "VectorBytes",
    "VectorClient",
    "cartpole_vector",
    "frames_requests",
    "check_requests",
    "minimal_case_server",
    "read_sb3_reply",
    "sb3_requests",
    "sb3_reset_request",
    "read_vector_hello",
    "vector_bytes",
    "vector_requests",
]

_U32 = struct.Struct("<I")
_EMPTY_INFO = _U32.pack(2) + b"{}"
_OK = b"\x00\x00\x00\x00"

# --- the vector step: make_vec(url, 8) of CartPole ------------------------------------------


@dataclass(frozen=True)
class VectorBytes:
    """The fixed bytes of a make_vec session over gym-socket's vector path, NextStep: the
    handshake, the step request's header and the reply's fields, with where each array of the
    reply begins and the replies' sizes."""

    n: int
    hello: bytes
    step_head: bytes
    obs_head: bytes
    rew_head: bytes
    bool_head: bytes
    obs_dtype: np.dtype[Any]
    obs_width: int
    obs_at: int
    rew_at: int
    term_at: int
    trunc_at: int
    reply: int
    reset_reply: int


def vector_bytes(env_id: bytes, n: int, workers: int, obs_dtype: Any, width: int) -> VectorBytes:
    """:class:`VectorBytes` of ``n`` copies of ``env_id`` split over ``workers``, whose
    observations are ``width`` values of ``obs_dtype`` each, and whose actions are int64."""
    flags = 0x0F  # ERRORS | MONITOR_REPLY | EXTENDED | VECTOR: envwire's make_vec's own
    options = json.dumps(
        {"num_envs": n, "autoreset_mode": "NextStep", "workers": workers}, separators=(",", ":")
    ).encode()
    hello = bytes([flags]) + _U32.pack(len(env_id)) + env_id + _U32.pack(len(options)) + options
    dtype = np.dtype(obs_dtype)
    row = dtype.itemsize * width
    # The step request: packet 10, action kind 1 (an array), int64 (code 4), shape (n,). The
    # observations' field: status 0, kind 2 (an array), the dtype's code, shape (n, width).
    step_head = bytes([_VSTEP, 1]) + struct.pack("<IBII", 9 + 8 * n, 4, 1, n)
    code = {np.dtype(np.int64): 4, np.dtype(np.float32): 10}[dtype]
    obs_head = b"\x00\x02" + struct.pack("<IBIII", 13 + row * n, code, 2, n, width)
    rew_head = struct.pack("<IBII", 9 + 8 * n, 11, 1, n)  # float64
    bool_head = struct.pack("<IBII", 9 + n, 0, 1, n)  # bool
    obs_at = len(obs_head)
    rew_at = obs_at + row * n + len(rew_head)
    term_at = rew_at + 8 * n + len(bool_head)
    trunc_at = term_at + n + len(bool_head)
    return VectorBytes(
        n, hello, step_head, obs_head, rew_head, bool_head, dtype, width, obs_at, rew_at,
        term_at, trunc_at, trunc_at + n + len(_EMPTY_INFO), obs_at + row * n + len(_EMPTY_INFO),
    )  # fmt: skip


def read_vector_hello(client: socket.socket) -> dict[str, Any] | None:
    """Read a make_vec handshake (its name and options) and accept it: its options; None when
    the client left first."""
    head = memoryview(bytearray(5))
    if not _read(client, head):
        return None
    rest = bytearray(_U32.unpack_from(head, 1)[0] + 4)  # the name, then the options' length
    _read(client, memoryview(rest))
    options = bytearray(_U32.unpack_from(rest, len(rest) - 4)[0])
    _read(client, memoryview(options))
    client.sendall(_OK)
    return dict(json.loads(options))


_VRESET, _VSTEP = 9, 10
VECTOR_N = 8


def cartpole_vector(n: int = VECTOR_N) -> VectorBytes:
    """:class:`VectorBytes` of ``make_vec(url, n)`` of CartPole."""
    return vector_bytes(b"CartPole-v1", n, 1, np.float32, 4)


CARTPOLE_VECTOR = cartpole_vector()
VECTOR_REPLY = CARTPOLE_VECTOR.reply
# N=8's, for SB3's case
_VSTEP_HEAD = CARTPOLE_VECTOR.step_head
_VOBS_HEAD = CARTPOLE_VECTOR.obs_head
_VREW_HEAD = CARTPOLE_VECTOR.rew_head
_VBOOL_HEAD = CARTPOLE_VECTOR.bool_head
_VECTOR_RESET_REPLY = CARTPOLE_VECTOR.reset_reply
_VOBS_AT, _VREW_AT = CARTPOLE_VECTOR.obs_at, CARTPOLE_VECTOR.rew_at
_VTERM_AT, _VTRUNC_AT = CARTPOLE_VECTOR.term_at, CARTPOLE_VECTOR.trunc_at


def _reset_request(packet: int, seed: int | None) -> bytes:
    options = json.dumps({"seed": seed, "options": None}, separators=(",", ":")).encode()
    return bytes([packet]) + _U32.pack(len(options)) + options


def vector_requests(steps: int, n: int = VECTOR_N) -> list[tuple[bytes, int]]:
    """The handshake, a reset with seed 0 and ``steps`` steps of actions 0 of ``n`` copies,
    with the size of each reply: what both servers must answer alike."""
    layout = cartpole_vector(n)
    step = layout.step_head + np.zeros(n, np.int64).tobytes()
    return [
        (layout.hello, 4),
        (_reset_request(_VRESET, 0), layout.reset_reply),
        *[(step, layout.reply)] * steps,
    ]


def _serve_vector(client: socket.socket) -> None:
    """One make_vec connection of CartPole: the handshake (with its options: the number of
    copies), vector resets and steps."""
    options = read_vector_hello(client)
    if options is None:
        return
    n = int(options["num_envs"])
    envs = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * n)
    at = cartpole_vector(n)
    obs_head, rew_head, bool_head = at.obs_head, at.rew_head, at.bool_head
    header = bytearray(6)
    header_view = memoryview(header)
    body = bytearray(9 + 8 * n)  # a step's action field
    body_view = memoryview(body)
    while _read(client, header_view):
        if header[0] == _VSTEP:
            _read(client, body_view)
            obs, rewards, terminated, truncated, _ = envs.step(np.frombuffer(body, np.int64, n, 9))
            client.sendall(
                b"".join(
                    (
                        obs_head,
                        obs.tobytes(),
                        rew_head,
                        rewards.tobytes(),
                        bool_head,
                        terminated.tobytes(),
                        bool_head,
                        truncated.tobytes(),
                        _EMPTY_INFO,
                    )
                )
            )
        else:  # the reset: its options' JSON, 1 byte of it already read
            rest = bytearray(_U32.unpack_from(header, 1)[0] - 1)
            _read(client, memoryview(rest))
            reset = json.loads(bytes(header[5:]) + rest)
            obs, _ = envs.reset(seed=reset["seed"])
            client.sendall(obs_head + obs.tobytes() + _EMPTY_INFO)


class VectorClient:
    """The baseline make_vec client: one ``sendall`` out, the reply read into one buffer."""

    def __init__(self, port: int, layout: VectorBytes = CARTPOLE_VECTOR) -> None:
        self.layout = layout
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(layout.hello)
        answer = memoryview(bytearray(4))
        if not _read(self.sock, answer) or answer != _OK:
            raise ConnectionError(f"the handshake was refused: {bytes(answer)!r}")
        self.reply = memoryview(bytearray(layout.reply))

    def reset(self, seed: int | None = None) -> np.ndarray[Any, Any]:
        self.sock.sendall(_reset_request(_VRESET, seed))
        at = self.layout
        view = self.reply[: at.reset_reply]
        if not _read(self.sock, view):
            raise ConnectionError("the server closed the connection")
        return (
            np.frombuffer(view, at.obs_dtype, at.obs_width * at.n, at.obs_at)
            .reshape(at.n, -1)
            .copy()
        )

    def step(self, actions: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], ...]:
        at = self.layout
        self.sock.sendall(at.step_head + actions.tobytes())
        reply = self.reply
        if not _read(self.sock, reply):
            raise ConnectionError("the server closed the connection")
        n = at.n
        return (
            np.frombuffer(reply, at.obs_dtype, at.obs_width * n, at.obs_at).reshape(n, -1).copy(),
            np.frombuffer(reply, np.float64, n, at.rew_at).copy(),
            np.frombuffer(reply, np.bool_, n, at.term_at).copy(),
            np.frombuffer(reply, np.bool_, n, at.trunc_at).copy(),
        )

    def close(self) -> None:
        self.sock.close()


# --- SB3's VecEnv N=8: make_vec_env(url, 8) of CartPole, SameStep with FINAL_OBS ----------

SB3_N = VECTOR_N
_SB3_FLAGS = 0x2F  # ERRORS | MONITOR_REPLY | EXTENDED | VECTOR | FINAL_OBS: the SB3 adapter's
_SB3_OPTIONS = json.dumps(
    {"num_envs": SB3_N, "autoreset_mode": "SameStep", "workers": 1}, separators=(",", ":")
).encode()
_SB3_HELLO = (
    bytes([_SB3_FLAGS])
    + _U32.pack(11)
    + b"CartPole-v1"
    + _U32.pack(len(_SB3_OPTIONS))
    + _SB3_OPTIONS
)
#: A step's reply up to its final field's kind byte (0: no copy ended), and the kind-3 field
#: that follows otherwise: the mask's field, then the final observations' kind and field
#: (float32, shape (k, 4)), each header followed by its data.
SB3_FIXED = VECTOR_REPLY + 1
_MASK_HEAD = _VBOOL_HEAD
_FINALS_HEAD = struct.Struct("<BIBIII")  # kind 2, field length, float32, ndim 2, k, 4
_FINAL_TAIL = len(_MASK_HEAD) + SB3_N + _FINALS_HEAD.size


def sb3_reset_request(seed: int) -> bytes:
    """SB3's seeded reset: copy ``i`` gets ``seed + i``."""
    options = json.dumps(
        {"seed": list(range(seed, seed + SB3_N)), "options": None}, separators=(",", ":")
    ).encode()
    return bytes([_VRESET]) + _U32.pack(len(options)) + options


def sb3_requests(steps: int) -> list[tuple[bytes, int | None]]:
    """The handshake, SB3's reset with seed 0 and ``steps`` steps of actions ``i % 2``, with
    the size of each reply (None: a step's, whose size its bytes tell: :func:`read_sb3_reply`)."""
    step = _VSTEP_HEAD + (np.arange(SB3_N) % 2).astype(np.int64).tobytes()
    return [(_SB3_HELLO, 4), (sb3_reset_request(0), _VECTOR_RESET_REPLY), *[(step, None)] * steps]


def read_sb3_reply(sock: socket.socket, reply: memoryview) -> int:
    """Read one step reply into ``reply``: its size (0 at EOF)."""
    if not _read(sock, reply[:SB3_FIXED]):
        return 0
    if not reply[SB3_FIXED - 1]:
        return SB3_FIXED
    if not _read(sock, reply[SB3_FIXED : SB3_FIXED + _FINAL_TAIL]):
        return 0
    k = _FINALS_HEAD.unpack_from(reply, SB3_FIXED + len(_MASK_HEAD) + SB3_N)[4]
    end = SB3_FIXED + _FINAL_TAIL + 16 * k
    return end if _read(sock, reply[SB3_FIXED + _FINAL_TAIL : end]) else 0


def _serve_sb3(client: socket.socket) -> None:
    """One SB3 connection: the handshake, vector resets and SameStep steps of 8 CartPoles,
    stepped in a loop as DummyVecEnv steps them (an ended copy is reset in the same step)."""
    if not read_vector_hello(client):
        return
    envs = [gymnasium.make("CartPole-v1") for _ in range(SB3_N)]
    header = bytearray(6)
    header_view = memoryview(header)
    body = bytearray(9 + 8 * SB3_N)
    body_view = memoryview(body)
    obs = np.zeros((SB3_N, 4), np.float32)
    rewards = np.zeros(SB3_N)
    terminated = np.zeros(SB3_N, bool)
    truncated = np.zeros(SB3_N, bool)
    while _read(client, header_view):
        if header[0] == _VSTEP:
            _read(client, body_view)
            finals = []
            for i, action in enumerate(np.frombuffer(body, np.int64, SB3_N, 9).tolist()):
                ob, rewards[i], terminated[i], truncated[i], _ = envs[i].step(action)
                if terminated[i] or truncated[i]:
                    finals.append(ob)
                    ob, _ = envs[i].reset()
                obs[i] = ob
            ended = b"\x00"
            if finals:
                k = len(finals)
                mask = (terminated | truncated).tobytes()
                final = _FINALS_HEAD.pack(2, 13 + 16 * k, 10, 2, k, 4)
                ended = b"".join((b"\x03", _MASK_HEAD, mask, final, np.stack(finals).tobytes()))
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
                        ended,
                    )
                )
            )
        else:  # the reset: its options' JSON, 1 byte of it already read
            rest = bytearray(_U32.unpack_from(header, 1)[0] - 1)
            _read(client, memoryview(rest))
            seeds = json.loads(bytes(header[5:]) + rest)["seed"]
            for i, env in enumerate(envs):
                obs[i] = env.reset(seed=seeds[i])[0]
            client.sendall(_VOBS_HEAD + obs.tobytes() + _EMPTY_INFO)


class Sb3Client:
    """The baseline SB3 client: one ``sendall`` out, the reply read into one buffer, and SB3's
    step (float32 rewards, dones, one info dict per copy with ``TimeLimit.truncated`` and an
    ended copy's ``terminal_observation``) made from its arrays."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(_SB3_HELLO)
        answer = memoryview(bytearray(4))
        if not _read(self.sock, answer) or answer != _OK:
            raise ConnectionError(f"the handshake was refused: {bytes(answer)!r}")
        self.reply = memoryview(bytearray(SB3_FIXED + _FINAL_TAIL + 16 * SB3_N))
        self.num_envs = SB3_N

    def reset(self, seed: int = 0) -> np.ndarray[Any, Any]:
        self.sock.sendall(sb3_reset_request(seed))
        view = self.reply[:_VECTOR_RESET_REPLY]
        if not _read(self.sock, view):
            raise ConnectionError("the server closed the connection")
        return np.frombuffer(view, np.float32, 4 * SB3_N, _VOBS_AT).reshape(SB3_N, 4).copy()

    def step(self, actions: np.ndarray[Any, Any]) -> tuple[Any, ...]:
        self.sock.sendall(_VSTEP_HEAD + actions.astype(np.int64, copy=False).tobytes())
        reply = self.reply
        if not read_sb3_reply(self.sock, reply):
            raise ConnectionError("the server closed the connection")
        obs = np.frombuffer(reply, np.float32, 4 * SB3_N, _VOBS_AT).reshape(SB3_N, 4).copy()
        rewards = np.frombuffer(reply, np.float64, SB3_N, _VREW_AT).astype(np.float32)
        terminated = np.frombuffer(reply, np.bool_, SB3_N, _VTERM_AT)
        truncated = np.frombuffer(reply, np.bool_, SB3_N, _VTRUNC_AT)
        dones = terminated | truncated
        limits = (truncated & ~terminated).tolist()
        infos = [{"TimeLimit.truncated": limit} for limit in limits]
        if reply[SB3_FIXED - 1]:
            k = _FINALS_HEAD.unpack_from(reply, SB3_FIXED + len(_MASK_HEAD) + SB3_N)[4]
            finals = np.frombuffer(reply, np.float32, 4 * k, SB3_FIXED + _FINAL_TAIL)
            for row, i in zip(
                finals.reshape(k, 4).copy(), dones.nonzero()[0].tolist(), strict=True
            ):
                infos[i]["terminal_observation"] = row
        return obs, rewards, dones, infos

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


# --- the check that both servers write the same bytes ---------------------------------------


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray(size)
    if not _read(sock, memoryview(data)):
        raise ConnectionError("closed")
    return bytes(data)


def check_requests(
    requests: Sequence[tuple[bytes, int | None]], minimal_port: int, port: int
) -> None:
    """Both servers answer ``requests`` (each with the size of its reply; None: an SB3 step's,
    whose bytes tell its size) with the same bytes."""
    replies: list[list[bytes]] = []
    inbox = memoryview(bytearray(4096))
    for each in (minimal_port, port):
        sock = socket.create_connection(("127.0.0.1", each))
        sock.settimeout(30)
        got = []
        for request, size in requests:
            sock.sendall(request)
            if size is None:
                got.append(bytes(inbox[: read_sb3_reply(sock, inbox)]))
            else:
                got.append(_recv_exactly(sock, size))
        sock.close()
        replies.append(got)
    if replies[0] != replies[1]:
        differ = [i for i, (a, b) in enumerate(zip(*replies, strict=True)) if a != b]
        raise AssertionError(f"the replies to requests {differ} differ")


# --- the servers' process -------------------------------------------------------------------

_SERVE = {"vector": _serve_vector, "frames": _serve_frames, "sb3": _serve_sb3}


def _server_main(conn: Any, case: str, pin: int | None) -> None:
    if pin is not None:
        os.sched_setaffinity(0, {pin})
    serve_forever(conn, _SERVE[case])


def minimal_case_server(
    case: str, pin: int | None
) -> contextlib.AbstractContextManager[tuple[int, int]]:
    """The baseline server of ``case`` (``vector``, ``sb3`` or ``frames``) in a process of its own:
    yields (port, pid)."""
    return spawned_server(_server_main, (case, pin), f"minimal {case} server")
