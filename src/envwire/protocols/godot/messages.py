"""Sans-IO codec of the GymGodot protocol: JSON text frames over a WebSocket.

Two roles, each with a small state machine:

- :class:`GymSide`, the Python side (the WebSocket *server*), sends commands and reads replies;
- :class:`GameSide`, the game side (the WebSocket *client*: a Godot game, or envwire's reverse
  bridge), reads commands and sends replies.

Messages, one JSON object per text frame::

    {"cmd": "reset"}                    -> {"init_observation": [...]}
    {"cmd": "step", "action": [...]}    -> {"observation": [...], "reward": r, "done": b}
    {"cmd": "render"}                   -> {"render_error": "0"}    (a Godot error code)
    {"cmd": "close"}                    -> no reply; the game quits

envwire's extensions, both ignored by GymGodot-style games: ``{"cmd": "reset", "seed": n}``
seeds the game before the reset, and ``{"error": "..."}`` is a reply to any command the game
could not carry out (unknown cmd, malformed JSON, a failing env) instead of silence. An error
reply may carry a *stand-in* beside ``error``: the keys of the reply the command awaits
(``{"observation": [...], "reward": 0.0, "done": true, "error": "..."}``), because a Python
side that does not know the extension (GymGodot's ``ServerEnv``) reads those keys and nothing
else, and fails on a reply without them.

Samples travel as JSON lists (see :mod:`envwire.protocols.godot.spaces`). Nothing here does I/O.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Final, TypeGuard

from envwire import jsonio
from envwire.errors import InvalidArgumentError, ProtocolError, StateError
from envwire.jsonio import JsonObject, JsonValue

__all__ = [
    "CloseCommand",
    "Command",
    "ErrorReply",
    "GameSide",
    "GodotError",
    "GymSide",
    "InitObservation",
    "Phase",
    "RenderCommand",
    "RenderResult",
    "Reply",
    "ResetCommand",
    "StandIn",
    "StepCommand",
    "StepResult",
    "decode_command",
    "decode_reply",
    "encode_command",
    "encode_reply",
    "godot_error_name",
]


class GodotError(IntEnum):
    """The first codes of Godot 3's ``Error`` enum, as ``render_error`` carries them."""

    OK = 0
    FAILED = 1
    ERR_UNAVAILABLE = 2
    ERR_UNCONFIGURED = 3
    ERR_UNAUTHORIZED = 4
    ERR_PARAMETER_RANGE_ERROR = 5
    ERR_OUT_OF_MEMORY = 6
    ERR_FILE_NOT_FOUND = 7
    ERR_FILE_BAD_DRIVE = 8
    ERR_FILE_BAD_PATH = 9
    ERR_FILE_NO_PERMISSION = 10
    ERR_FILE_ALREADY_IN_USE = 11
    ERR_FILE_CANT_OPEN = 12
    ERR_FILE_CANT_WRITE = 13
    ERR_FILE_CANT_READ = 14


def godot_error_name(code: int) -> str:
    """``"ERR_FILE_CANT_WRITE (13)"`` for a known Godot error code, ``"error 42"`` otherwise."""
    try:
        return f"{GodotError(code).name} ({code})"
    except ValueError:
        return f"error {code}"


# --- messages -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResetCommand:
    """Start a new episode. ``seed`` is envwire's extension; None sends the original form."""

    seed: int | None = None


@dataclass(frozen=True, slots=True)
class StepCommand:
    """Run one step with ``action``, the action in its wire form (a JSON list)."""

    action: list[JsonValue]


@dataclass(frozen=True, slots=True)
class RenderCommand:
    """Save a frame as a PNG under the game's render path."""


@dataclass(frozen=True, slots=True)
class CloseCommand:
    """Quit the game; no reply follows."""


Command = ResetCommand | StepCommand | RenderCommand | CloseCommand


@dataclass(frozen=True, slots=True)
class InitObservation:
    """Reply to reset: the first observation, in its wire form."""

    observation: JsonValue


@dataclass(frozen=True, slots=True)
class StepResult:
    """Reply to step: the observation (wire form), the reward and whether the episode ended."""

    observation: JsonValue
    reward: float
    done: bool


@dataclass(frozen=True, slots=True)
class RenderResult:
    """Reply to render: Godot's error code for saving the frame (0 = OK)."""

    error_code: int

    @property
    def ok(self) -> bool:
        """True when the frame was saved."""
        return self.error_code == GodotError.OK


StandIn = InitObservation | StepResult | RenderResult


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """envwire's extension: the game could not carry out the last command.

    ``stand_in``, when given, is written beside ``error``: the reply the command awaits, for
    Python sides that read only the original keys (GymGodot's ``ServerEnv`` indexes
    ``answer["observation"]`` and would fail on a bare ``{"error": ...}``). Readers that know
    the extension take the reply as this error whatever else it carries.
    """

    message: str
    stand_in: StandIn | None = None


Reply = InitObservation | StepResult | RenderResult | ErrorReply

_CMD_NAMES: Final[dict[type[Command], str]] = {
    ResetCommand: "reset",
    StepCommand: "step",
    RenderCommand: "render",
    CloseCommand: "close",
}
# The key that tells each reply apart; "error" is not among them since it may stand beside one.
_REPLY_TAGS: Final = ("init_observation", "observation", "render_error")
_SNIPPET = 200


# --- JSON helpers ---------------------------------------------------------------------------


def _snippet(text: str | bytes) -> str:
    shown = text if isinstance(text, str) else text.decode("utf-8", "replace")
    return shown if len(shown) <= _SNIPPET else shown[:_SNIPPET] + "..."


def _load_object(text: str | bytes, what: str) -> JsonObject:
    if isinstance(text, bytes):
        # A binary frame: Godot peers left in binary write mode send UTF-8 JSON in them. Left
        # to json.loads, bytes would be guessed as UTF-16 or UTF-32 and fail unreadably.
        frame = text
        try:
            text = frame.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(
                f"{what} came as a binary frame of {len(frame)} bytes that is not UTF-8 JSON "
                f"({exc.reason} at byte {exc.start}; the protocol sends JSON in text frames; "
                f"first bytes {frame[:16].hex(' ')})"
            ) from None
    try:
        value = jsonio.loads(text)
    except ValueError as exc:
        raise ProtocolError(f"malformed JSON in {what}: {exc} (got {_snippet(text)!r})") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"expected a JSON object as {what}, got {_snippet(text)!r}")
    return value


def _dump(message: JsonObject, allow_nan: bool) -> str:
    try:
        return json.dumps(message, separators=(",", ":"), allow_nan=allow_nan)
    except ValueError as exc:  # NaN or infinity while allow_nan is False
        raise InvalidArgumentError(f"cannot send {message!r} as JSON: {exc}") from None


def _field(message: JsonObject, name: str, what: str) -> JsonValue:
    try:
        return message[name]
    except KeyError:
        raise ProtocolError(f"{what} is missing {name!r} (got keys {sorted(message)})") from None


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_int(value: object, what: str) -> int:
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    elif _is_number(value) and math.isfinite(value) and value == int(value):
        return int(value)
    raise ProtocolError(f"{what} must be an integer, got {value!r}")


# --- commands -------------------------------------------------------------------------------


def encode_command(command: Command) -> str:
    """The JSON text of ``command``.

    Raises:
        InvalidArgumentError: the action holds NaN or an infinity, which JSON cannot carry
            to a Godot game.
    """
    message: JsonObject = {"cmd": _CMD_NAMES[type(command)]}
    match command:
        case ResetCommand(seed=seed) if seed is not None:
            message["seed"] = seed
        case StepCommand(action=action):
            message["action"] = action
    return _dump(message, allow_nan=False)


def decode_command(text: str | bytes) -> Command:
    """Parse one command frame (the game side's view).

    Raises:
        ProtocolError: malformed JSON, no or unknown ``cmd``, a step without an action list,
            or a reset seed that is not an integer.
    """
    message = _load_object(text, "a command")
    return _command_from(message, _command_type(message))


def _command_type(message: JsonObject) -> type[Command]:
    cmd = _field(message, "cmd", "a command")
    for command_type, name in _CMD_NAMES.items():
        if cmd == name:
            return command_type
    raise ProtocolError(f"unknown cmd {cmd!r}; expected one of reset, step, render, close")


def _command_from(message: JsonObject, command_type: type[Command]) -> Command:
    match _CMD_NAMES[command_type]:
        case "reset":
            seed = message.get("seed")
            return ResetCommand(None if seed is None else _as_int(seed, "the reset seed"))
        case "step":
            action = _field(message, "action", "a step command")
            if _is_number(action):
                action = [action]
            if not isinstance(action, list):
                raise ProtocolError(f"a step action must be a JSON list, got {action!r}")
            return StepCommand(action)
        case "render":
            return RenderCommand()
    return CloseCommand()


# --- replies --------------------------------------------------------------------------------


def encode_reply(reply: Reply) -> str:
    """The JSON text of ``reply`` (NaN and infinities are written as Python's json writes them).

    An :class:`ErrorReply` with a stand-in is the stand-in's object with ``"error"`` added.
    """
    if not isinstance(reply, ErrorReply):
        return _dump(_reply_object(reply), allow_nan=True)
    message = {} if reply.stand_in is None else _reply_object(reply.stand_in)
    message["error"] = reply.message
    return _dump(message, allow_nan=True)


def _reply_object(reply: StandIn) -> JsonObject:
    match reply:
        case InitObservation(observation=observation):
            return {"init_observation": observation}
        case StepResult(observation=observation, reward=reward, done=done):
            return {"observation": observation, "reward": reward, "done": done}
        case RenderResult(error_code=code):
            return {"render_error": str(int(code))}


def decode_reply(text: str | bytes) -> Reply:
    """Parse one reply frame (the Python side's view).

    A frame with ``"error"`` is an :class:`ErrorReply`, whose stand-in is read from the other
    keys when one reply's keys are there too.

    Raises:
        ProtocolError: malformed JSON, neither ``error`` nor exactly one reply tag, a missing
            field, a reward that is not a number, a done flag that is not a boolean, a bad
            render code.
    """
    message = _load_object(text, "a reply")
    tags = [tag for tag in _REPLY_TAGS if tag in message]
    if "error" in message and len(tags) <= 1:
        error = message["error"]
        return ErrorReply(
            error if isinstance(error, str) else json.dumps(error),
            _tagged_reply(message, tags[0]) if tags else None,
        )
    if len(tags) != 1:
        raise ProtocolError(
            f"a reply needs exactly one of {list(_REPLY_TAGS)} (an error reply may add "
            f"'error' beside it, or have 'error' alone), got keys {sorted(message)}"
        )
    return _tagged_reply(message, tags[0])


def _tagged_reply(message: JsonObject, tag: str) -> StandIn:
    match tag:
        case "init_observation":
            return InitObservation(message["init_observation"])
        case "observation":
            reward = _field(message, "reward", "a step reply")
            done = _field(message, "done", "a step reply")
            if not _is_number(reward):
                raise ProtocolError(f"the step reward must be a number, got {reward!r}")
            if not isinstance(done, bool):
                # GDScript code may hand an int to the JSON writer: accept 0 and 1.
                if not (_is_number(done) and done in (0, 1)):
                    raise ProtocolError(f"the step done flag must be a boolean, got {done!r}")
                done = bool(done)
            return StepResult(message["observation"], float(reward), done)
    return RenderResult(_as_int(message["render_error"], "render_error"))


# --- state machines -------------------------------------------------------------------------


class Phase(Enum):
    """Where a connection stands: idle, waiting for the reply to a command, or closed."""

    IDLE = "idle"
    RESETTING = "waiting for the reply to reset"
    STEPPING = "waiting for the reply to step"
    RENDERING = "waiting for the reply to render"
    CLOSED = "closed"


# The transition table: the phase each command leads to, and the reply each phase waits for.
_AFTER: Final[dict[type[Command], Phase]] = {
    ResetCommand: Phase.RESETTING,
    StepCommand: Phase.STEPPING,
    RenderCommand: Phase.RENDERING,
    CloseCommand: Phase.CLOSED,
}
_AWAITS: Final[dict[Phase, type[StandIn]]] = {
    Phase.RESETTING: InitObservation,
    Phase.STEPPING: StepResult,
    Phase.RENDERING: RenderResult,
}


class GymSide:
    """The Python side of one connection: send a command, then read exactly its reply."""

    def __init__(self) -> None:
        self.phase = Phase.IDLE

    def send(self, command: Command) -> str:
        """Encode ``command`` and move to the phase that waits for its reply.

        Raises:
            StateError: a reply is still pending or the connection was closed.
            InvalidArgumentError: see :func:`encode_command`.
        """
        name = _CMD_NAMES[type(command)]
        if self.phase is not Phase.IDLE:
            raise StateError(f"cannot send {name} to the game: connection is {self.phase.value}")
        text = encode_command(command)
        self.phase = _AFTER[type(command)]
        return text

    def receive(self, text: str | bytes) -> Reply:
        """Decode the reply to the pending command (an :class:`ErrorReply` answers any command).

        Raises:
            ProtocolError: no reply was pending, the frame is malformed, or it answers another
                command than the one sent (an error reply's stand-in included).
        """
        expected = _AWAITS.get(self.phase)
        if expected is None:
            raise ProtocolError(
                f"the game sent {_snippet(text)!r} while the connection is {self.phase.value}"
            )
        reply = decode_reply(text)
        answered = reply.stand_in if isinstance(reply, ErrorReply) else reply
        if answered is not None and not isinstance(answered, expected):
            raise ProtocolError(
                f"expected {expected.__name__} while {self.phase.value}, "
                f"got {type(answered).__name__}: {_snippet(text)!r}"
            )
        self.phase = Phase.IDLE
        return reply


class GameSide:
    """The game side of one connection: read a command, then send exactly its reply."""

    def __init__(self) -> None:
        self.phase = Phase.IDLE

    @property
    def awaited(self) -> type[StandIn] | None:
        """The kind of reply the pending command awaits; None when none is owed."""
        return _AWAITS.get(self.phase)

    def receive(self, text: str | bytes) -> Command:
        """Decode the next command and move to the phase that owes its reply.

        A command whose ``cmd`` is known but whose other fields are malformed still moves to
        its phase before the error is raised, so that :attr:`awaited` names the reply its
        sender waits for (an error reply then carries a stand-in of that kind).

        Raises:
            ProtocolError: the frame is malformed (answer it with an :class:`ErrorReply`), a
                reply is still owed, or the connection was closed.
        """
        if self.phase is not Phase.IDLE:
            raise ProtocolError(
                f"the server sent {_snippet(text)!r} while the connection is {self.phase.value}"
            )
        message = _load_object(text, "a command")
        command_type = _command_type(message)
        self.phase = _AFTER[command_type]
        return _command_from(message, command_type)

    def send(self, reply: Reply) -> str:
        """Encode ``reply`` to the pending command.

        An :class:`ErrorReply` may answer any command, and a frame that was no command at
        all, but not close; its stand-in, if any, must be the reply the command awaits.

        Raises:
            StateError: ``reply`` does not answer the pending command.
        """
        expected = self.awaited
        answered = reply.stand_in if isinstance(reply, ErrorReply) else reply
        if self.phase is Phase.CLOSED or (
            answered is not None and (expected is None or type(answered) is not expected)
        ):
            raise StateError(
                f"cannot send {_reply_name(reply)} to the server: connection is {self.phase.value}"
            )
        self.phase = Phase.IDLE
        return encode_reply(reply)


def _reply_name(reply: Reply) -> str:
    if isinstance(reply, ErrorReply) and reply.stand_in is not None:
        return f"ErrorReply with a {type(reply.stand_in).__name__} stand-in"
    return type(reply).__name__
