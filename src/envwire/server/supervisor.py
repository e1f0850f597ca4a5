"""``envwire serve --workers N``: one parent that binds every port once and runs N worker
processes, each a whole server on those ports (as gunicorn's arbiter runs its workers).

The parent (:class:`Supervisor`) binds each front end's port before any worker starts, so port
0 picks one port that every worker serves. TCP listeners it binds and listens on itself, and each
worker inherits the listening socket (``pass_fds``): the kernel hands each new connection to one
worker blocked in ``accept``, and the connection stays in that worker, with no extra hop. gRPC's
server binds by itself: the parent holds the port with ``SO_REUSEPORT`` set (bound, never
listening) and each worker's gRPC server binds it with ``SO_REUSEPORT`` too.

Each worker also gets a Unix socket of its own, made by the parent in a private folder and kept
across the worker's replacements: the other workers reach it there for what clients address by
id across connections (:mod:`envwire.server.relay`).

The workers are ``envwire serve`` again, with the same arguments, told their role by an
environment variable (:mod:`envwire.server.role`). A worker that dies is replaced, and the
log says which one died, how, and by which process it was replaced. A replacement that
cannot start (it exits before it listens, or does not listen within :data:`READY_TIMEOUT`) is
started again after a delay that doubles each time (:data:`RESTART_DELAY` up to
:data:`MAX_RESTART_DELAY`); after :data:`MAX_FAILED_STARTS` such starts in a row the server
stops, saying why, with exit status 1 (a worker that always crashes at import would otherwise be
restarted forever while its share of the server is gone). SIGHUP is passed to
every worker; SIGINT and SIGTERM stop them all within :data:`GRACE` seconds (SIGKILL after), and a
worker whose parent dies gets SIGTERM from the kernel (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence

from envwire.server.listener import BACKLOG
from envwire.server.role import ROLE_VARIABLE, WorkerRole
from envwire.server.tally import SESSIONS, Tally, make_tally_file

__all__ = [
    "GRACE",
    "MAX_FAILED_STARTS",
    "MAX_RESTART_DELAY",
    "READY_TIMEOUT",
    "RESTART_DELAY",
    "Supervisor",
    "WorkerFailed",
    "bind_ports",
    "resolve_workers",
]

log = logging.getLogger("envwire.workers")

#: Seconds the workers have to stop after SIGINT or SIGTERM before they are killed.
GRACE = 10.0

#: Seconds a worker may take to start (import, load the catalog, start every front end).
READY_TIMEOUT = 120.0

#: Seconds between a worker's start and its replacement's, when it died as soon as it started
#: (a worker that cannot start is not restarted in a tight loop); doubled after each failed
#: start in a row, up to :data:`MAX_RESTART_DELAY`.
RESTART_DELAY = 1.0

#: The longest delay before a replacement's start.
MAX_RESTART_DELAY = 30.0

#: Failed starts in a row of one worker after which the server stops (exit status 1).
MAX_FAILED_STARTS = 5


def resolve_workers(value: int | str) -> int:
    """The number of workers a ``workers`` setting means (``auto``: the cores this process
    may run on)."""
    if value == "auto":
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):  # no affinity on this platform
            return max(1, os.cpu_count() or 1)
    return max(1, int(value))


def bind_ports(
    host: str, ports: Mapping[str, int | None], shared: Collection[str] = ()
) -> dict[str, socket.socket]:
    """Bind each front end's port (None: off; 0: a free one): the listening sockets the
    workers inherit, and for the names in ``shared`` a socket that holds the port with
    SO_REUSEPORT for the workers to bind too.

    Raises:
        OSError: a port cannot be bound (``OSError.front_end`` names its front end).
    """
    bound: dict[str, socket.socket] = {}
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for name, asked in ports.items():
        if asked is None:
            continue
        port = asked
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if name in shared:
                # a port some other process holds, even with SO_REUSEPORT, is an error, not a
                # silently shared port: bind it alone first
                with socket.socket(family, socket.SOCK_STREAM) as probe:
                    probe.bind((host, port))
                    port = probe.getsockname()[1]
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            if name not in shared:
                sock.listen(BACKLOG)
        except OSError as exc:
            sock.close()
            for other in bound.values():
                other.close()
            exc.front_end = name  # type: ignore[attr-defined]
            raise
        bound[name] = sock
    return bound


class WorkerFailed(Exception):
    """A worker could not start (its own error is on stderr)."""


def _how(status: int) -> str:
    """A worker's exit status in words."""
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exited with status {status}"


class _Child:
    """One worker process and what the supervisor knows of it."""

    def __init__(self, index: int, process: subprocess.Popen[bytes], ready: int) -> None:
        self.index = index
        self.process = process
        self.ready = ready  # the read end of its ready pipe (-1 once closed)
        self.started = time.monotonic()
        self.listening = False  # it said so on its ready pipe

    def close_ready(self) -> None:
        if self.ready >= 0:
            os.close(self.ready)
            self.ready = -1


class Supervisor:
    """Runs ``count`` workers of ``command`` on the ports in ``sockets``, replaces those that
    die, and stops them all when told.

    Args:
        command: the worker's command line (``envwire serve`` with the server's arguments).
        count: how many workers.
        sockets: what :func:`bind_ports` bound, by front end name.
        shared: the front ends whose port the workers bind themselves (SO_REUSEPORT).
        rundir: a private folder (mode 0700) for the workers' Unix sockets.
        grace: seconds the workers have to stop before they are killed.
        restart_delay, max_restart_delay: the first and the longest delay before a
            replacement of a worker that died as soon as it started.
        max_failed_starts: failed starts in a row of one worker after which :meth:`serve`
            stops the server (:attr:`failure` says why).
        ready_timeout: seconds a replacement may take to listen before it is killed (a
            failed start).
    """

    def __init__(
        self,
        command: Sequence[str],
        count: int,
        sockets: Mapping[str, socket.socket],
        shared: Collection[str],
        rundir: str,
        *,
        grace: float = GRACE,
        restart_delay: float = RESTART_DELAY,
        max_restart_delay: float = MAX_RESTART_DELAY,
        max_failed_starts: int = MAX_FAILED_STARTS,
        ready_timeout: float = READY_TIMEOUT,
    ) -> None:
        self.command = list(command)
        self.count = count
        self.sockets = dict(sockets)
        self.shared = frozenset(shared)
        self.grace = grace
        self.restart_delay, self.max_restart_delay = restart_delay, max_restart_delay
        self.max_failed_starts = max_failed_starts
        self.ready_timeout = ready_timeout
        #: Why :meth:`serve` stopped the server by itself (a worker that cannot start), or "".
        self.failure = ""
        self._failed_starts = [0] * count  # of each worker, in a row
        self.relay_paths = tuple(os.path.join(rundir, f"worker-{i}.sock") for i in range(count))
        self.relays: list[socket.socket] = []
        for path in self.relay_paths:
            relay = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            relay.bind(path)
            relay.listen(BACKLOG)
            self.relays.append(relay)
        self.tally_path = os.path.join(rundir, "tally")
        make_tally_file(self.tally_path, count)
        self.tally = Tally(self.tally_path, -1, count)
        self._life = os.pipe()  # the workers hold the read end; this process, the write end
        self.children: list[_Child | None] = [None] * count
        self._due: dict[int, float] = {}  # workers to replace, and when
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._hup = False
        self.status = 0

    def _spawn(self, index: int) -> _Child:
        ready_read, ready_write = os.pipe()
        fds = {n: s.fileno() for n, s in self.sockets.items() if n not in self.shared}
        ports = {n: s.getsockname()[1] for n, s in self.sockets.items() if n in self.shared}
        role = WorkerRole(
            index=index,
            count=self.count,
            fds=fds,
            ports=ports,
            relay_fd=self.relays[index].fileno(),
            relays=self.relay_paths,
            ready_fd=ready_write,
            parent=os.getpid(),
            tally=self.tally_path,
            life_fd=self._life[0],
        )
        env = dict(os.environ, **{ROLE_VARIABLE: role.to_text()})
        try:
            process = subprocess.Popen(
                self.command,
                env=env,
                stdin=subprocess.DEVNULL,
                pass_fds=(*fds.values(), role.relay_fd, ready_write, role.life_fd),
            )
        finally:
            os.close(ready_write)
        return _Child(index, process, ready_read)

    def start(self, timeout: float = READY_TIMEOUT) -> None:
        """Start every worker and wait until each listens (or a stop is asked for:
        :attr:`stopping`).

        Raises:
            WorkerFailed: a worker exited, or did not start within ``timeout``, first (the
                others are stopped).
        """
        for index in range(self.count):
            self.children[index] = self._spawn(index)
        deadline = time.monotonic() + timeout
        waiting = {c.ready: c for c in self.children if c is not None}
        while waiting and not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise WorkerFailed(f"a worker did not start within {timeout:g} seconds")
            readable, _, _ = select.select(list(waiting), [], [], min(left, 1.0))
            for fd in readable:
                child = waiting.pop(fd)
                got = os.read(fd, 1)
                child.close_ready()
                child.listening = bool(got)
                if not got:  # the pipe closed unwritten: it exited
                    status = child.process.wait(timeout)
                    self.stop()
                    raise WorkerFailed(f"worker {child.index} could not start ({_how(status)})")

    @property
    def stopping(self) -> bool:
        """Whether SIGINT/SIGTERM (or :meth:`request_stop`) came."""
        return self._stop.is_set()

    def handle_signals(self, forward_hup: bool) -> None:
        """On the main thread: SIGINT/SIGTERM stop the workers, SIGHUP (when ``forward_hup``)
        is passed to each of them."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: self.request_stop())
        if forward_hup:
            signal.signal(signal.SIGHUP, lambda *_: self._note_hup())

    def _note_hup(self) -> None:
        self._hup = True
        self._wake.set()  # the loop tells the workers and goes on

    def pids(self) -> list[int]:
        """The workers' process ids now."""
        return [c.process.pid for c in self.children if c is not None]

    def serve(self, poll: float = 0.2, announce: Callable[[int | None], None] | None = None) -> int:
        """Watch the workers until SIGINT/SIGTERM (or :meth:`request_stop`), replacing those
        that die; then stop them all, calling ``announce`` with the sessions open across the
        workers when the shutdown begins and with None when it is done (from then on, on the
        main thread, a second SIGINT stops this process at once). Returns the exit status: 0,
        or 1 when a worker ended with an error of its own (a recording that failed) or could
        not start ``max_failed_starts`` times in a row (:attr:`failure`)."""
        while True:
            self._wake.wait(poll)
            self._wake.clear()
            if self._hup:
                self._hup = False
                for child in self.children:
                    if child is not None and child.process.poll() is None:
                        child.process.send_signal(signal.SIGHUP)
            if self._stop.is_set():
                break
            self._watch()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if announce is not None:
            announce(self.tally.others(SESSIONS))
        status = self.stop()
        if announce is not None:
            announce(None)
        return status

    def request_stop(self) -> None:
        """Make :meth:`serve` stop the workers and return (any thread)."""
        self._stop.set()
        self._wake.set()

    def _watch(self) -> None:
        """Note the replacements that listen and the workers that died; start the
        replacements that are due; stop the server when one cannot start."""
        self._note_ready()
        now = time.monotonic()
        for index, child in enumerate(self.children):
            status = None if child is None else child.process.poll()
            if child is None or status is None:
                continue
            child.close_ready()
            self.children[index] = None
            self.tally.clear(index)  # its sessions are gone
            if not child.listening:
                self._failed_starts[index] += 1
                failed = self._failed_starts[index]
                if failed >= self.max_failed_starts:
                    self.failure = (
                        f"worker {index} could not start {failed} times in a row (the last "
                        f"{_how(status)}); stopping the server"
                    )
                    log.error("%s", self.failure)
                    self.status = 1
                    self.request_stop()
                    return
                delay = min(self.restart_delay * 2 ** (failed - 1), self.max_restart_delay)
                self._due[index] = now + delay
                log.warning(
                    "worker %d (process %d) %s before it listened (%d failed starts in a row); "
                    "starting it again in %g seconds",
                    *(index, child.process.pid, _how(status), failed, delay),
                )
                continue
            early = now - child.started < self.restart_delay
            self._due[index] = child.started + self.restart_delay if early else now
            log.warning(
                "worker %d (process %d) %s; its sessions ended; it is being replaced",
                index,
                child.process.pid,
                _how(status),
            )
        for index, due in list(self._due.items()):
            if now >= due:
                del self._due[index]
                replacement = self._spawn(index)  # it serves when it is ready
                self.children[index] = replacement
                log.warning("worker %d replaced by process %d", index, replacement.process.pid)

    def _note_ready(self) -> None:
        """Read the ready pipes of the replacements (without waiting); kill those that did not
        listen within ``ready_timeout`` (counted as failed starts when they are reaped)."""
        starting = {c.ready: c for c in self.children if c is not None and c.ready >= 0}
        readable = select.select(list(starting), [], [], 0)[0] if starting else []
        for fd in readable:
            child = starting.pop(fd)
            child.listening = bool(os.read(fd, 1))
            child.close_ready()
            if child.listening:
                self._failed_starts[child.index] = 0
        for child in starting.values():
            if time.monotonic() - child.started > self.ready_timeout:
                log.warning(
                    "worker %d (process %d) did not listen within %g seconds; killed",
                    *(child.index, child.process.pid, self.ready_timeout),
                )
                child.close_ready()
                child.process.kill()

    def stop(self) -> int:
        """SIGTERM every worker, SIGKILL those still running after the grace period, and
        close the ports. Returns the exit status (see :meth:`serve`)."""
        alive = [c for c in self.children if c is not None]
        for child in alive:
            if child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        for child in alive:
            try:
                child.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning(
                    "worker %d (process %d) did not stop within %g seconds; killed",
                    child.index,
                    child.process.pid,
                    self.grace,
                )
                child.process.kill()
                child.process.wait(self.grace)
            child.close_ready()
            if child.process.returncode not in (0, -signal.SIGTERM, -signal.SIGKILL):
                self.status = 1
        self.children = [None] * self.count
        self._due.clear()
        for sock in (*self.sockets.values(), *self.relays):
            sock.close()
        self.tally.close()
        for fd in self._life:
            with contextlib.suppress(OSError):
                os.close(fd)
        return self.status
