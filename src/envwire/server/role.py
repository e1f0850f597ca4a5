"""What a worker of ``envwire serve --workers N`` is told by its supervisor
(:mod:`envwire.server.supervisor`), and what it does with it: the role travels in the
:data:`ROLE_VARIABLE` environment variable; with it the worker takes its inherited listening
sockets, ends with its supervisor (``PR_SET_PDEATHSIG``, and the end of file of a pipe where
that is missing), and says once that it listens.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import select
import signal
import socket
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["ROLE_VARIABLE", "WorkerRole"]

log = logging.getLogger("envwire.workers")

#: The environment variable that makes ``envwire serve`` a worker of a supervisor.
ROLE_VARIABLE = "ENVWIRE_WORKER"

_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class WorkerRole:
    """What a worker process is told by its supervisor.

    Attributes:
        index: this worker's number, from 0 (worker 0 holds the arena).
        count: how many workers the server has.
        fds: the listening sockets it inherits, by front end name.
        ports: the ports of the front ends that bind by themselves (gRPC), with SO_REUSEPORT.
        relay_fd: its own listening Unix socket, where the other workers reach it.
        relays: every worker's Unix socket path, by index.
        ready_fd: the pipe to write one byte to once every front end listens.
        parent: the supervisor's process id.
        life_fd: a pipe the supervisor never writes to: its end of file means the supervisor
            is gone (where ``PR_SET_PDEATHSIG`` is missing, or came late).
        tally: the file of the counts the workers share (:mod:`envwire.server.tally`).
    """

    index: int
    count: int
    fds: dict[str, int] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    relay_fd: int = -1
    relays: tuple[str, ...] = ()
    ready_fd: int = -1
    parent: int = 0
    tally: str = ""
    life_fd: int = -1

    def to_text(self) -> str:
        """The role as the environment variable holds it."""
        return json.dumps(
            {
                "index": self.index,
                "count": self.count,
                "fds": self.fds,
                "ports": self.ports,
                "relay_fd": self.relay_fd,
                "relays": list(self.relays),
                "ready_fd": self.ready_fd,
                "parent": self.parent,
                "tally": self.tally,
                "life_fd": self.life_fd,
            }
        )

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> WorkerRole | None:
        """The role this process was given, or None when it is no supervisor's worker (the
        variable is taken out of ``os.environ``: the processes a worker starts are not
        workers)."""
        text = (
            os.environ.pop(ROLE_VARIABLE, None) if environ is None else environ.get(ROLE_VARIABLE)
        )
        if not text:
            return None
        data = json.loads(text)
        return cls(
            index=int(data["index"]),
            count=int(data["count"]),
            fds={str(k): int(v) for k, v in data["fds"].items()},
            ports={str(k): int(v) for k, v in data["ports"].items()},
            relay_fd=int(data["relay_fd"]),
            relays=tuple(str(p) for p in data["relays"]),
            ready_fd=int(data["ready_fd"]),
            parent=int(data["parent"]),
            tally=str(data["tally"]),
            life_fd=int(data["life_fd"]),
        )

    def die_with_parent(self) -> None:
        """Get SIGTERM from the kernel when the supervisor dies (Linux); end now if it died
        already."""
        if sys.platform == "linux":
            try:
                libc = ctypes.CDLL(None, use_errno=True)
                libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            except (OSError, AttributeError):
                log.info("cannot ask to end with the supervisor: no prctl")
        if os.getppid() != self.parent:
            os.kill(os.getpid(), signal.SIGTERM)
        if self.life_fd >= 0:
            threading.Thread(target=self._watch_parent, name="envwire-parent", daemon=True).start()

    def _watch_parent(self) -> None:
        """SIGTERM to this worker once the supervisor's end of the life pipe closes."""
        while True:
            ready, _, _ = select.select([self.life_fd], [], [], 60.0)
            if ready and not os.read(self.life_fd, 1):
                log.warning("worker %d: the server's supervisor is gone; stopping", self.index)
                os.kill(os.getpid(), signal.SIGTERM)
                return

    def listener(self, name: str) -> socket.socket | None:
        """The inherited listening socket of front end ``name``, if it has one."""
        fd = self.fds.get(name)
        return None if fd is None else socket.socket(fileno=fd)

    def relay_listener(self) -> socket.socket:
        """This worker's own Unix socket, listening."""
        return socket.socket(fileno=self.relay_fd)

    def ready(self) -> None:
        """Tell the supervisor that every front end listens (once)."""
        try:
            os.write(self.ready_fd, b"1")
        except OSError:  # the supervisor stopped waiting: nothing to tell
            pass
        finally:
            with contextlib.suppress(OSError):
                os.close(self.ready_fd)
