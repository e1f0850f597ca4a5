"""The Godot exchange over WebSocket: envwire's own server stack beside ``websockets``' threading
server, driven by the same client.

Run: ``python benchmarks/bench_websocket.py [--seconds S] [--runs R] [--quick]``.

The exchange is GymGodot's: the Python side is the WebSocket server and sends a command, the
game (the WebSocket client) answers it; one small JSON text message each way, one at a time.
The game is ``websockets``' sync client in a process of its own, which sends a prebuilt step
reply for every command it reads: the same client, doing the same work, for every server.
This process is the server side and counts round trips (a command sent, its reply read):

- ``websockets``: ``websockets.sync.server.serve`` holding the game's connection in its handler
  thread, ``send`` then ``recv(timeout=...)`` from this thread (the way envwire's game server
  used it: no compression, a 5 s opening handshake), the baseline;
- ``envwire``: envwire's game server, :class:`envwire.kinds.godot.gameserver.GameServer`, on
  envwire's own stack (the handshake of :mod:`envwire.sockets.websocket`, then a blocking
  ``WebSocketChannel`` over the sans-IO framing of :mod:`envwire.protocols.http.websocket`),
  ``send`` then ``recv(timeout)`` from this thread, as ``GodotEnv`` does;
- ``echo``: the plain blocking TCP loop of :class:`harness.EchoServer` carrying the same frame
  sizes (the command's unmasked frame out, the reply's masked frame back): the floor for any
  Python stack.

All three in alternating rounds; a ratio is the median of the rounds' own ratios, with their
spread. Also printed: this process's CPU time per round trip for each server (every thread of
it: ``websockets`` reads in a thread of its own).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.sync.server import ServerConnection, serve

from envwire.kinds.godot.gameserver import GameServer
from envwire.protocols.godot.messages import StepCommand, StepResult, encode_command, encode_reply
from harness import (
    EchoServer,
    Result,
    alternate,
    compare,
    echo_rate,
    machine,
    parse_settings,
    print_table,
    rate,
)

#: What GodotEnv sends for a step of a Discrete action, and what a game with a small Box
#: observation answers (the example project's shape: position and target, a reward, done).
COMMAND = encode_command(StepCommand([1]))
REPLY = encode_reply(StepResult([0.05000000074505806, -0.6000000238418579], 0.05, False))
#: Seconds each wait may take before the benchmark gives up (never reached on a working run).
WAIT = 10.0


def _game_main(port: int, reply: str) -> None:
    """The game: connect, then answer every command with ``reply`` until the server closes."""
    from websockets.sync.client import connect

    with connect(f"ws://127.0.0.1:{port}/", proxy=None, compression=None) as ws:
        while True:
            try:
                ws.recv()
                ws.send(reply)
            except ConnectionClosed:
                return


@contextlib.contextmanager
def game(port: int) -> Iterator[None]:
    """The game's process, connected to ``port`` (killed on exit)."""
    ctx = multiprocessing.get_context("spawn")
    process = ctx.Process(target=_game_main, args=(port, REPLY), daemon=True)
    process.start()
    try:
        yield
    finally:
        process.kill()
        process.join(5)


class WebsocketsServer:
    """A game server on ``websockets.sync.server``, as envwire's was before: the handler thread
    hands the connection over and holds it open; the caller sends and receives."""

    def __init__(self) -> None:
        self._arrivals: queue.Queue[ServerConnection] = queue.Queue()
        self._released = threading.Event()
        self._server = serve(self._handle, "127.0.0.1", 0, compression=None, open_timeout=5.0)
        self.port: int = self._server.socket.getsockname()[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.connection: ServerConnection | None = None

    def _handle(self, connection: ServerConnection) -> None:
        self._arrivals.put(connection)
        self._released.wait()

    def accept(self, timeout: float) -> None:
        self.connection = self._arrivals.get(timeout=timeout)

    def round_trip(self) -> None:
        assert self.connection is not None
        self.connection.send(COMMAND)
        self.connection.recv(timeout=WAIT)

    def close(self) -> None:
        self._released.set()
        self._server.shutdown()
        self._thread.join(WAIT)


def _measured(
    round_trip: Callable[[], Any], seconds: float, cpu: list[float]
) -> Callable[[], float]:
    """Round trips/s over ``seconds``; appends this process's CPU µs per round trip to ``cpu``."""

    def measure() -> float:
        began, used = time.perf_counter(), time.process_time()
        trips = rate(round_trip, seconds)
        cpu.append(1e6 * (time.process_time() - used) / (trips * (time.perf_counter() - began)))
        return trips

    return measure


def _frame_sizes() -> tuple[int, int]:
    """The bytes of the command's server frame and of the reply's (masked) client frame."""
    command, reply = len(COMMAND.encode()), len(REPLY.encode())
    assert command < 126 and reply < 126, "the frames are small: a 2-byte header each way"
    return 2 + command, 2 + 4 + reply


def main() -> None:
    _, settings = parse_settings(__doc__ or "")
    s = settings.seconds
    names = {
        "echo": "echo: the same frame bytes over plain TCP",
        "websockets": "websockets.sync.server, Godot step round trip",
        "envwire": "envwire GameServer, Godot step round trip",
    }
    cpu: dict[str, list[float]] = {"websockets": [], "envwire": []}
    sizes = _frame_sizes()
    theirs = WebsocketsServer()
    ours = GameServer("127.0.0.1", 0)
    try:
        with EchoServer() as echo, game(theirs.port), game(ours.port):
            theirs.accept(WAIT)
            ours.accept(WAIT, lambda: None)

            def our_round_trip() -> None:
                ours.send(COMMAND)
                ours.recv(WAIT)

            cases = {
                names["echo"]: lambda: echo_rate(echo.port, *sizes, s),
                names["websockets"]: _measured(theirs.round_trip, s, cpu["websockets"]),
                names["envwire"]: _measured(our_round_trip, s, cpu["envwire"]),
            }
            values = alternate(cases, settings.runs)
    finally:
        ours.close(WAIT)
        theirs.close()
    notes = {"command_frame_bytes": sizes[0], "reply_frame_bytes": sizes[1]}
    results: list[Result] = [
        compare(values, names["echo"], unit="round trips/s", notes=notes),
        compare(values, names["websockets"], names["echo"], unit="round trips/s"),
        compare(values, names["envwire"], names["echo"], unit="round trips/s"),
        compare(
            values,
            names["envwire"],
            names["websockets"],
            unit="round trips/s",
            label=f"{names['envwire']}, over websockets",
        ),
    ]
    for key in ("websockets", "envwire"):
        median_cpu = sorted(cpu[key])[len(cpu[key]) // 2]
        results.append(Result(f"server CPU per round trip, {names[key]}", median_cpu, "us"))
    print_table({"results": [vars(r) for r in results], "machine": machine()})


if __name__ == "__main__":
    main()
