"""The game process: launch it with its output in a log file, report how it ended, stop it.

A launched game gets its own process group, so that a wrapper script and the engine it starts
are stopped together. A finalizer kills the group if the owner forgets to stop it (or the
interpreter exits), so no game outlives the :class:`GameProcess` that started it.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import weakref
from collections.abc import Sequence
from pathlib import Path

from envwire.errors import ConfigError

__all__ = ["ADDON_EXIT_CODES", "GameProcess", "describe_exit", "split_command"]

# Exit codes of envwire's Godot addon (godot/addons/envwire/agent.gd) and of the reverse bridge.
ADDON_EXIT_CODES: dict[int, str] = {
    2: "bad setup: the addon's env_node is missing, or the bridge cannot make its env",
    3: "the game could not reach the server",
    4: "the game lost its connection",
}
_LOG_TAIL_LINES = 15


def describe_exit(code: int) -> str:
    """``"code 3 (the game could not reach the server)"`` or ``"signal SIGKILL"``."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    meaning = ADDON_EXIT_CODES.get(code)
    return f"code {code}" + (f" ({meaning})" if meaning else "")


def split_command(
    command: str | Sequence[str], cwd: str | Path | None = None
) -> tuple[list[str], str | Path | None]:
    """The argument list and working directory to start a game with; no shell is ever run.

    A list is taken as it is. A string is split like a shell would split it, and GymGodot's
    form, ``"cd PROJECT && godot scene.tscn"``, becomes ``["godot", "scene.tscn"]`` run in
    ``PROJECT`` (relative to ``cwd`` when that is given).

    Raises:
        ConfigError: the string needs a shell (other operators such as ``;``, ``|``, ``>``,
            a second ``&&``, or ``$`` expansions); the message shows the list form to use.
    """
    if not isinstance(command, str):
        return list(command), cwd
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError as exc:
        raise ConfigError(f"cannot split the game command {command!r}: {exc}") from None
    if len(words) > 3 and words[0] == "cd" and words[2] == "&&":
        directory = Path(os.path.expanduser(words[1]))
        cwd, words = (Path(cwd) / directory if cwd is not None else directory), words[3:]
    operators = [w for w in words if w and not w.strip("();<>|&")]
    expansions = [w for w in words if "$" in w or "`" in w]
    if operators or expansions or not words:
        why = f"uses {(operators or expansions)[0]!r}" if words else "is empty"
        example = 'exe_cmd=["godot", "--path", "PROJECT", "scene.tscn"], cwd="PROJECT"'
        raise ConfigError(
            f"the game command {command!r} {why}: envwire runs no shell. Pass the command as "
            f"a list of arguments and its directory as cwd, e.g. {example} (GymGodot's "
            '"cd PROJECT && godot scene.tscn" is accepted as it is)'
        )
    return words, cwd


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)


class GameProcess:
    """One launched game, its stdout and stderr going to ``log_path``.

    Raises:
        OSError: from :class:`subprocess.Popen` when the command cannot be started.
    """

    def __init__(self, command: Sequence[str], log_path: Path, cwd: str | Path | None = None):
        self.command = list(command)
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self._popen = subprocess.Popen(
                self.command,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._finalizer = weakref.finalize(self, _kill_group, self._popen)

    @property
    def pid(self) -> int:
        """The game's process id."""
        return self._popen.pid

    def poll(self) -> int | None:
        """The exit code (negative: killed by that signal), or None while it runs."""
        return self._popen.poll()

    def wait(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` seconds for the game to exit; its exit code or None."""
        try:
            return self._popen.wait(timeout=max(timeout, 0.0))
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout: float, graceful: bool = True) -> int:
        """Stop the game: SIGTERM, then SIGKILL, ``timeout`` seconds apart.

        Args:
            timeout: seconds to wait at each stage.
            graceful: first give the game ``timeout`` seconds to exit on its own (it was told
                to quit).

        Returns:
            The exit code.
        """
        code = self.wait(timeout if graceful else 0.0)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if code is not None:
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._popen.pid, sig)
            code = self.wait(timeout)
        if code is None:  # pragma: no cover - SIGKILL did not end it within the timeout
            code = self._popen.wait()
        self._finalizer.detach()
        return code

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the game's output ("" if there is none)."""
        try:
            text = self.log_path.read_bytes().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def hint(self) -> str:
        """A suffix for error messages: the game's last output lines, when it printed any."""
        tail = self.log_tail()
        if not tail:
            return ""
        return f"\n--- last lines of the game's output ({self.log_path}) ---\n{tail}"
