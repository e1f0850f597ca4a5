"""The ports a page's examples use, moved to free ones, so that two test runs at once (two CI
jobs, or a developer's run beside CI) never share a port.

The pages are written for a reader's machine, with the front ends' default ports (gym-socket
5001, HTTP 8000, dm_env_rpc 50051) or the ports a server command names. The harness runs them
as written but for the port numbers:

- a server command (``envwire serve ...``) gets port 0 for every listener it opens (its own
  ``--NAME PORT`` rewritten, ``--NAME 0`` added for a front end left at its default or at a
  config file's port); once it has announced its listeners, each documented port (the one the
  command, its config file or the default names) stands for the port the server really has.
  A documented port that a command before the server used already has a free port (below): the
  server binds that one instead of 0;
- every other command and block has its documented ports replaced with the real ones before it
  runs; a documented port no server of the page has announced yet (a Godot game's port, which
  the page's Python side listens on) gets a free port of its own, the same for the whole page.

A reader's page and the page that runs differ only in those numbers.
"""

from __future__ import annotations

import re
import shlex
import socket
import tomllib
from pathlib import Path

from envwire.ports import FRONT_ENDS

__all__ = ["DEFAULT_PORTS", "PortMap"]

#: The listeners a server command may open and their default ports (``metrics`` is off unless
#: asked for).
DEFAULT_PORTS: dict[str, int | None] = {
    **{row.name: row.default_port for row in FRONT_ENDS},
    "metrics": None,
}
_NAMES = "|".join(re.escape(name) for name in DEFAULT_PORTS)
_FLAG = re.compile(rf"(?P<flag>--(?P<name>{_NAMES}))(?P<sep>=|\s+)(?P<port>\d+)\b")


def _free_port() -> int:
    """A port nothing listens on now (the kernel's choice for port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class PortMap:
    """A page's documented ports and the real ports they stand for.

    Args:
        cwd: the page's folder (where a server command's ``--config`` file is).
    """

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        #: documented port -> real port
        self.real: dict[int, int] = {}

    def _config_ports(self, command: str) -> dict[str, str]:
        """The listener settings of the ``[server]`` table of the command's ``--config`` file."""
        try:
            words = shlex.split(command, comments=True)
        except ValueError:
            return {}
        for index, word in enumerate(words):
            option, _, value = word.partition("=")
            if option != "--config":
                continue
            if not value and index + 1 < len(words):
                value = words[index + 1]
            path = self.cwd / value
            if not path.is_file():
                return {}
            server = tomllib.loads(path.read_text()).get("server", {})
            return {
                name: str(server[name.replace("-", "_")])
                for name in DEFAULT_PORTS
                if name.replace("-", "_") in server
            }
        return {}

    def server_command(self, command: str) -> tuple[str, dict[str, int]]:
        """``command`` (a server command, without a trailing comment or ``&``) with port 0 for
        each listener it opens, and the documented port of each listener.

        Returns:
            The command to run, and {listener name: documented port}.
        """
        documented: dict[str, int] = {}

        def to_zero(match: re.Match[str]) -> str:
            documented[match["name"]] = int(match["port"])
            return f"{match['flag']}{match['sep']}{self._bind(int(match['port']))}"

        rewritten = _FLAG.sub(to_zero, command)
        named = set(re.findall(rf"--({_NAMES})\b(?!-)", command))
        configured = self._config_ports(command)
        added = []
        for name, default in DEFAULT_PORTS.items():
            if name in named:
                continue
            setting = configured.get(name)
            if setting is not None and setting.isdigit():
                documented[name] = int(setting)
            elif setting is None and default is not None:
                documented[name] = default
            else:
                continue  # off (or metrics left off)
            added.append(f"--{name} {self._bind(documented[name])}")
        return " ".join([rewritten, *added]), documented

    def _bind(self, documented: int) -> int:
        """The port a server binds for ``documented``: the page's free port for it when a
        command before the server already used one (an agent's config file that names the
        server's URL), else 0."""
        return self.real.get(documented, 0)

    def learn(self, documented: dict[str, int], addresses: dict[str, tuple[str, int]]) -> None:
        """Record the ports a server announced for the documented ones."""
        for name, port in documented.items():
            if name in addresses:
                self.real[port] = addresses[name][1]

    def rewrite(self, text: str) -> str:
        """``text`` with every documented port replaced by its real port."""
        known = {port for port in DEFAULT_PORTS.values() if port is not None} | set(self.real)
        pattern = r"(?<![\w.])(" + "|".join(str(port) for port in sorted(known)) + r")(?![\w])"

        def real(match: re.Match[str]) -> str:
            documented = int(match[1])
            if documented not in self.real:
                self.real[documented] = _free_port()
            return str(self.real[documented])

        return re.sub(pattern, real, text)
