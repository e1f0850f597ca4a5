"""The reverse bridge: serve any Gymnasium env to a GymGodot-style Python side.

The bridge plays the game's part of the GymGodot protocol: it connects as the
WebSocket client to ``ws://<serverIP>:<serverPort>/``, answers ``reset``, ``step`` and
``render`` from the env, and exits on ``close``. It accepts the game's command-line contract, so
an original GymGodot Python side can launch it as its game executable::

    python -m envwire.frontends.godot CartPole-v1 --fixed-fps 60 --disable-render-loop \\
        --serverIP=127.0.0.1 --serverPort=8000 --renderPath=./render_frames/

``--fixed-fps`` and ``--disable-render-loop`` are accepted and ignored (the env sets its own
pace). Frames are saved as ``<renderPath><n>.png``, n counting from 0 after each reset, like
GymGodot's games do.

Actions: a Box action goes to the env as it came, bounds unchecked, as a game's
``apply_action`` gets it: the env decides what a value outside the bounds means (Gymnasium's
Pendulum and GymGodot's pendulum game clip it). Discrete, MultiDiscrete and MultiBinary actions
are checked against the space, since an index outside it has no meaning an env could give it.

Every reply has a shape that GymGodot's ``ServerEnv`` reads (it indexes ``init_observation``,
``observation``/``reward``/``done`` and ``render_error``, and nothing else):

- ``{"init_observation": [...]}`` after a reset;
- ``{"observation": [...], "reward": r, "done": b}`` after a step (``done`` = terminated or
  truncated);
- ``{"render_error": "<code>"}`` after a render: ``"0"``, or a Godot error code when the env
  could not render or the frame could not be written;
- a command the bridge could not carry out (an action it cannot decode or that is not in a
  discrete space, an env that raised) gets envwire's ``"error"`` key *beside* a stand-in of
  the awaited reply: after a reset, the observation space's neutral member (zeros, clipped into
  the bounds; a Discrete's ``start``); after a step, the last observation sent with reward
  ``0.0`` and ``done: true`` (the episode cannot be trusted to go on: the agent resets); after
  a render, ``"1"``. The bridge logs the error and keeps serving;
- ``{"error": "..."}`` alone only for a frame that names no known command (malformed JSON, an
  unknown ``cmd``), which no GymGodot Python side sends.

Exit codes (the same as envwire's Godot addon): 0 after close, 2 when the env cannot be made
or served (unknown id, unsupported spaces), 3 when no server could be reached, 4 when the
connection was lost or went idle past ``--idle-timeout``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from PIL import Image
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import ClientConnection, connect

from envwire.errors import EnvwireError, ProtocolError
from envwire.jsonio import JsonValue
from envwire.protocols.godot.messages import (
    CloseCommand,
    Command,
    ErrorReply,
    GameSide,
    GodotError,
    InitObservation,
    RenderCommand,
    RenderResult,
    Reply,
    ResetCommand,
    StandIn,
    StepCommand,
    StepResult,
)
from envwire.protocols.godot.spaces import check_space, from_wire, to_wire
from envwire.spacecodec import check

__all__ = [
    "EXIT_BAD_SETUP",
    "EXIT_CLOSED",
    "EXIT_CONNECTION_LOST",
    "EXIT_NO_SERVER",
    "main",
    "run_bridge",
]

EXIT_CLOSED = 0
EXIT_BAD_SETUP = 2
EXIT_NO_SERVER = 3
EXIT_CONNECTION_LOST = 4

_log = logging.getLogger(__name__)
_RETRY_SECONDS = 0.1


class _Bridge:
    """One env served over one connection."""

    def __init__(self, env: gym.Env[Any, Any], render_path: str) -> None:
        check_space(env.action_space, "action")
        check_space(env.observation_space, "observation")
        self.env = env
        self.render_path = render_path
        self.frame = 0
        # Computed once: it is the stand-in observation of every failed reset.
        self.neutral = to_wire(env.observation_space, _neutral(env.observation_space))
        self.last_observation: list[JsonValue] | None = None

    def answer(self, command: Command) -> Reply:
        """The reply to ``command``; failures become an :class:`ErrorReply` with a stand-in."""
        try:
            match command:
                case ResetCommand(seed=seed):
                    observation, _ = self.env.reset(seed=seed)
                    self.frame = 0
                    wire = to_wire(self.env.observation_space, observation)
                    self.last_observation = wire
                    return InitObservation(wire)
                case StepCommand(action=wire_action):
                    return self._step(wire_action)
                case RenderCommand():
                    return RenderResult(self._render())
        except EnvwireError as exc:
            return self.failure(type(command), str(exc))
        except Exception as exc:  # the env's own code failed: tell the server, keep serving
            _log.exception("the env failed on %s", command)
            return self.failure(type(command), f"the env raised {type(exc).__name__}: {exc}")
        raise AssertionError(f"unhandled command {command!r}")  # pragma: no cover

    def failure(self, command: type[Command] | None, message: str) -> ErrorReply:
        """The error reply to ``command`` (None: a frame that named no command).

        The stand-in keeps the reply readable by Python sides that do not know the ``error``
        key: GymGodot's ``ServerEnv`` would fail with a ``KeyError`` on a bare error.
        """
        _log.error("cannot carry out %s: %s", _COMMAND_NAMES.get(command, "the frame"), message)
        stand_in: StandIn | None = None
        if command is ResetCommand:
            stand_in = InitObservation(self.neutral)
        elif command is StepCommand:
            last = self.neutral if self.last_observation is None else self.last_observation
            stand_in = StepResult(last, 0.0, True)
        elif command is RenderCommand:
            stand_in = RenderResult(GodotError.FAILED)
        return ErrorReply(message, stand_in)

    def _step(self, wire_action: list[JsonValue]) -> Reply:
        space = self.env.action_space
        action = from_wire(space, wire_action, "action")
        if not isinstance(space, spaces.Box):
            check(space, action)  # InvalidActionError: answered with an error reply
        observation, reward, terminated, truncated, _ = self.env.step(action)
        wire = to_wire(self.env.observation_space, observation)
        result = StepResult(wire, float(reward), bool(terminated or truncated))
        self.last_observation = wire
        return result

    def _render(self) -> int:
        try:
            frame = self.env.render()
        except Exception:  # a renderer that cannot run here (no display, missing pygame)
            _log.exception("the env failed to render")
            return GodotError.FAILED
        if not isinstance(frame, np.ndarray):
            _log.warning("the env rendered %s, not an rgb_array frame", type(frame).__name__)
            return GodotError.ERR_UNAVAILABLE
        path = Path(f"{self.render_path}{self.frame}.png")
        self.frame += 1
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(np.asarray(frame, dtype=np.uint8)).save(path, format="PNG")
        except (OSError, TypeError, ValueError):
            _log.exception("cannot save frame %s", path)
            return GodotError.ERR_FILE_CANT_WRITE
        return GodotError.OK


_COMMAND_NAMES: dict[type[Command] | None, str] = {
    ResetCommand: "reset",
    StepCommand: "step",
    RenderCommand: "render",
}
_COMMAND_OF: dict[type[StandIn], type[Command]] = {
    InitObservation: ResetCommand,
    StepResult: StepCommand,
    RenderResult: RenderCommand,
}


def _neutral(space: spaces.Space[Any]) -> object:
    """A fixed member of ``space``: zeros where they are inside it, else the nearest bound."""
    if isinstance(space, spaces.Discrete | spaces.MultiDiscrete):
        return space.start
    assert space.shape is not None  # a Box or MultiBinary, which check_space let through
    zeros = np.zeros(space.shape, np.float64 if space.dtype is None else space.dtype)
    if isinstance(space, spaces.Box):
        return np.clip(zeros, space.low, space.high)
    return zeros  # MultiBinary


def _connect(uri: str, timeout: float) -> ClientConnection | None:
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        try:
            # proxy=None: the server is the local Python side, never behind a proxy.
            return connect(uri, open_timeout=max(remaining, 0.1), proxy=None, compression=None)
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            if remaining <= _RETRY_SECONDS:
                _log.error("no server at %s within %g s: %s", uri, timeout, exc)
                return None
        time.sleep(_RETRY_SECONDS)


def run_bridge(
    env_factory: Callable[[], gym.Env[Any, Any]],
    server_ip: str = "127.0.0.1",
    server_port: int = 8000,
    *,
    render_path: str | Path = "./render_frames/",
    connect_timeout: float = 10.0,
    idle_timeout: float | None = 3600.0,
) -> int:
    """Serve the env ``env_factory()`` makes to the server at ``ws://server_ip:server_port/``.

    Args:
        env_factory: makes the env; called once, before connecting. Give it
            ``render_mode="rgb_array"`` for the render command to save frames.
        server_ip: the server's address (``--serverIP``).
        server_port: the server's port (``--serverPort``).
        render_path: the prefix of frame files (``--renderPath``): a directory ending in ``/``.
        connect_timeout: seconds to keep trying to reach the server.
        idle_timeout: seconds to wait for each command; None waits as long as the server is
            connected.

    Returns:
        The exit code: :data:`EXIT_CLOSED`, :data:`EXIT_NO_SERVER` or
        :data:`EXIT_CONNECTION_LOST`.

    Raises:
        UnsupportedError: the env has a space the protocol cannot carry.
    """
    env = env_factory()
    try:
        bridge = _Bridge(env, str(render_path))
        uri = f"ws://{server_ip}:{server_port}/"
        connection = _connect(uri, connect_timeout)
        if connection is None:
            return EXIT_NO_SERVER
        with connection:
            return _serve(bridge, connection, idle_timeout)
    finally:
        env.close()


def _serve(bridge: _Bridge, connection: ClientConnection, idle_timeout: float | None) -> int:
    codec = GameSide()
    while True:
        try:
            text = connection.recv(timeout=idle_timeout)
        except TimeoutError:
            _log.error("no command from the server within %g s", idle_timeout)
            return EXIT_CONNECTION_LOST
        except ConnectionClosed as exc:
            _log.error("the server closed the connection: %s", exc)
            return EXIT_CONNECTION_LOST
        try:
            command = codec.receive(text)
        except ProtocolError as exc:
            # A frame that named its command still owes that command's reply (codec.awaited).
            awaited = codec.awaited
            reply: Reply = bridge.failure(
                None if awaited is None else _COMMAND_OF[awaited], str(exc)
            )
        else:
            if isinstance(command, CloseCommand):
                return EXIT_CLOSED
            reply = bridge.answer(command)
        try:
            connection.send(codec.send(reply))
        except ConnectionClosed as exc:
            _log.error("the server closed the connection: %s", exc)
            return EXIT_CONNECTION_LOST


def _gymnasium_factory(env_id: str, render_mode: str | None) -> Callable[[], gym.Env[Any, Any]]:
    def factory() -> gym.Env[Any, Any]:
        return gym.make(env_id, render_mode=render_mode)

    return factory


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="envwire godot-bridge",
        description="Serve an env to a GymGodot-style Python side, as a Godot game would.",
    )
    parser.add_argument("env_id", metavar="ENV_ID", help="the env to serve")
    parser.add_argument("--serverIP", default="127.0.0.1", help="the server's address")
    parser.add_argument("--serverPort", type=int, default=8000, help="the server's port")
    parser.add_argument("--renderPath", default="./render_frames/", help="frame file prefix")
    parser.add_argument("--fixed-fps", type=int, default=60, help="accepted, ignored")
    parser.add_argument("--disable-render-loop", action="store_true", help="accepted, ignored")
    parser.add_argument(
        "--render-mode",
        choices=["rgb_array", "none"],
        default="rgb_array",
        help="the env's render mode (default rgb_array; none if the env cannot render)",
    )
    parser.add_argument("--connect-timeout", type=float, default=10.0, help="seconds")
    parser.add_argument(
        "--idle-timeout", type=float, default=3600.0, help="seconds to wait for each command"
    )
    return parser


def main(
    argv: Sequence[str] | None = None,
    make_factory: Callable[[str, str | None], Callable[[], gym.Env[Any, Any]]] = _gymnasium_factory,
) -> int:
    """Run the bridge from the command line; returns the exit code.

    Args:
        argv: the arguments (``sys.argv[1:]`` by default).
        make_factory: turns ``(ENV_ID, render_mode)`` into an env factory; by default
            ``gymnasium.make``. envwire's CLI passes its own registry here.
    """
    args = _parser().parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="envwire godot-bridge: %(message)s")
    render_mode = None if args.render_mode == "none" else args.render_mode
    try:
        return run_bridge(
            make_factory(args.env_id, render_mode),
            args.serverIP,
            args.serverPort,
            render_path=args.renderPath,
            connect_timeout=args.connect_timeout,
            idle_timeout=args.idle_timeout,
        )
    except (gym.error.Error, EnvwireError) as exc:  # unknown env id, unsupported spaces
        _log.error("cannot serve %s: %s", args.env_id, exc)
        return EXIT_BAD_SETUP


if __name__ == "__main__":
    sys.exit(main())
