"""``GodotEnv``: a Godot game (or any GymGodot-style client) as a ``gymnasium.Env``.

The env is the WebSocket *server* of the GymGodot protocol. It either launches the
game itself, appending the protocol's command-line contract to ``exe_cmd``::

    <exe_cmd...> --fixed-fps 60 [--disable-render-loop] --serverIP=<ip> --serverPort=<port>
        --renderPath=<dir>/

or, without ``exe_cmd``, waits for a game started by someone else (:meth:`GodotEnv.game_args`
gives the arguments to start it with). The game connects on the first call that needs it (or
on :meth:`GodotEnv.wait_for_game`).

Unlike the original Python side it never blocks forever. Each wait has a timeout, and each
failure has its own error:

- no game connects within ``connect_timeout``: :class:`~envwire.errors.EnvTimeoutError`;
- the launched game exits (before connecting, or mid-call): :class:`~envwire.errors.EnvCrashedError`
  naming its exit code or signal, with the last lines of its output;
- no reply within ``reply_timeout``: :class:`~envwire.errors.EnvTimeoutError`;
- the connection closes while the game lives on: :class:`~envwire.errors.TransportError`;
- the game answers with envwire's ``{"error": ...}`` extension:
  :class:`~envwire.errors.RemoteError`;
- a reply that breaks the protocol: :class:`~envwire.errors.ProtocolError`.

After a timeout, a crash or a protocol error the connection can no longer be trusted: every
later call raises :class:`~envwire.errors.StateError` until :meth:`GodotEnv.close`.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from PIL import Image

from envwire.errors import (
    ConfigError,
    EnvCrashedError,
    EnvError,
    EnvTimeoutError,
    EnvwireError,
    InvalidArgumentError,
    ProtocolError,
    RemoteError,
    StateError,
    TransportError,
)
from envwire.jsonio import JsonValue
from envwire.kinds.godot.gameserver import GameDisconnected, GameServer
from envwire.kinds.godot.launch import GameProcess, describe_exit, split_command
from envwire.protocols.godot.messages import (
    CloseCommand,
    Command,
    ErrorReply,
    GymSide,
    InitObservation,
    RenderCommand,
    RenderResult,
    ResetCommand,
    StepCommand,
    StepResult,
    godot_error_name,
)
from envwire.protocols.godot.spaces import check_space, from_wire, to_wire
from envwire.spacecodec import check

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_REPLY_TIMEOUT",
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "GodotEnv",
]

DEFAULT_CONNECT_TIMEOUT = 30.0
DEFAULT_REPLY_TIMEOUT = 10.0
DEFAULT_SHUTDOWN_TIMEOUT = 5.0

_ReplyT = TypeVar("_ReplyT", InitObservation, StepResult, RenderResult)


class GodotEnv(gym.Env[Any, Any]):
    """A Godot game as a Gymnasium env, over the GymGodot protocol.

    Args:
        action_space: the game's action space (Discrete, Box, MultiDiscrete or MultiBinary).
        observation_space: the game's observation space (same kinds).
        exe_cmd: the command that starts the game: a list of arguments, or a string split
            like a shell would (never run by a shell; GymGodot's ``"cd PROJECT && godot
            scene.tscn"`` runs ``godot scene.tscn`` in ``PROJECT``); None to wait for a game
            started elsewhere.
        host: address to listen on, also sent to the game as ``--serverIP``.
        port: port to listen on; 0 picks a free one (see :attr:`port`).
        fixed_fps: sent as ``--fixed-fps``: the game's simulated frames per second.
        window_render: False sends ``--disable-render-loop`` (no drawing between renders).
        extra_args: more arguments for the game, placed before the contract's.
        cwd: working directory of the game process.
        render_mode: ``"rgb_array"`` makes :meth:`render` return the frame as an array.
        render_dir: where the game saves frames; a private temporary directory by default.
        connect_timeout: seconds to wait for the game to connect.
        reply_timeout: seconds to wait for each reply.
        shutdown_timeout: seconds :meth:`close` gives the game to quit before SIGTERM, and
            again before SIGKILL.

    Raises:
        UnsupportedError: a space this protocol cannot carry.
        InvalidArgumentError: a bad render mode or timeout.
        ConfigError: the port cannot be bound, the game cannot be started, or ``exe_cmd`` is a
            shell command line other than GymGodot's ``cd ... && ...`` form.
    """

    # Declared like gymnasium.Env declares it; each instance gets its own copy.
    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 60}  # noqa: RUF012

    def __init__(
        self,
        action_space: gym.Space[Any],
        observation_space: gym.Space[Any],
        exe_cmd: str | Sequence[str] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        fixed_fps: int = 60,
        window_render: bool = False,
        extra_args: Sequence[str] = (),
        cwd: str | Path | None = None,
        render_mode: str | None = None,
        render_dir: str | Path | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        reply_timeout: float = DEFAULT_REPLY_TIMEOUT,
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
    ) -> None:
        check_space(action_space, "action")
        check_space(observation_space, "observation")
        if render_mode not in (None, "rgb_array"):
            raise InvalidArgumentError(
                f"render_mode must be None or 'rgb_array', not {render_mode!r}"
            )
        for name, value in (
            ("connect_timeout", connect_timeout),
            ("reply_timeout", reply_timeout),
            ("shutdown_timeout", shutdown_timeout),
        ):
            if not value > 0:
                raise InvalidArgumentError(
                    f"{name} must be a positive number of seconds, not {value!r}"
                )
        if not 0 <= port <= 65535:
            raise InvalidArgumentError(f"port must be in 0..65535 (0 = any free port), not {port}")
        base: list[str] | None = None
        if exe_cmd is not None:  # before anything is bound or created: it may be refused
            base, cwd = split_command(exe_cmd, cwd)
        self.action_space = action_space
        self.observation_space = observation_space
        self.render_mode = render_mode
        self.metadata = {**self.metadata, "render_fps": fixed_fps}
        self.connect_timeout = connect_timeout
        self.reply_timeout = reply_timeout
        self.shutdown_timeout = shutdown_timeout
        self.fixed_fps = fixed_fps
        self.window_render = window_render
        #: The game's exit code once :meth:`close` has stopped a launched game.
        self.game_exit_code: int | None = None

        self._codec = GymSide()
        self._broken: EnvwireError | None = None
        self._closed = False
        self._frame = 0
        self._has_reset = False
        self._workdir = Path(tempfile.mkdtemp(prefix="envwire-godot-"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._workdir, True)
        self._owns_render_dir = render_dir is None
        self.render_dir = self._workdir / "frames" if render_dir is None else Path(render_dir)
        self.render_dir.mkdir(parents=True, exist_ok=True)
        try:
            # A game that takes no command within reply_timeout will not reply in time either.
            self._server = GameServer(host, port, send_timeout=reply_timeout)
        except OSError as exc:
            self._cleanup()
            raise ConfigError(f"cannot listen for the Godot game on {host}:{port}: {exc}") from exc
        self._process: GameProcess | None = None
        if base is not None:
            command = [*base, *extra_args, *self.game_args()]
            try:
                self._process = GameProcess(command, self._workdir / "game.log", cwd)
            except OSError as exc:
                self._server.close(self.shutdown_timeout)
                self._cleanup()
                raise ConfigError(f"cannot start the Godot game {command}: {exc}") from exc

    # --- public helpers -------------------------------------------------------------------

    @property
    def host(self) -> str:
        """The address the env listens on."""
        return self._server.host

    @property
    def port(self) -> int:
        """The port the env listens on (the real one when 0 was asked for)."""
        return self._server.port

    @property
    def game_pid(self) -> int | None:
        """The launched game's process id; None when the game was started elsewhere."""
        return None if self._process is None else self._process.pid

    @property
    def game_log(self) -> Path | None:
        """The file holding the launched game's output; None when it was started elsewhere."""
        return None if self._process is None else self._process.log_path

    def game_args(self) -> list[str]:
        """The command-line contract to start a game with, for this env."""
        args = ["--fixed-fps", str(self.fixed_fps)]
        if not self.window_render:
            args.append("--disable-render-loop")
        return [
            *args,
            f"--serverIP={self.host}",
            f"--serverPort={self.port}",
            f"--renderPath={self.render_dir}/",
        ]

    def wait_for_game(self, timeout: float | None = None) -> None:
        """Wait until the game has connected (``connect_timeout`` seconds by default).

        Raises:
            EnvTimeoutError: no game connected in time.
            EnvCrashedError: the launched game exited first.
        """
        if self._server.connected:
            return
        limit = self.connect_timeout if timeout is None else timeout
        try:
            self._server.accept(limit, lambda: self._check_alive("waiting for it to connect"))
        except TimeoutError:
            if self._process is None:
                how = f"; start it with: {shlex.join(self.game_args())}"
            else:
                how = f" (launched: {shlex.join(self._process.command)}){self._process.hint()}"
            raise EnvTimeoutError(
                f"no Godot game connected to ws://{self.host}:{self.port}/ within {limit:g} s{how}"
            ) from None

    # --- gymnasium API --------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Start an episode; ``seed`` travels as envwire's reset extension (see the module).

        Raises:
            InvalidArgumentError: ``options`` were given (the protocol has none).
            EnvwireError: the errors listed in the module docstring.
        """
        if options:
            raise InvalidArgumentError(f"the godot protocol has no reset options, got {options!r}")
        super().reset(seed=seed)
        reply = self._request(ResetCommand(seed), InitObservation)
        observation = self._observation(reply.observation, "reset")
        self._frame = 0
        self._has_reset = True
        return observation, {}

    def step(self, action: object) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Run one step. The game's ``done`` is reported as ``terminated``; never truncated.

        Raises:
            StateError: before the first :meth:`reset`.
            InvalidActionError: ``action`` is not in the action space.
            EnvwireError: the errors listed in the module docstring.
        """
        if not self._has_reset:
            raise StateError("call reset() before step() on a GodotEnv")
        check(self.action_space, action)
        reply = self._request(StepCommand(to_wire(self.action_space, action)), StepResult)
        return self._observation(reply.observation, "step"), reply.reward, reply.done, False, {}

    def render(self) -> npt.NDArray[np.uint8] | None:
        """Ask the game to save a frame under :attr:`render_dir` (named ``<n>.png``, n counting
        from 0 after each reset, as GymGodot does).

        Returns:
            With ``render_mode="rgb_array"``, the frame as an ``(H, W, 3)`` uint8 array (the
            file is removed when the directory is the env's own); otherwise None.

        Raises:
            EnvError: the game reported a Godot error, or the frame file cannot be read.
            EnvwireError: the errors listed in the module docstring.
        """
        reply = self._request(RenderCommand(), RenderResult)
        path = self.render_dir / f"{self._frame}.png"
        self._frame += 1
        if not reply.ok:
            raise EnvError(
                f"the Godot game could not save frame {path}: {godot_error_name(reply.error_code)}"
            )
        if self.render_mode != "rgb_array":
            return None
        try:
            with Image.open(path) as image:
                frame = np.asarray(image.convert("RGB"), dtype=np.uint8)
        except OSError as exc:
            raise EnvError(f"cannot read the frame the Godot game saved to {path}: {exc}") from exc
        if self._owns_render_dir:
            path.unlink(missing_ok=True)
        return frame

    def close(self) -> None:
        """Send close, let a launched game quit (SIGTERM then SIGKILL after
        ``shutdown_timeout`` each), stop listening and remove the env's temporary files.
        Idempotent; never raises for a game that is already gone."""
        if self._closed:
            return
        self._closed = True
        told = False
        try:
            if self._server.connected and self._broken is None:
                # Already gone, or a reply still owed: stopping the process settles it.
                with contextlib.suppress(GameDisconnected, StateError):
                    self._server.send(self._codec.send(CloseCommand()))
                    told = True
            if self._process is not None:
                self.game_exit_code = self._process.stop(self.shutdown_timeout, graceful=told)
            elif told:
                # Let the game hang up first, so it quits on the command, not on a lost link.
                self._server.wait_closed(self.shutdown_timeout)
        finally:
            self._server.close(self.shutdown_timeout)
            self._cleanup()
        super().close()

    # --- internals ------------------------------------------------------------------------

    def _observation(self, value: JsonValue, name: str) -> object:
        """The observation a reply carried in its wire form (decoded JSON)."""
        try:
            return from_wire(self.observation_space, value, "observation")
        except ProtocolError as exc:
            # The game and this env disagree on the observation space: like any protocol
            # error, later replies cannot be trusted either.
            raise self._fail(
                ProtocolError(f"bad reply to {name} from the Godot game: {exc}")
            ) from None

    def _check_alive(self, doing: str) -> None:
        if self._process is not None and (code := self._process.poll()) is not None:
            raise self._crashed(code, doing)

    def _crashed(self, code: int, doing: str) -> EnvCrashedError:
        hint = "" if self._process is None else self._process.hint()
        return EnvCrashedError(
            f"the Godot game exited with {describe_exit(code)} while {doing}{hint}"
        )

    def _fail(self, error: EnvwireError) -> EnvwireError:
        self._broken = error
        return error

    def _request(self, command: Command, expected: type[_ReplyT]) -> _ReplyT:
        name = type(command).__name__.removesuffix("Command").lower()
        if self._closed:
            raise StateError(f"cannot {name}: this GodotEnv is closed")
        if self._broken is not None:
            raise StateError(
                f"cannot {name}: the connection to the Godot game failed earlier "
                f"({self._broken}); close this env and make a new one"
            )
        self.wait_for_game()
        text = self._codec.send(command)
        try:
            self._server.send(text)
            reply = self._codec.receive(self._server.recv(self.reply_timeout))
        except TimeoutError:
            code = None if self._process is None else self._process.poll()
            if code is not None:
                raise self._fail(self._crashed(code, f"waiting for the reply to {name}")) from None
            hint = "" if self._process is None else self._process.hint()
            raise self._fail(
                EnvTimeoutError(
                    f"the Godot game sent no reply to {name} within {self.reply_timeout:g} s{hint}"
                )
            ) from None
        except GameDisconnected as exc:
            raise self._fail(self._disconnected(f"waiting for the reply to {name}", exc)) from None
        except ProtocolError as exc:
            raise self._fail(
                ProtocolError(f"bad reply to {name} from the Godot game: {exc}")
            ) from None
        if isinstance(reply, ErrorReply):
            raise RemoteError(f"the Godot game could not {name}: {reply.message}")
        if not isinstance(reply, expected):  # pragma: no cover - GymSide checks the reply kind
            raise ProtocolError(f"expected {expected.__name__}, got {reply!r}")
        return reply

    def _disconnected(self, doing: str, exc: GameDisconnected) -> EnvwireError:
        if self._process is not None:
            # The socket closes as the process dies: give it a moment to be reaped.
            code = self._process.wait(min(1.0, self.shutdown_timeout))
            if code is not None:
                return self._crashed(code, doing)
        return TransportError(f"the Godot game's connection closed while {doing}: {exc}")
