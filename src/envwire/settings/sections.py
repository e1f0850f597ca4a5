"""Every setting of ``envwire serve``, one frozen section per part of the server.

A setting is a field whose metadata (:class:`Meta`) holds its kind, its help text, its key in
the config file's ``[server]`` table (the field's name unless given) and its flag (``--`` and
the key with dashes unless given). This module is the one source of all four and of the
defaults: the command line, the config file's validation and the settings table of
``docs/guides/serving.md`` are made from it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

from envwire.ports import DMENVRPC, GYM_SOCKET, HTTP
from envwire.protocols.gymsocket import MONITOR_LAYOUTS
from envwire.protocols.gymsocket.server import DEFAULT_MAX_ACTION
from envwire.protocols.http.websocket import DEFAULT_MAX_FRAGMENTS
from envwire.settings.values import (
    Choice,
    Count,
    Flag,
    Fraction,
    Kind,
    Names,
    Number,
    Port,
    Seconds,
    Text,
    Value,
)
from envwire.sockets import MAX_BUSY_POLL_US
from envwire.sockets.http import DEFAULT_SEND_TIMEOUT
from envwire.sockets.websocket import DEFAULT_MAX_QUEUED

__all__ = [
    "ArenaSettings",
    "DmEnvRpcSettings",
    "GymSocketSettings",
    "HttpSettings",
    "Meta",
    "Section",
    "ObserveSettings",
    "OpenEnvSettings",
    "SecuritySettings",
    "ServerSettings",
    "metas",
]

MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Meta:
    """What the command line and the config file know of one setting."""

    kind: Kind
    help: str
    key: str = ""
    flag: str = ""
    #: The default as the docs say it, where it is derived ("half of max_connections").
    shown: str = ""


V = TypeVar("V", bound=Value)


def setting(
    default: V, kind: Kind, help: str, *, key: str = "", flag: str = "", shown: str = ""
) -> V:
    """A settings field (see :class:`Meta`) whose default is ``default``."""
    return field(default=default, metadata={"envwire": Meta(kind, help, key, flag, shown)})


@dataclass(frozen=True, slots=True)
class Section:
    """A part of the settings: a frozen dataclass of settings fields."""

    #: Its name in ``--help`` and the docs.
    title: ClassVar[str] = ""


def metas(section: type[Section]) -> list[tuple[str, Meta]]:
    """A section's fields as (attribute, :class:`Meta`), key and flag filled in."""
    found = []
    for item in dataclasses.fields(section):
        meta: Meta = item.metadata["envwire"]
        key = meta.key or item.name
        flag = meta.flag or "--" + key.replace("_", "-")
        found.append((item.name, dataclasses.replace(meta, key=key, flag=flag)))
    return found


@dataclass(frozen=True, slots=True)
class ServerSettings(Section):
    """Where the server listens, and what it holds in all."""

    title: ClassVar[str] = "server"

    host: str = setting(
        "127.0.0.1",
        Text("an address"),
        "address every front end binds; anything but loopback needs tokens (or --insecure)",
    )
    app_dir: str = setting(
        ".",
        Text("a directory", optional=False),
        "a folder put first on the import path, where entry points' modules are found (as "
        "uvicorn's --app-dir)",
    )
    allow_unavailable: bool = setting(
        False,
        Flag(),
        "serve the other envs when some cannot be loaded (/health names the unavailable ones); "
        "without it the server refuses to start",
    )
    isolation: str | None = setting(
        None,
        Choice(("auto", "inline", "process", "pool", "ray"), optional=True),
        "where every env runs, over each env's own choice (auto: inline for Gymnasium's and "
        "envwire's envs, a worker process for the rest; pool: the worker pool; ray: a Ray "
        "actor per session)",
        shown="each env's",
    )
    workers: int | str = setting(
        "auto",
        Count(1, auto=True),
        "server processes sharing the ports, each serving every front end (auto: one per core "
        "this process may use); see the deployment guide",
    )
    pool_workers: int = setting(
        0,
        Count(0),
        "worker processes of the pool that envs with pool isolation share, each hosting many "
        "sessions' envs, in each server worker (0: one per core, shared among the --workers)",
        shown="one per core",
    )
    step_timeout: float | None = setting(
        None,
        Seconds(optional=True),
        "seconds a reset or step may take, for every env, over each env's own",
        shown="each env's (30; OpenEnv's own envs: none)",
    )
    capacity: int | None = setting(
        None, Count(1, optional=True), "most sessions at once, across every front end"
    )
    idle_timeout: float | None = setting(
        3600.0,
        Seconds(optional=True),
        "seconds a gym-socket or gRPC connection may stay silent, and a WebSocket session unused",
    )
    monitor_root: str | None = setting(
        "envwire-monitor",
        Text("a directory"),
        "directory under which gym-socket Monitor requests write",
    )
    ray_address: str | None = setting(
        None,
        Text("an address"),
        "the Ray cluster of envs with ray isolation (host:port, ray://host:10001, or auto; "
        "default: RAY_ADDRESS, else a local Ray started on demand)",
    )
    place_timeout: float = setting(
        30.0,
        Seconds(),
        "seconds a session waits for the Ray cluster to place its actors before CAPACITY_REACHED",
    )
    unsafe_sandbox: bool = setting(
        False,
        Flag(),
        "run untrusted code (envwire/Coding-v0) where the host cannot build the sandbox's "
        "namespaces, with the layers that remain (docs/guides/security.md)",
    )
    max_buffered: int | None = setting(
        256 * MiB,
        Count(0, optional=True),
        "bytes all connections of every front end (gym-socket packets, HTTP bodies, WebSocket "
        "messages) may buffer together beyond 256 KiB each",
    )
    max_threads: int = setting(
        1024,
        Count(1),
        "threads serving connections at once (gym-socket and HTTP); a connection holds one only "
        "while it has work, and more work waits its turn",
    )
    sandbox_runs: int | None = setting(
        None, Count(1, optional=True), "code runs at once in the code sandbox", shown="8"
    )
    switch_interval: float = setting(
        0.02,
        Seconds(),
        "seconds a thread of the server may hold Python's interpreter lock while others wait "
        "for it (sys.setswitchinterval; Python's own default is 0.005): longer means fewer "
        "wake-ups when many connections' threads have work, and a longer wait for the others "
        "while an inline env computes",
    )


@dataclass(frozen=True, slots=True)
class SecuritySettings(Section):
    """Tokens, TLS, allowed names, and the bounds on connections every front end applies."""

    title: ClassVar[str] = "security"

    token_file: str | None = setting(
        None,
        Text("a file"),
        "require a token from every client: one per line, '#' comments; SIGHUP re-reads it",
    )
    tls_cert: str | None = setting(None, Text("a file"), "serve TLS: the certificate (PEM)")
    tls_key: str | None = setting(None, Text("a file"), "serve TLS: its key (PEM)")
    insecure: bool = setting(
        False, Flag(), "serve a non-loopback host without tokens (only on a trusted network)"
    )
    public_metrics: bool = setting(
        False, Flag(), "with tokens on, let /metrics be scraped without one"
    )
    allowed_hosts: tuple[str, ...] = setting(
        (),
        Names("host names"),
        "more Host names HTTP clients may reach the server by ('*': any)",
        flag="--allowed-host",
    )
    allowed_origins: tuple[str, ...] = setting(
        (),
        Names("origins"),
        "browser origins allowed to send requests ('*': any)",
        flag="--allowed-origin",
    )
    max_connections: int | None = setting(
        16384,
        Count(1, optional=True),
        "connections the gym-socket, HTTP and gRPC front ends each hold (an idle one holds no "
        "thread)",
    )
    max_connections_per_address: int | str | None = setting(
        "auto",
        Count(1, optional=True, auto=True),
        "of those, from one client address before it shows a token (auto: no cap on a "
        "loopback bind, half of the front end's maximum otherwise)",
    )
    max_connections_per_token: int | str | None = setting(
        "auto",
        Count(1, optional=True, auto=True),
        "of those, of one client once it shows its token (auto: no cap of its own)",
    )
    max_pending: int | None = setting(
        1024,
        Count(1, optional=True),
        "connections in their handshake at once (none holds a thread while it waits)",
    )
    max_pending_per_address: int | str | None = setting(
        "auto",
        Count(1, optional=True, auto=True),
        "of those, from one client address (auto: no cap on a loopback bind, 16 otherwise)",
    )
    handshake_timeout: float | str = setting(
        "auto",
        Seconds(auto=True),
        "seconds for a connection's whole handshake (TLS included), from when the server starts "
        "reading it, and that a gRPC connection may hold no stream (auto: 60 on a loopback bind "
        "without tokens, where a burst of thousands of local clients may be slow to send, 10 "
        "otherwise)",
    )


@dataclass(frozen=True, slots=True)
class GymSocketSettings(Section):
    """The gym-socket front end."""

    title: ClassVar[str] = "gym-socket"

    port: int | None = setting(
        GYM_SOCKET.default_port,
        Port(),
        "gym-socket port (0: any free port; off: no gym-socket)",
        key=GYM_SOCKET.key,
    )
    monitor_layout: str = setting(
        "auto",
        Choice(MONITOR_LAYOUTS),
        "Monitor packets of clients without the MONITOR_REPLY flag: auto tells the original "
        "layout from the Go client's by their bytes; seed or video forces one",
    )
    packet_timeout: float = setting(
        60.0, Seconds(), "seconds for a command packet once its first byte has arrived"
    )
    max_action_size: int = setting(DEFAULT_MAX_ACTION, Count(1), "bytes of one action")
    busy_poll_us: float = setting(
        0.0,
        Number(0, MAX_BUSY_POLL_US, "microseconds"),
        "poll a busy connection's socket this long before sleeping (0: off; lower latency "
        "for CPU time)",
    )


@dataclass(frozen=True, slots=True)
class HttpSettings(Section):
    """The HTTP front end (OpenEnv, the arena, the dashboard): HTTP/1.1 and WebSocket."""

    title: ClassVar[str] = "HTTP"

    port: int | None = setting(
        HTTP.default_port,
        Port(),
        "HTTP port (0: any free port; off: no HTTP front end)",
        key=HTTP.key,
    )
    http_keepalive: float | None = setting(
        60.0, Seconds(optional=True), "seconds an idle keep-alive HTTP connection is kept"
    )
    max_message_size: int = setting(
        100 * MiB, Count(1), "bytes of one WebSocket message or HTTP body"
    )
    send_timeout: float | None = setting(
        DEFAULT_SEND_TIMEOUT,
        Seconds(optional=True),
        "seconds a client has to take a reply before its connection is dropped",
    )
    max_fragments: int = setting(
        DEFAULT_MAX_FRAGMENTS,
        Count(1),
        "fragments of one WebSocket message (each also counts 64 bytes toward its size)",
    )
    max_queued: int = setting(
        DEFAULT_MAX_QUEUED,
        Count(0),
        "bytes of WebSocket requests read ahead of their replies (then backpressure)",
    )
    ping_interval: float | None = setting(
        20.0, Seconds(optional=True), "seconds of WebSocket silence before the server pings"
    )
    ping_timeout: float | None = setting(
        20.0, Seconds(optional=True), "seconds a pinged WebSocket client has to answer"
    )


@dataclass(frozen=True, slots=True)
class OpenEnvSettings(Section):
    """OpenEnv's routes and sessions on the HTTP front end."""

    title: ClassVar[str] = "OpenEnv"

    openenv_arrays: str = setting(
        "base64", Choice(("base64", "list")), "Gymnasium arrays as base64 objects or JSON lists"
    )
    openenv_compat: str = setting(
        "default",
        Choice(("default", "strict")),
        "strict: answer exactly as openenv-core does, without envwire's deliberate differences",
    )
    reap_interval: float = setting(10.0, Seconds(), "seconds between sweeps for idle sessions")
    http_session_idle: float = setting(
        300.0, Seconds(), "seconds an HTTP or MCP session may go unused (at most idle_timeout)"
    )
    http_max_sessions: int | None = setting(
        1024, Count(1, optional=True), "HTTP and MCP sessions at once"
    )
    http_sessions_per_address: int | None = setting(
        256, Count(1, optional=True), "of those, opened from one client address"
    )


@dataclass(frozen=True, slots=True)
class DmEnvRpcSettings(Section):
    """The dm_env_rpc front end, served over gRPC: its port's key and flag, and its limits'
    keys, name the transport (``grpc``, ``--grpc``)."""

    title: ClassVar[str] = "dm_env_rpc"

    port: int | None = setting(
        DMENVRPC.default_port,
        Port(),
        "gRPC port (0: any free port; off: no dm_env_rpc)",
        key=DMENVRPC.key,
    )
    grpc_max_connections: int = setting(512, Count(1), "Process streams at once, a thread each")
    grpc_max_message_size: int | None = setting(
        16 * MiB, Count(1, optional=True), "bytes of one gRPC request message"
    )
    grpc_max_num_envs: int = setting(4096, Count(1), "copies one vector world may have")


@dataclass(frozen=True, slots=True)
class ObserveSettings(Section):
    """Metrics on a listener of their own, and episodes recorded as Minari datasets."""

    title: ClassVar[str] = "observability"

    metrics: int | None = setting(
        None,
        Port(),
        "serve Prometheus metrics on a listener of their own (the HTTP front end serves "
        "/metrics too)",
    )
    record: str | None = setting(
        None,
        Text("a directory"),
        "record every episode served as Minari datasets under this directory (minari extra)",
    )
    record_dir: str = setting(
        "envwire-datasets",
        Text("a directory"),
        "where envs whose [[env]] table says record = true are recorded",
    )
    record_fraction: float = setting(1.0, Fraction(), "share of the sessions recorded")
    record_frames: bool = setting(
        False, Flag(), "also record rendered frames (envs with a render mode)"
    )
    record_max_bytes: int = setting(1024 * MiB, Count(1), "bytes the recording directory may hold")
    record_overflow: str = setting(
        "wait",
        Choice(("wait", "drop")),
        "when episodes end faster than they are written: wait (recorded sessions slow down, "
        "none is lost) or drop (dropped episodes are counted and logged as a warning)",
    )


@dataclass(frozen=True, slots=True)
class ArenaSettings(Section):
    """The arena, on the HTTP front end."""

    title: ClassVar[str] = "arena"

    arena_db: str | None = setting(
        None, Text("a file"), "serve the arena from this SQLite file (created if new)"
    )
    arena_url: str | None = setting(
        None, Text("a URL"), "the server URL written into agent config files"
    )
    arena_sync: str = setting(
        "full",
        Choice(("full", "normal")),
        "full: an acknowledged action survives power loss; normal: a killed server",
    )
    arena_max_body: int = setting(MiB, Count(1), "bytes of one act request")
    arena_live_runs: int = setting(
        1024, Count(1), "live envs kept per arena env; others are rebuilt by replay"
    )
    arena_plugins: str | None = setting(
        None,
        Text("a directory"),
        "a plugins folder of envs written for the AISysProj server's plugin interface",
    )
    arena_plugin_upload: bool = setting(
        False, Flag(), "let admins upload plugins (code the server runs) over HTTP"
    )
    arena_login_failures: int = setting(
        10, Count(1), "failed logins per agent within the window before 429"
    )
    arena_login_failures_per_address: int = setting(
        30, Count(1), "failed logins per client address within the window before 429"
    )
    arena_login_window: float = setting(60.0, Seconds(), "seconds of the failed-login window")
