"""The composition root: one catalog, one session table, and the front ends that share them.

:class:`Server` builds every part from one :class:`~envwire.settings.Settings` and hands each
front end what it uses (its own settings section, the session table, the security, the
observer), never itself:

- gym-socket (:mod:`envwire.frontends.gymsocket`) and dm_env_rpc
  (:mod:`envwire.frontends.dmenvrpc`) on ports of their own;
- one HTTP port (:mod:`envwire.server.http`) with its mounts, asked in this order: the metrics
  and dashboard (:mod:`envwire.observe.dashboard`), the arena when ``arena_db`` is set
  (:mod:`envwire.arena.web`), then OpenEnv (:mod:`envwire.frontends.openenv`);
- a metrics-only listener when ``metrics`` has a port (:mod:`envwire.observe.scrape`).

As one worker of several (``--workers``, :mod:`envwire.server.supervisor`), it accepts on the
sockets its supervisor bound, marks its OpenEnv session tokens with its index, passes requests
for another worker's sessions (and the arena's, which worker 0 holds) to that worker, and serves
its mounts to the other workers on its own Unix socket (:mod:`envwire.server.relay`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import re
import resource
import signal
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from envwire.arena.web import arena_mount, arena_paths
from envwire.frontends.dmenvrpc import DmEnvRpcFrontEnd
from envwire.frontends.gymsocket import GymSocketFrontEnd
from envwire.frontends.openenv import OpenEnvMount, error_response, session_tokens
from envwire.observe import Observability
from envwire.observe.dashboard import ObserveWeb
from envwire.observe.gather import Gathered, Summed
from envwire.observe.gymspec import gymnasium_spec
from envwire.observe.hub import RecordSettings
from envwire.observe.scrape import metrics_listener
from envwire.observe.shipping import EPISODE_BODY, EpisodeInbox, episode_sender
from envwire.ports import DMENVRPC, FRONT_ENDS, GYM_SOCKET, HTTP
from envwire.protocols.http.http11 import Request
from envwire.registry import Catalog
from envwire.runtime.pool import WorkerPool
from envwire.runtime.ray import RayOptions, RayRuntime, require_ray
from envwire.runtime.workers import make_worker
from envwire.server.http import Guard, HttpFrontEnd, Mount
from envwire.server.listener import ThreadedListener
from envwire.server.parking import Parking
from envwire.server.relay import RelayMount, relay_front_end
from envwire.server.role import WorkerRole
from envwire.server.security import Security, connection_limits
from envwire.server.sessions import SessionTable
from envwire.server.tally import SharedAddressLimiter, Tally
from envwire.server.threads import ThreadPool
from envwire.settings import Settings
from envwire.sockets.buffers import BufferBudget

__all__ = ["FrontEnd", "Server", "print_line", "shutting_down"]

log = logging.getLogger("envwire")

#: A worker's mark on its OpenEnv session tokens: ``w<index>.`` ('.' is never in the rest).
_MARK = re.compile(r"w(\d+)\.")


class FrontEnd(Protocol):
    """A listener serving the session table."""

    name: str

    def start(self) -> tuple[str, int]:
        """Start accepting; return the bound (host, port)."""
        ...

    def stop(self) -> None:
        """Stop accepting and drop every connection."""
        ...

    def revoke(self, still_valid: Callable[[str], bool]) -> int:
        """Close the connections (or streams) of clients whose token ``still_valid`` no
        longer accepts (it is given each one's principal); how many."""
        ...


class Server:
    """Runs the front ends the settings turn on, over one session table, until stopped.

    Args:
        catalog: the envs served.
        settings: everything else (the defaults when None).
        health: extra fields of OpenEnv's ``/health`` (the code sandbox's enforcement).
        unavailable: envs of the catalog that cannot be loaded, with why (served anyway, at
            the operator's choice: ``/health`` names them).
        role: this process's place among the workers of a server (None: the only one).

    Raises:
        ConfigError: a token or TLS file cannot be used, or Ray is needed and missing.
    """

    def __init__(
        self,
        catalog: Catalog,
        settings: Settings | None = None,
        *,
        health: Callable[[], dict[str, Any]] = dict,
        unavailable: Mapping[str, str] | None = None,
        role: WorkerRole | None = None,
    ) -> None:
        self.catalog = catalog
        self.role = role
        self.settings = settings = settings or Settings()
        self.unavailable = dict(unavailable or {})
        self.health = health
        self.security = Security.from_settings(settings.security)
        self.ray = _ray_runtime(catalog, settings)
        # no process starts until a session of an env with pool isolation opens
        secrets = (settings.security.token_file, settings.security.tls_key)
        self.pool = WorkerPool(
            _pool_size(settings.server.pool_workers, role),
            protected=tuple(p for p in secrets if p),
        )
        self.observe = Observability(_record(settings, catalog, role))
        if self.observe.recorder is not None:
            specs = ((env_id, gymnasium_spec(spec)) for env_id, spec in catalog.items())
            self.observe.recorder.writer.env_specs = {k: v for k, v in specs if v is not None}
        self.tally = None if role is None else Tally(role.tally, role.index, role.count)
        if self.tally is not None:
            self.tally.clear(self.tally.index)  # a replacement starts from nothing
        self.sessions = SessionTable(
            catalog,
            capacity=settings.server.capacity,
            monitor_root=settings.server.monitor_root,
            worker_factory=functools.partial(make_worker, ray=self.ray, pool=self.pool),
            observer=self.observe,
            tally=self.tally,
        )
        #: The threads that serve connections while they have work, and where connections wait
        #: for their clients meanwhile (every front end but gRPC, which has its own threads).
        self.threads = ThreadPool(settings.server.max_threads, name="envwire-conn")
        #: The receive buffers all connections share beyond their own allowance.
        self.budget = BufferBudget(settings.server.max_buffered)
        self.parking = Parking(self.threads)
        self.front_ends: list[FrontEnd] = []
        self.local_mounts: list[Mount] = []
        self.addresses: dict[str, tuple[str, int]] = {}
        self._stopped = threading.Event()

    def _front_ends(self) -> list[FrontEnd]:
        """The listeners the settings turn on, in the order they start: each front end of
        :data:`envwire.ports.FRONT_ENDS` with a port, built by its row's builder, then the
        metrics listener."""
        settings, host = self.settings, self.settings.server.host
        found = [
            _BUILDERS[row.name](self)
            for row in FRONT_ENDS
            if settings.port(row.section) is not None
        ]
        if settings.observe.metrics is not None:
            found.append(
                metrics_listener(
                    settings.observe.metrics,
                    host=host,
                    observe=self.observe,
                    security=self.security,
                    threads=self.threads,
                    parking=self.parking,
                    peers=self._peers(),
                )
            )
        if self.role is not None:
            for front in found:
                sock = self.role.listener(front.name)
                if sock is not None and isinstance(front, ThreadedListener):
                    front.adopt(sock)
        return found

    def _gym_socket(self) -> GymSocketFrontEnd:
        """The gym-socket port."""
        settings, host = self.settings, self.settings.server.host
        security = settings.security
        return GymSocketFrontEnd(
            settings.gym_socket,
            host=host,
            sessions=self.sessions,
            security=self.security,
            limits=connection_limits(security, security.max_connections, host),
            observe=self.observe,
            idle_timeout=settings.server.idle_timeout,
            budget=self.budget,
            threads=self.threads,
            parking=self.parking,
        )

    def _dmenvrpc(self) -> DmEnvRpcFrontEnd:
        """The dm_env_rpc port (gRPC's server, which binds its port itself: in a worker, the
        port its supervisor chose)."""
        settings, host = self.settings, self.settings.server.host
        security, section = settings.security, settings.dmenvrpc
        limits = connection_limits(security, section.grpc_max_connections, host)
        if self.role is not None and DMENVRPC.name in self.role.ports:
            section = dataclasses.replace(section, port=self.role.ports[DMENVRPC.name])
        return DmEnvRpcFrontEnd(
            section,
            shared_port=self.role is not None,
            host=host,
            sessions=self.sessions,
            catalog=self.catalog,
            security=self.security,
            per_address=limits.per_address,
            per_token=limits.per_token,
            observe=self.observe,
            idle_timeout=settings.server.idle_timeout,
            handshake_timeout=limits.handshake_timeout,
            max_transports=security.max_connections,
        )

    def _http(self) -> HttpFrontEnd:
        """The HTTP port: the dashboard, the arena (when on), then OpenEnv."""
        settings, host = self.settings, self.settings.server.host
        security = self.security
        guard = Guard(security, host, error_response)
        web = ObserveWeb(self.observe, security.tokens, security.public_metrics)
        mounts: list[Mount] = [Gathered(web, self._peers()) if self.role is not None else web]
        role = self.role
        arena_here = role is None or role.index == 0
        if settings.arena.arena_db is not None and arena_here:
            mounts.append(
                arena_mount(
                    settings.arena,
                    self.catalog,
                    # arena envs with ray isolation go to the server's Ray cluster
                    worker_factory=self.sessions.worker_factory,
                    observer=self.observe,
                    on_actions=self.observe.arena_acted,
                )
            )
        openenv = OpenEnvMount(
            settings.openenv,
            sessions=self.sessions,
            catalog=self.catalog,
            observe=self.observe,
            guard=guard,
            idle_timeout=settings.server.idle_timeout,
            health=self._health,
            token_prefix="" if role is None else f"w{role.index}.",
            http_sessions=self._http_sessions(),
        )
        if role is not None:  # OpenEnv's /status counts every worker's sessions
            mounts.append(Summed(openenv, self._peers(), "/status", frozenset({"capacity"})))
        mounts.append(openenv)
        #: What the worker's relay socket serves to the other workers: its own figures and
        #: sessions (nothing passed on again, nothing summed again).
        self.local_mounts = [m for m in mounts if not isinstance(m, Summed)]
        if role is not None:
            mounts.insert(0, RelayMount(role.index, role.relays, self._owner))
        limits = connection_limits(settings.security, settings.security.max_connections, host)
        return HttpFrontEnd(
            settings.http,
            host=host,
            guard=guard,
            limits=limits,
            mounts=mounts,
            budget=self.budget,
            threads=self.threads,
            parking=self.parking,
        )

    def _http_sessions(self) -> SharedAddressLimiter | None:
        """OpenEnv's HTTP and MCP sessions counted across the workers (None: one process)."""
        role, openenv = self.role, self.settings.openenv
        if role is None:
            return None
        return SharedAddressLimiter(
            openenv.http_max_sessions,
            openenv.http_sessions_per_address,
            "http sessions",
            path=f"{role.tally}-http-sessions",
            index=role.index,
            count=role.count,
        )

    def _inbox(self) -> list[Mount]:
        """Worker 0's mount taking the other workers' episodes, when recording."""
        recorder = self.observe.recorder
        if recorder is None or self.role is None or self.role.index != 0:
            return []
        return [EpisodeInbox(recorder.writer.offer)]

    def _peers(self) -> list[str]:
        """The other workers' Unix sockets (none for a server of one process)."""
        role = self.role
        if role is None:
            return []
        return [path for i, path in enumerate(role.relays) if i != role.index]

    def _owner(self, request: Request) -> int | None:
        """The worker a request belongs to: worker 0 for the arena's paths, the worker an
        OpenEnv session token names; None for whichever worker got it."""
        if self.settings.arena.arena_db is not None and self._arena_owns(request.path):
            return 0
        for token in session_tokens(request):
            mark = _MARK.match(token)
            if mark is not None:
                return int(mark[1])
        return None

    @functools.cached_property
    def _arena_owns(self) -> Callable[[str], bool]:
        return arena_paths()

    def _health(self) -> dict[str, Any]:
        """``/health``'s extra fields: the caller's, and the envs that cannot be loaded."""
        extra = self.health()
        if self.unavailable:
            extra["unavailable"] = self.unavailable
        return extra

    def reload_tokens(self) -> int:
        """Re-read the token file (SIGHUP); when the new tokens are in force, close every
        connection, WebSocket session and gRPC stream opened with a token no longer in it
        (HTTP sessions need the token on every request: theirs are refused from now on).
        Returns how many were closed."""
        tokens = self.security.tokens
        if tokens is None or not tokens.reload():
            return 0
        closed = sum(front.revoke(tokens.holds) for front in self.front_ends)
        if closed:
            log.warning("%d connections of revoked tokens closed", closed)
        return closed

    def start(self, announce: Callable[[str], None] | None = None) -> None:
        """Start every front end the settings turn on; announce each listening address.

        On the main thread, SIGINT and SIGTERM from now on make :meth:`serve_forever` return,
        and SIGHUP re-reads the token file.

        Raises:
            ConfigError: the host is not loopback, and neither tokens nor ``insecure`` are set.
            OSError: a front end cannot listen (``OSError.front_end`` names it).
        """
        self.security.check_exposure(self.settings.server.host)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: self._stopped.set())
            tokens = self.security.tokens
            if tokens is not None:
                signal.signal(signal.SIGHUP, lambda *_: self.reload_tokens())
        if self.ray is not None:
            self.ray.connect()
        _raise_file_limit()
        self.observe.start()
        self.parking.start()
        tls = " (TLS)" if self.security.tls is not None else ""
        fronts = self._front_ends()
        if self.role is None:  # a worker's ports were bound by its supervisor
            names = [f.name for f in fronts]
            _check_ports(self.settings.server.host, self.settings.ports(), names)
        for front in fronts:
            try:
                host, bound = front.start()
            except OSError as exc:
                exc.front_end = front.name  # type: ignore[attr-defined]
                raise
            self.front_ends.append(front)
            self.addresses[front.name] = (host, bound)
            if announce is not None:
                announce(f"envwire: {front.name} listening on {host}:{bound}{tls}")
        if self.role is not None:
            http = self.settings.http
            # the largest body is the client's, checked where it came in, or an episode
            largest = max(http.max_message_size, EPISODE_BODY)
            relay = relay_front_end(
                self.role.relay_listener(),
                dataclasses.replace(http, max_message_size=largest),
                guard=Guard(self.security, self.settings.server.host, error_response),
                # this worker's own figures, for the others to sum (the folder is private)
                mounts=[
                    ObserveWeb(self.observe, None, True),
                    *self._inbox(),
                    *self.local_mounts[1:],
                ],
                threads=self.threads,
                parking=self.parking,
            )
            relay.start()
            self.front_ends.append(relay)

    def serve_forever(self, announce: Callable[[str], None] | None = None) -> None:
        """Block until SIGINT/SIGTERM (or :meth:`stop`), then shut down cleanly, announcing
        when it begins and when it is done; from then on a second Ctrl-C (SIGINT) stops the
        process at once (``KeyboardInterrupt``), as uvicorn's does."""
        while not self._stopped.wait(0.5):
            pass
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.default_int_handler)
        if announce is not None:
            announce(shutting_down(len(self.sessions)))
        self.shutdown()
        if announce is not None:
            announce("envwire: stopped")

    def stop(self) -> None:
        """Ask :meth:`serve_forever` to return."""
        self._stopped.set()

    def shutdown(self) -> None:
        """Stop every front end and free every session."""
        for front in reversed(self.front_ends):
            try:
                front.stop()
            except Exception:
                log.exception("stopping %s failed", front.name)
        self.front_ends.clear()
        self.parking.stop()
        self.threads.stop()
        self.sessions.close_all()
        self.pool.close()
        self.observe.close()

    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


#: How each front end of :data:`envwire.ports.FRONT_ENDS` is built, by its port's name: the
#: only table above the front ends that names them (a test checks every row has its builder).
_BUILDERS: dict[str, Callable[[Server], FrontEnd]] = {
    GYM_SOCKET.name: Server._gym_socket,
    HTTP.name: Server._http,
    DMENVRPC.name: Server._dmenvrpc,
}


def _check_ports(host: str, ports: Mapping[str, int | None], names: list[str]) -> None:
    """Bind each front end's port, all at once, before any listens: a port in use is then
    reported before another front end has said it listens (and before gRPC, which would
    log its own line about it).

    Raises:
        OSError: a port cannot be bound (``OSError.front_end`` names its front end).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with contextlib.ExitStack() as held:
        for name in names:
            port = ports.get(name)
            if not port:  # 0: any free port, which cannot be in use
                continue
            probe = held.enter_context(socket.socket(family, socket.SOCK_STREAM))
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as exc:
                exc.front_end = name  # type: ignore[attr-defined]
                raise


def _raise_file_limit() -> None:
    """Let this process open as many files as the system lets it: every connection is one, and
    thousands of clients of one trainer host are what the server is for (the soft limit is
    often 1,024, its hard limit far more)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.info("cannot raise the open-file limit from %d: %s", soft, exc)


def _pool_size(setting: int, role: WorkerRole | None) -> int:
    """The pool's processes in this worker: the setting, which is per worker; its default (0,
    one per core) shares the cores among the workers."""
    if setting or role is None:
        return setting
    return max(1, (os.cpu_count() or 1) // role.count)


def _record(
    settings: Settings, catalog: Catalog, role: WorkerRole | None = None
) -> RecordSettings | None:
    """What to record: every env with ``record`` set, else the envs whose ``[[env]]`` table
    says ``record = true``, into ``record_dir``. A worker of several but worker 0 sends its
    episodes to worker 0, which writes them all (:mod:`envwire.observe.shipping`)."""
    observe = settings.observe
    chosen = frozenset(env_id for env_id, spec in catalog.items() if spec.record)
    if not observe.record and not chosen:
        return None
    forward = None
    if role is not None and role.index != 0:  # worker 0 writes every worker's episodes
        forward = episode_sender(role.relays[0])
    return RecordSettings(
        root=observe.record or observe.record_dir,
        everything=bool(observe.record),
        envs=chosen,
        fraction=observe.record_fraction,
        frames=observe.record_frames,
        max_bytes=observe.record_max_bytes,
        forward=forward,
        overflow=observe.record_overflow,
    )


def _ray_runtime(catalog: Catalog, settings: Settings) -> RayRuntime | None:
    """The Ray runtime, if any env of the catalog runs on Ray (its options checked now).

    Raises:
        ConfigError: Ray is not installed, or an env's ``[env.ray]`` table is wrong.
    """
    on_ray = [spec for spec in catalog.values() if spec.resolved_isolation == "ray"]
    if not on_ray:
        return None
    require_ray()
    for spec in on_ray:
        RayOptions.from_table(spec.id, spec.ray)
    return RayRuntime(settings.server.ray_address, settings.server.place_timeout)


def shutting_down(sessions: int) -> str:
    """The line a server prints when SIGINT or SIGTERM begins its shutdown."""
    return f"envwire: shutting down ({sessions} session{'' if sessions == 1 else 's'} open)"


def print_line(line: str) -> None:
    """Announce on stdout, flushed at once (scripts wait for these lines)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
