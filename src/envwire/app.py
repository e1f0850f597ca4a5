"""The server: one catalog, one session table, and the front ends that share them."""

from __future__ import annotations

import functools
import importlib
import logging
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from envwire.observe import Observability
from envwire.observe.hub import RecordSettings
from envwire.registry import Catalog
from envwire.runtime.workers import make_worker
from envwire.server.security import Security
from envwire.server.sessions import SessionTable

__all__ = [
    "EXTRA_LISTENERS",
    "FRONT_ENDS",
    "FrontEnd",
    "FrontEndSpec",
    "Server",
    "ServerConfig",
]

log = logging.getLogger("envwire")


class FrontEnd(Protocol):
    """A transport serving the session table."""

    name: str

    def start(self) -> tuple[str, int]:
        """Start accepting; return the bound (host, port)."""
        ...

    def stop(self) -> None:
        """Stop accepting and drop every connection."""
        ...


@dataclass(frozen=True, slots=True)
class FrontEndSpec:
    """A front end the server can run: its name, default port and where its class lives."""

    name: str
    option: str
    default_port: int
    target: str  # "module:Class", constructed as Class(server, host, port)


#: Every front end ``envwire serve`` knows, in the order they start.
FRONT_ENDS: tuple[FrontEndSpec, ...] = (
    FrontEndSpec("gym-socket", "gym_socket", 5001, "envwire.frontends.gymsocket:GymSocketFrontEnd"),
    FrontEndSpec("http", "http", 8000, "envwire.server.http:HttpFrontEnd"),
    FrontEndSpec("grpc", "grpc", 50051, "envwire.frontends.dmenvrpc:GrpcFrontEnd"),
)

#: Listeners that are off unless given a port: ``--metrics PORT`` serves ``/metrics`` alone
#: (for servers whose HTTP front end is off; the HTTP front end serves it too).
EXTRA_LISTENERS: tuple[FrontEndSpec, ...] = (
    FrontEndSpec("metrics", "metrics", 0, "envwire.observe.scrape:MetricsListener"),
)


@dataclass
class ServerConfig:
    """Everything ``envwire serve`` can set, with its defaults."""

    host: str = "127.0.0.1"
    ports: dict[str, int | None] = field(default_factory=dict)  # None = front end off
    capacity: int | None = None
    monitor_root: str | None = "envwire-monitor"
    monitor_layout: str = "auto"  # gym-socket Monitor packets without the flag: auto, seed, video
    idle_timeout: float | None = 3600.0
    ray_address: str | None = None  # the Ray cluster of envs with ray isolation
    place_timeout: float = 30.0  # seconds a session waits to be placed on the Ray cluster
    #: Front-end settings, and the security settings of :mod:`envwire.server.security`
    #: (``token_file``, ``tls_cert``, ``tls_key``, ``insecure``, limits).
    options: dict[str, Any] = field(default_factory=dict)
    record: RecordSettings | None = None  # recording episodes as Minari datasets: off


class Server:
    """Runs the configured front ends over one session table until stopped."""

    def __init__(self, catalog: Catalog, config: ServerConfig | None = None) -> None:
        self.catalog = catalog
        self.config = config or ServerConfig()
        #: Tokens, TLS and allowed names, shared by every front end (raises ConfigError).
        self.security = Security.from_options(self.config.options)
        self.ray = _ray_runtime(catalog, self.config)
        self.observe = Observability(self.config.record)
        self.sessions = SessionTable(
            catalog,
            capacity=self.config.capacity,
            monitor_root=self.config.monitor_root,
            worker_factory=functools.partial(make_worker, ray=self.ray),
            observer=self.observe,
        )
        self.front_ends: list[FrontEnd] = []
        self.addresses: dict[str, tuple[str, int]] = {}
        self._stopped = threading.Event()

    def start(self, announce: Callable[[str], None] | None = None) -> None:
        """Start every front end whose port is not None; announce each listening address.

        On the main thread, SIGINT and SIGTERM from now on make :meth:`serve_forever` return,
        and SIGHUP re-reads the token file.

        Raises:
            ConfigError: the host is not loopback, and neither tokens nor ``insecure`` are set.
            OSError: a front end cannot listen.
        """
        self.security.check_exposure(self.config.host)
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: self._stopped.set())
            tokens = self.security.tokens
            if tokens is not None:
                signal.signal(signal.SIGHUP, lambda *_: tokens.reload())
        if self.ray is not None:
            self.ray.connect()
        self.observe.start()
        ports = self.config.ports
        listeners = [(s, ports.get(s.name, s.default_port)) for s in FRONT_ENDS]
        listeners += [(s, ports.get(s.name)) for s in EXTRA_LISTENERS]
        for spec, port in listeners:
            if port is None:
                continue
            module_name, _, class_name = spec.target.partition(":")
            try:
                cls = getattr(importlib.import_module(module_name), class_name)
            except ImportError as exc:  # an optional dependency is missing: serve the rest
                sys.stderr.write(f"envwire: {spec.name} front end unavailable: {exc}\n")
                continue
            front = cls(self, self.config.host, port)
            host, bound = front.start()
            self.front_ends.append(front)
            self.addresses[spec.name] = (host, bound)
            if announce is not None:
                announce(f"envwire: {spec.name} listening on {host}:{bound}")

    def serve_forever(self) -> None:
        """Block until SIGINT/SIGTERM (or :meth:`stop`), then shut down cleanly."""
        while not self._stopped.wait(0.5):
            pass
        self.shutdown()

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
        self.sessions.close_all()
        self.observe.close()

    def __enter__(self) -> Server:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


def _ray_runtime(catalog: Catalog, config: ServerConfig) -> Any:
    """The Ray runtime, if any env of the catalog runs on Ray (its options checked now).

    Raises:
        ConfigError: Ray is not installed, or an env's ``[env.ray]`` table is wrong.
    """
    on_ray = [spec for spec in catalog.values() if spec.resolved_isolation == "ray"]
    if not on_ray:
        return None
    from envwire.runtime.ray import RayOptions, RayRuntime, require_ray

    require_ray()
    for spec in on_ray:
        RayOptions.from_table(spec.id, spec.ray)
    return RayRuntime(config.ray_address, config.place_timeout)


def print_line(line: str) -> None:
    """Announce on stdout, flushed at once (scripts wait for these lines)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
