"""A minimal hand-written Python server of the original gym-socket protocol (the seed's JSON
path, handshake flags 0), for CartPole-v1, writing exactly the bytes envwire's server writes
for it (:func:`check_same_bytes` compares them before :mod:`bench_original` measures).

It answers what envwire's client sends with flags 0 and nothing else, one connection at a
time: the handshake (flags and the env's name; the reply: an empty error field), the two
space requests (packet 2; the reply: the space's JSON description), the reset (packet 0; the
reply: the observation) and the step (packet 1 with a JSON action; the reply: the
observation, the reward, one done flag and the info, here always ``{}``). An observation is
kind 0 (JSON) and a field holding its text. It steps a real Gymnasium CartPole-v1, made per
connection as envwire makes one per session.

The least Python that does it: the request read with one blocking ``recv_into`` into a
preallocated buffer (a step's 7 bytes come whole), the action read from its one JSON digit,
the reply joined from a fixed header, the observation's JSON text and a fixed tail, and sent
with one ``sendall``. The observation's text is made as envwire's server makes it for a float32
Box: ``repr`` of the array's list, without the spaces (each float as ``float.__repr__``
writes it, as ``json.dumps`` does; CartPole never gives the NaN or infinity that envwire's
server leaves to its JSON encoder). The first reset of each connection is seeded with 0, so
that both servers start from the same state when :func:`check_same_bytes` compares them:
envwire's side of that check is :func:`seeded_cartpole`, served by ``envwire serve``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
from typing import Any, SupportsFloat

import gymnasium

from harness import read_exactly as _read
from harness import serve_forever, spawned_server

__all__ = [
    "SEEDED_ENV",
    "check_same_bytes",
    "minimal_original_server",
    "seed_requests",
    "seeded_cartpole",
]

_U32 = struct.Struct("<I")
_OBS_HEAD = struct.Struct("<BI")  # kind 0 (JSON), the text's length
_STEP_TAIL = struct.Struct("<d?")  # the reward, one done flag
_EMPTY_INFO = _U32.pack(2) + b"{}"
_OK = b"\x00\x00\x00\x00"  # an empty error field: the session is open
_RESET, _STEP, _GET_SPACE = 0, 1, 2

#: The env spec that serves :func:`seeded_cartpole` from ``envwire serve`` (run where this
#: module can be imported: the server's working directory is this one).
SEEDED_ENV = "bench/SeededCartPole-v1=minimal_original:seeded_cartpole@inline"


class _FirstResetSeeded(gymnasium.Wrapper[Any, Any, Any, Any]):
    """An env whose first reset without a seed is seeded with 0."""

    def __init__(self, env: gymnasium.Env[Any, Any]) -> None:
        super().__init__(env)
        self._seed: int | None = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        if seed is None:
            seed, self._seed = self._seed, None
        return self.env.reset(seed=seed, options=options)


def seeded_cartpole() -> gymnasium.Env[Any, Any]:
    """CartPole-v1 whose first reset is seeded with 0, as the minimal server's is."""
    return _FirstResetSeeded(gymnasium.make("CartPole-v1"))


def _space_json(space: Any) -> bytes:
    """A space's description as envwire's server writes it for CartPole's two spaces (a
    Box's bounds clipped to +-1e30, which JSON can carry)."""
    if isinstance(space, gymnasium.spaces.Discrete):
        described: dict[str, Any] = {"type": "Discrete", "n": int(space.n)}
    else:
        bounds = [
            [max(-1e30, min(1e30, value)) for value in array.tolist()]
            for array in (space.low, space.high)
        ]
        described = {"type": "Box", "shape": list(space.shape), "low": bounds[0]}
        described["high"] = bounds[1]
    return json.dumps(described, separators=(",", ":")).encode()


def _step_reply(obs: Any, reward: SupportsFloat, done: bool) -> bytes:
    """A step's reply (the hot path in :func:`_serve` writes the same inline)."""
    text = repr(obs.tolist()).replace(" ", "").encode()
    return b"".join(
        (_OBS_HEAD.pack(0, len(text)), text, _STEP_TAIL.pack(reward, done), _EMPTY_INFO)
    )


def _serve(client: socket.socket) -> None:
    """One connection: the handshake, then space requests, resets and steps until EOF."""
    head = memoryview(bytearray(5))
    if not _read(client, head):
        return
    _read(client, memoryview(bytearray(_U32.unpack_from(head, 1)[0])))  # the name: CartPole
    env = gymnasium.make("CartPole-v1")
    spaces = [_space_json(env.action_space), _space_json(env.observation_space)]
    client.sendall(_OK)
    step, recv_into, sendall = env.step, client.recv_into, client.sendall
    obs_head, tail = _OBS_HEAD.pack, _STEP_TAIL.pack
    buffer = bytearray(256)
    view = memoryview(buffer)
    pending = bytearray()  # requests that came in pieces or together (not a step's usual 7)
    seed: int | None = 0
    while True:
        size = recv_into(view)
        if not size:
            return
        if size == 7 and buffer[0] == _STEP and not pending:  # action type 0, one JSON digit
            obs, reward, terminated, truncated, _ = step(buffer[6] - 48)
            text = repr(obs.tolist()).replace(" ", "").encode()
            sendall(
                b"".join(
                    (
                        obs_head(0, len(text)),
                        text,
                        tail(reward, terminated or truncated),
                        _EMPTY_INFO,
                    )
                )
            )
            continue
        pending += view[:size]
        while pending:  # the general path: whole requests, one at a time
            kind = pending[0]
            if kind == _RESET:
                del pending[:1]
                obs, _ = env.reset(seed=seed)
                seed = None
                text = repr(obs.tolist()).replace(" ", "").encode()
                sendall(obs_head(0, len(text)) + text)
            elif kind == _GET_SPACE and len(pending) >= 2 and pending[1] < 2:
                sendall(_U32.pack(len(spaces[pending[1]])) + spaces[pending[1]])
                del pending[:2]
            elif kind == _STEP and len(pending) >= 6:
                end = 6 + _U32.unpack_from(pending, 2)[0]
                if len(pending) < end:
                    break  # the rest is on its way
                obs, reward, terminated, truncated, _ = step(json.loads(pending[6:end]))
                del pending[:end]
                sendall(_step_reply(obs, reward, terminated or truncated))
            elif (kind == _GET_SPACE and len(pending) < 2) or kind == _STEP:
                break  # the rest is on its way
            else:
                return  # nothing else is served: the connection ends


def _server_main(conn: Any) -> None:
    serve_forever(conn, _serve)


def minimal_original_server() -> contextlib.AbstractContextManager[tuple[int, int]]:
    """The minimal server in a process of its own: yields (port, pid)."""
    return spawned_server(_server_main, (), "minimal original-protocol server")


# --- the check that envwire's server writes the same bytes -----------------------------------


def seed_requests(steps: int) -> list[bytes]:
    """After the handshake: the two space requests, a reset, then ``steps`` steps of actions
    that vary (``1`` twice, then ``0``), as envwire's client writes them."""
    actions = [b"1", b"1", b"0"]
    return [
        bytes([_GET_SPACE, 0]),
        bytes([_GET_SPACE, 1]),
        bytes([_RESET]),
        *[bytes([_STEP, 0]) + _U32.pack(1) + actions[i % 3] for i in range(steps)],
    ]


def _recv(sock: socket.socket, size: int) -> bytes:
    data = bytearray(size)
    if not _read(sock, memoryview(data)):
        raise ConnectionError("the server closed the connection")
    return bytes(data)


def _field(sock: socket.socket) -> bytes:
    head = _recv(sock, 4)
    return head + _recv(sock, _U32.unpack(head)[0])


def _replies(port: int, env_id: str, requests: list[bytes]) -> list[bytes]:
    """A flags-0 session of ``env_id`` on ``port``: the reply to the handshake and to each
    request, read by the seed's layout; after a step whose done flag is set, the next step
    request is preceded by a reset (whose reply is in the list too)."""
    name = env_id.encode()
    with socket.create_connection(("127.0.0.1", port), 30) as sock:
        sock.settimeout(30)
        sock.sendall(b"\x00" + _U32.pack(len(name)) + name)
        replies = [_recv(sock, 4)]
        done = False
        for request in requests:
            if request[0] == _STEP and done:
                sock.sendall(bytes([_RESET]))
                replies.append(_recv(sock, 1) + _field(sock))
            sock.sendall(request)
            if request[0] == _GET_SPACE:
                replies.append(_field(sock))
            elif request[0] == _RESET:
                replies.append(_recv(sock, 1) + _field(sock))
            else:
                reply = _recv(sock, 1) + _field(sock) + _recv(sock, _STEP_TAIL.size)
                done = bool(reply[-1])
                replies.append(reply + _field(sock))
    return replies


def check_same_bytes(
    minimal_port: int,
    envwire_port: int,
    steps: int = 64,
    env_id: str = SEEDED_ENV.partition("=")[0],
) -> int:
    """The minimal server and envwire's (serving ``env_id``: :data:`SEEDED_ENV`) answer the
    same flags-0 session (:func:`seed_requests`, resetting after each episode's end) with the
    same bytes; returns how many replies were compared. Raises AssertionError where they
    differ."""
    requests = seed_requests(steps)
    mine = _replies(minimal_port, "CartPole-v1", requests)
    theirs = _replies(envwire_port, env_id, requests)
    if mine != theirs:
        differ = [i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b]
        first = differ[0] if differ else min(len(mine), len(theirs))
        raise AssertionError(
            f"{len(differ)} of {len(theirs)} replies differ, the first ({first}): "
            f"minimal {mine[first : first + 1]!r}, envwire {theirs[first : first + 1]!r}"
        )
    return len(mine)
