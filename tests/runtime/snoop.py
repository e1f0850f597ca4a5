"""An env that snoops on the server from its pool worker process (the pooled-isolation tests
serve it): each step tries one thing and says in its info what came of it."""

from __future__ import annotations

import os
from typing import Any

import gymnasium
from gymnasium import spaces

__all__ = ["SnoopEnv"]


def _server_pid() -> int:
    """The server: the parent of the forkserver that forked this worker."""
    with open(f"/proc/{os.getppid()}/status") as status:
        for line in status:
            if line.startswith("PPid:"):
                return int(line.split()[1])
    raise RuntimeError("no parent pid")


def _outcome(attempt: Any) -> str:
    try:
        result = attempt()
    except OSError as exc:
        return f"{type(exc).__name__} errno {exc.errno}"
    return f"ok: {str(result)[:40]}"


class SnoopEnv(gymnasium.Env[int, int]):
    """Action 0: read the token file; 1: signal the server (signal 0: only the permission is
    tried); 2: open the server's memory (ptrace access); 3: hard-link the token file into
    /tmp; 4: the worker's descriptors and process group."""

    observation_space = spaces.Discrete(1)
    action_space = spaces.Discrete(5)

    def __init__(self, token_file: str = "") -> None:
        self.token_file = token_file

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        super().reset(seed=seed)
        return 0, {}

    def step(self, action: int) -> tuple[int, float, bool, bool, dict[str, Any]]:
        server = _server_pid()
        link = f"/tmp/envwire-snoop-{os.getpid()}"
        attempts = {
            0: lambda: open(self.token_file).read(),  # noqa: SIM115 (read at once)
            1: lambda: os.kill(server, 0),
            2: lambda: open(f"/proc/{server}/mem", "rb").read(1),  # noqa: SIM115
            3: lambda: os.link(self.token_file, link),
        }
        if action in attempts:
            outcome = _outcome(attempts[action])
            if os.path.lexists(link):
                os.unlink(link)
        else:
            targets = {}
            for fd in os.listdir("/proc/self/fd"):
                try:
                    targets[int(fd)] = os.readlink(f"/proc/self/fd/{fd}")
                except OSError:
                    continue  # the listing's own descriptor
            same_group = os.getpgid(0) == os.getpgid(server)
            outcome = f"same group: {same_group}; fds: {targets}"
        return 0, 0.0, False, False, {"outcome": outcome}
