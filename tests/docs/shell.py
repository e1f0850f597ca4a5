"""One bash process per page, fed command by command, with ``envwire serve`` in the background.

A page's shell blocks run in one shell, so a variable set or a folder entered in one command
holds in the next, as in a reader's terminal. A command that starts a server (``envwire serve
...``, or ``python -m envwire serve ...``) runs in the background in a process group of its own,
its output in a log; the next command waits until the server has announced every front end it
was asked for (``envwire: NAME listening on HOST:PORT``). A page runs one server at a time, as a
reader who stops one server before starting the next: a new ``envwire serve`` stops the server
before it. Every wait is bounded. Servers listen on free ports, and the page's other commands
have their documented ports replaced with those (:mod:`tests.docs.ports`).
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from envwire.ports import FRONT_ENDS
from tests.docs.ports import PortMap

__all__ = ["BlockFailed", "Server", "Shell", "commands", "is_server", "listeners"]

#: Seconds a server has to announce its front ends; seconds a command may take.
SERVER_START = 60.0
COMMAND_TIME = 120.0
#: Seconds a stopped server has to exit (then it is killed) and to free its ports.
SERVER_STOP = 15.0

_LISTENING = re.compile(
    r"^envwire: (?P<name>\S+) listening on (?P<host>\S+):(?P<port>\d+)( \(TLS\))?$"
)
_UNAVAILABLE = re.compile(r"^envwire: (?P<name>\S+) front end unavailable")
_FRONT_ENDS = tuple(row.name for row in FRONT_ENDS)


class BlockFailed(AssertionError):
    """A block of a page failed; the message says which command and shows its output."""


def commands(text: str, language: str) -> Iterator[str]:
    """The commands of a shell block, one complete shell command each (a line, lines joined by
    a trailing backslash, or a compound command such as a loop), comments and blank lines left
    out. In a ``console`` block only lines after a ``$`` prompt are commands.

    Raises:
        BlockFailed: the block ends inside a command.
    """
    lines = text.splitlines()
    if language == "console":
        lines = [line[2:] for line in lines if line.startswith("$ ")]
    pending = ""
    for line in lines:
        pending += line + "\n"
        if line.endswith("\\") or not _complete(pending):
            continue
        command, pending = pending.strip(), ""
        if command and not command.startswith("#"):
            yield command
    if pending.strip():
        raise BlockFailed(f"the block ends inside a shell command: {pending.strip()!r}")


def _complete(text: str) -> bool:
    """Whether bash reads ``text`` as whole commands (a loop without ``done`` is not)."""
    checked = subprocess.run(
        ["bash", "-n"], input=text, capture_output=True, text=True, check=False
    )
    return checked.returncode == 0


def _words(command: str) -> list[str]:
    """The command's words, comments dropped, assignments before the command skipped."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return []
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words.pop(0)
    return words


def is_server(command: str) -> bool:
    """Whether ``command`` starts an envwire server (``envwire serve``, ``python -m envwire
    serve``), which the shell then runs in the background."""
    words = _words(command)
    if words[:2] == ["envwire", "serve"]:
        return True
    return words[:1] in (["python"], ["python3"]) and words[1:4] == ["-m", "envwire", "serve"]


def listeners(command: str) -> set[str]:
    """The listeners a server command asks for: every front end not turned ``off``, and
    ``metrics`` with ``--metrics PORT``."""
    words = _words(command)
    wanted = set(_FRONT_ENDS)
    for index, word in enumerate(words):
        option, _, value = word.partition("=")
        if not value and index + 1 < len(words):
            value = words[index + 1]
        name = option[2:]
        if name in _FRONT_ENDS and value == "off":
            wanted.discard(name)
        if name == "metrics":
            wanted.add("metrics")
    return wanted


def _strip_comment(command: str) -> str:
    """``command`` without a trailing ``# comment`` (outside quotes) and a trailing ``&``."""
    quote = ""
    for index, char in enumerate(command):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or command[index - 1].isspace()):
            command = command[:index]
            break
    return command.rstrip().rstrip("&").rstrip()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for bash to reap it counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@dataclass
class Server:
    """A server a page started: its process (and group) id, its log and what it announced."""

    pid: int
    command: str
    log: Path
    addresses: dict[str, tuple[str, int]] = field(default_factory=dict)

    def output(self) -> str:
        """What the server wrote so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def wait_listening(self, wanted: set[str], timeout: float = SERVER_START) -> None:
        """Wait until every wanted listener is announced (or said to be unavailable).

        Raises:
            BlockFailed: the server exited, or did not announce them within ``timeout``.
        """
        deadline = time.monotonic() + timeout
        while True:
            done = set()
            for line in self.output().splitlines():
                if match := _LISTENING.match(line.strip()):
                    self.addresses[match["name"]] = (match["host"], int(match["port"]))
                    done.add(match["name"])
                elif match := _UNAVAILABLE.match(line.strip()):
                    done.add(match["name"])
            if wanted <= done:
                return
            if not _alive(self.pid):
                raise BlockFailed(f"{self.command!r} exited:\n{self.output()[-3000:]}")
            if time.monotonic() > deadline:
                raise BlockFailed(
                    f"{self.command!r} announced {sorted(done)} within {timeout:.0f} s, "
                    f"not {sorted(wanted)}:\n{self.output()[-3000:]}"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM to its process group, SIGKILL after ``SERVER_STOP`` seconds; then wait until
        its ports take no connection.

        Raises:
            BlockFailed: a port still takes connections after the server is gone.
        """
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + SERVER_STOP
            while _alive(self.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not _alive(self.pid):
                break
        with_ports = [(host, port) for name, (host, port) in self.addresses.items()]
        deadline = time.monotonic() + SERVER_STOP
        for host, port in with_ports:
            while _takes_connections(host, port):
                if time.monotonic() > deadline:
                    raise BlockFailed(f"port {port} is still open after {self.command!r} stopped")
                time.sleep(0.05)


def _descendants(pid: int) -> list[int]:
    """Every live process below ``pid``, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if _alive(child):
                found.append(child)
            todo.append(child)
    return found


def _takes_connections(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((host, port)) == 0


class Shell:
    """The bash of one page, in the page's folder.

    Args:
        cwd: the page's folder.
        env: the environment (``PATH`` finds ``envwire`` and ``python`` of the worktree).
        logs: a folder for the shell's and the servers' output (outside ``cwd``).
        ports: the page's ports (documented -> real), shared with its Python; a map of its own
            when not given.
    """

    def __init__(
        self, cwd: Path, env: dict[str, str], logs: Path, ports: PortMap | None = None
    ) -> None:
        self.logs = logs
        self.ports = ports if ports is not None else PortMap(cwd)
        self.log = logs / "shell.log"
        self.servers: list[Server] = []
        self._status_read, status_write = os.pipe()
        self._status_fd = status_write
        self._buffer = b""
        with self.log.open("ab") as output:
            self.process = subprocess.Popen(
                ["bash", "--noprofile", "--norc"],
                stdin=subprocess.PIPE,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                pass_fds=(status_write,),
                start_new_session=True,
            )
        os.close(status_write)
        # Job control: every background job (each server) in a process group of its own, so
        # that stopping a server stops the worker processes it started too.
        self._send("set -m\n")

    def _send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text.encode())
        self.process.stdin.flush()

    def _status(self, what: str, timeout: float) -> str:
        """The next status line the shell writes, within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BlockFailed(f"{what} did not finish within {timeout:.0f} s{self._tail()}")
            ready, _, _ = select.select([self._status_read], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(self._status_read, 4096)
                if not chunk:
                    raise BlockFailed(f"the shell ended during {what}{self._tail()}")
                self._buffer += chunk
            elif self.process.poll() is not None:
                raise BlockFailed(f"the shell ended during {what}{self._tail()}")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def _tail(self) -> str:
        return ":\n" + self.log.read_text(errors="replace")[-3000:]

    def run(self, command: str) -> None:
        """Run one command (a server in the background, waiting until it listens).

        Raises:
            BlockFailed: the command exited nonzero, took too long, or its server did not
                start.
        """
        if is_server(command):
            self._start_server(command)
            return
        command = self.ports.rewrite(command)
        start = self.log.stat().st_size
        # In braces, so that cd and variables hold for the next command; stdin from /dev/null,
        # so that no command reads the commands after it from the shell's own input.
        self._send(f"{{ {command}\n}} < /dev/null\nprintf '%s\\n' \"$?\" >&{self._status_fd}\n")
        code = self._status(repr(command), COMMAND_TIME)
        if code != "0":
            with self.log.open("rb") as output:
                output.seek(start)
                said = output.read().decode(errors="replace")[-3000:]
            raise BlockFailed(f"{command!r} exited with status {code}:\n{said}")

    def _start_server(self, command: str) -> None:
        self.stop_servers()
        log = self.logs / f"server-{len(list(self.logs.glob('server-*.log'))) + 1}.log"
        # On free ports: port 0 for each listener, then the documented ports stand for the real.
        on_free_ports, documented = self.ports.server_command(_strip_comment(command))
        self._send(
            f"{on_free_ports} > {shlex.quote(str(log))} 2>&1 < /dev/null &\n"
            f"printf '%s\\n' \"$!\" >&{self._status_fd}\n"
        )
        server = Server(int(self._status(repr(command), COMMAND_TIME)), on_free_ports, log)
        self.servers.append(server)
        server.wait_listening(listeners(command))
        self.ports.learn(documented, server.addresses)

    def stop_servers(self) -> None:
        """Stop every server the page started.

        Raises:
            BlockFailed: a server's port stays open.
        """
        while self.servers:
            self.servers.pop().stop()

    def close(self) -> None:
        """Stop the servers, then the shell and whatever it still runs."""
        try:
            self.stop_servers()
        finally:
            if self.process.stdin is not None:
                self.process.stdin.close()
            # Whatever a command that timed out left running is in a process group of its own
            # (job control): kill the groups of every process the shell started.
            for pid in _descendants(self.process.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(os.getpgid(pid), signal.SIGKILL)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
            os.close(self._status_read)
