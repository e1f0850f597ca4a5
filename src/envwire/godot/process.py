"""The game process: launch it with its output in a log file, report how it ended, stop it.

A launched game gets its own process group, so that a wrapper script and the engine it starts
are stopped together. A finalizer kills the group if the owner forgets to stop it (or the
interpreter exits), so no game outlives the :class:`GameProcess` that started it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import weakref
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ADDON_EXIT_CODES", "GameProcess", "describe_exit"]

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
