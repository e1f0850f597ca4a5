"""The ``envwire`` command: ``serve``, ``list`` and the commands later front ends add."""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
import warnings
from argparse import SUPPRESS
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envwire import __version__
from envwire.app import EXTRA_LISTENERS, FRONT_ENDS, Server, ServerConfig, print_line
from envwire.arena import cli as arena_cli
from envwire.errors import ConfigError, EnvwireError
from envwire.frontends.godot import main as bridge_main
from envwire.observe import configure_logging
from envwire.observe.hub import RecordSettings
from envwire.protocols.gymsocket import MONITOR_LAYOUTS
from envwire.registry import Catalog, EnvSpec, default_catalog, parse_env_arg, with_openenv
from envwire.runtime.hosts import EnvHost
from envwire.runtime.ray.cluster import DEFAULT_PLACE_TIMEOUT

__all__ = ["build_catalog", "main"]


def _port(text: str) -> int | None:
    if text.lower() in ("off", "none", "no"):
        return None
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"port must be a number or 'off', got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is outside 0..65535")
    return port


def _seconds(text: str) -> float:
    """A positive number of seconds: every wait has a bound, so 0 is refused, not ignored."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _add_catalog_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "envs",
        nargs="*",
        metavar="ENV",
        help="env ids to serve (default: the built-in catalog); forms: CartPole-v1, "
        "pkg.mod:Class, my/Env-v0=pkg.mod:Class, each optionally ending in @inline, @process "
        "or @ray",
    )
    parser.add_argument("--config", type=Path, help="a TOML file with [server] and [[env]] tables")
    parser.add_argument(
        "--isolation",
        choices=["auto", "inline", "process", "ray"],
        help="where every env runs (default: auto = inline for Gymnasium's and envwire's envs, "
        "a worker process for the rest; ray = a Ray actor per session)",
    )
    parser.add_argument(
        "--step-timeout", type=_seconds, help="seconds a reset/step may take (default 30)"
    )


def build_catalog(args: argparse.Namespace, config: dict[str, Any]) -> Catalog:
    """The catalog from positional ids, the config's [[env]] tables, or the default.

    Raises:
        EnvwireError: an id or entry point is wrong.
    """
    specs = [parse_env_arg(arg) for arg in args.envs]
    for table in config.get("env", []):
        try:
            specs.append(EnvSpec(**table))
        except TypeError as exc:
            raise ConfigError(f"bad [[env]] table {table!r}: {exc}") from exc
    # OpenEnv's own envs are recognised (and their app modules imported) here, at start-up.
    catalog = Catalog(with_openenv(spec) for spec in specs) if specs else default_catalog()
    changes: dict[str, Any] = {}
    if args.isolation:
        changes["isolation"] = args.isolation
    if args.step_timeout is not None:
        changes["step_timeout"] = args.step_timeout
    return catalog.with_overrides(**changes) if changes else catalog


def _load_config(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from exc


_HTTP_FLAGS: tuple[tuple[str, type, str], ...] = (
    ("--ping-interval", float, "seconds of WebSocket silence before a ping (default 20; 0 = off)"),
    ("--ping-timeout", float, "seconds a pinged client has to answer (default 20)"),
    ("--reap-interval", float, "seconds between sweeps for idle sessions (default 10)"),
    ("--http-keepalive", float, "seconds an idle keep-alive HTTP connection is kept (default 60)"),
    (
        "--max-message-size",
        int,
        "largest WebSocket message or HTTP body in bytes (default 100 MiB)",
    ),
)


def _http_options(args: argparse.Namespace) -> dict[str, Any]:
    """The OpenEnv front end's settings given on the command line."""
    names = [flag[2:].replace("-", "_") for flag, _, _ in _HTTP_FLAGS]
    names += ["openenv_arrays", "openenv_compat"]
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


def _security_options(args: argparse.Namespace) -> dict[str, Any]:
    """The security settings given on the command line (they override the config file's)."""
    given: dict[str, Any] = {}
    for name in ("token_file", "tls_cert", "tls_key"):
        if getattr(args, name) is not None:
            given[name] = str(getattr(args, name))
    for name in ("insecure", "public_metrics"):
        if getattr(args, name):
            given[name] = True
    for name in ("allowed_hosts", "allowed_origins"):
        if getattr(args, name):
            given[name] = list(getattr(args, name))
    return given


def _monitor_layout(args: argparse.Namespace, settings: dict[str, Any]) -> str:
    """--monitor-layout, else the config's monitor_layout (or its old legacy_monitor_reply).

    Raises:
        ConfigError: a value that is not a layout.
    """
    layout = args.monitor_layout or settings.get("monitor_layout")
    if layout is None:
        layout = "video" if settings.get("legacy_monitor_reply") else "auto"
    if layout not in MONITOR_LAYOUTS:
        raise ConfigError(f"monitor_layout must be one of {list(MONITOR_LAYOUTS)}, not {layout!r}")
    return str(layout)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in 0..1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be within 0..1, got {text!r}")
    return value


def _record_settings(
    args: argparse.Namespace, settings: dict[str, Any], catalog: Catalog
) -> RecordSettings | None:
    """What to record: every env with ``--record DIR`` (or ``[server] record = "DIR"``), else
    the envs whose ``[[env]]`` table says ``record = true`` into ``[server] record_dir``."""
    root = args.record or settings.get("record")
    chosen = frozenset(env_id for env_id, spec in catalog.items() if spec.record)
    if not root and not chosen:
        return None
    fraction = args.record_fraction
    if fraction is None:
        fraction = float(settings.get("record_fraction", 1.0))
    max_bytes = args.record_max_bytes or settings.get("record_max_bytes") or (1 << 30)
    return RecordSettings(
        root=str(root or settings.get("record_dir", "envwire-datasets")),
        everything=bool(root),
        envs=chosen,
        fraction=fraction,
        frames=bool(args.record_frames or settings.get("record_frames", False)),
        max_bytes=int(max_bytes),
    )


def _serve(args: argparse.Namespace) -> int:
    config = _load_config(args.config)
    catalog = build_catalog(args, config)
    settings = dict(config.get("server", {}))
    ports: dict[str, int | None] = {}
    for spec in FRONT_ENDS:
        value = getattr(args, spec.option, None)
        ports[spec.name] = (
            value if value is not False else settings.get(spec.option, spec.default_port)
        )
    for spec in EXTRA_LISTENERS:
        value = getattr(args, spec.option, None)
        ports[spec.name] = value if value is not None else settings.get(spec.option)
    _sandbox(args, settings, catalog)
    server_config = ServerConfig(
        host=args.host or settings.get("host", "127.0.0.1"),
        ports=ports,
        capacity=args.capacity if args.capacity is not None else settings.get("capacity"),
        monitor_root=args.monitor_root or settings.get("monitor_root", "envwire-monitor"),
        monitor_layout=_monitor_layout(args, settings),
        idle_timeout=args.idle_timeout
        if args.idle_timeout is not None
        else settings.get("idle_timeout", 3600.0),
        ray_address=args.ray_address or settings.get("ray_address"),
        place_timeout=args.place_timeout
        if args.place_timeout is not None
        else settings.get("place_timeout", DEFAULT_PLACE_TIMEOUT),
        options={
            **settings,
            **_http_options(args),
            **arena_cli.serve_options(args),
            **_security_options(args),
            **({} if args.busy_poll_us is None else {"busy_poll_us": args.busy_poll_us}),
            "health": _sandbox_health,
        },
        record=_record_settings(args, settings, catalog),
    )
    server = Server(catalog, server_config)
    try:
        server.start(announce=print_line)
    except OSError as exc:
        server.shutdown()
        print(f"envwire: cannot listen: {exc}", file=sys.stderr)
        return 1
    server.serve_forever()
    return 0


def _sandbox(args: argparse.Namespace, settings: dict[str, Any], catalog: Catalog) -> None:
    """The code sandbox's server-wide settings; probe it at start when a coding env is served."""
    from envwire.envs.coding import sandbox

    unsafe = args.unsafe_sandbox or settings.get("unsafe_sandbox", False)
    # Not asked for: keep what the environment says (ENVWIRE_SANDBOX_UNSAFE), default off.
    sandbox.configure(unsafe=True if unsafe else None, runs=settings.get("sandbox_runs"))
    if any("coding" in f"{env_id} {spec.entry_point}".lower() for env_id, spec in catalog.items()):
        sandbox.probe()


def _sandbox_health() -> dict[str, Any]:
    """``/health``'s extra field: the code sandbox's enforcement, once probed."""
    from envwire.envs.coding import sandbox

    layers = sandbox.status()
    return {"sandbox": layers} if layers is not None else {}


def _list(args: argparse.Namespace) -> int:
    catalog = build_catalog(args, _load_config(args.config))
    for env_id, spec in catalog.items():
        # Making an env may warn (Gymnasium's coloured "out of date" for CartPole-v0): the
        # warning belongs to that entry, as a plain note, not in the middle of the listing.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                host = EnvHost(spec)
                action_space, observation_space = host.spaces()
                host.close()
            except EnvwireError as exc:
                print(f"{env_id}  [cannot be made: {exc}]")
                continue
        print(f"{env_id}  [{spec.resolved_isolation}]")
        print(f"    action:      {action_space}")
        print(f"    observation: {observation_space}")
        for note in dict.fromkeys(_ANSI.sub("", str(w.message)) for w in caught):
            print(f"    note:        {note.removeprefix('WARN: ')}")
    return 0


def _add_observe_options(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group("observability (docs/observability.md)")
    group.add_argument(
        "--metrics",
        type=_port,
        metavar="PORT",
        help="serve Prometheus metrics on a listener of their own (default off; the HTTP "
        "front end serves /metrics too)",
    )
    group.add_argument(
        "--record",
        metavar="DIR",
        help="record every episode served as Minari datasets under DIR (needs the minari extra)",
    )
    group.add_argument(
        "--record-fraction",
        type=_fraction,
        metavar="P",
        help="record a random share P of the sessions (default 1)",
    )
    group.add_argument(
        "--record-frames",
        action="store_true",
        help="also record rendered frames (envs with a render mode), as infos['render']",
    )
    group.add_argument(
        "--record-max-bytes",
        type=int,
        metavar="N",
        help="bytes the recording directory may hold; later episodes are dropped (default 1 GiB)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="envwire", description="Serve any environment to any agent."
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        type=str.upper,
        choices=_LOG_LEVELS,
        help="logging level (default WARNING)",
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="log lines as text (default) or one JSON object per line",
    )
    parser.add_argument("--version", action="version", version=f"envwire {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="serve envs over every front end")
    _add_catalog_args(serve)
    serve.add_argument("--host", help="address to bind (default 127.0.0.1)")
    for spec in FRONT_ENDS:
        serve.add_argument(
            f"--{spec.name}",
            dest=spec.option,
            type=_port,
            default=False,
            metavar="PORT",
            help=f"{spec.name} port (default {spec.default_port}; 0 = any free port; "
            "off = disabled)",
        )
    serve.add_argument("--capacity", type=int, help="most sessions at once (default: no limit)")
    serve.add_argument(
        "--monitor-root",
        help="directory under which Monitor requests write (default ./envwire-monitor)",
    )
    serve.add_argument(
        "--monitor-layout",
        choices=MONITOR_LAYOUTS,
        help="how gym-socket reads Monitor packets of clients without the MONITOR_REPLY flag: "
        "auto (default) tells the original layout from the Go client's by their bytes; seed or "
        "video forces one (video: a video byte after force, answered with an error string)",
    )
    serve.add_argument(  # the old name, kept working
        "--legacy-monitor-reply",
        dest="monitor_layout",
        action="store_const",
        const="video",
        help="deprecated: --monitor-layout video",
    )
    serve.add_argument(
        "--idle-timeout", type=_seconds, help="seconds a silent connection is kept (default 3600)"
    )
    serve.add_argument(
        "--busy-poll-us",
        type=float,
        metavar="US",
        help="gym-socket: a connection whose requests come quickly polls for the next one for "
        "up to US microseconds before it sleeps (lower latency for CPU time; default 0, off)",
    )
    secure = serve.add_argument_group("security (docs/security.md)")
    secure.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help="require a token from every client: one per line, '#' comments; SIGHUP re-reads it",
    )
    secure.add_argument("--tls-cert", type=Path, metavar="FILE", help="serve TLS: certificate")
    secure.add_argument("--tls-key", type=Path, metavar="FILE", help="serve TLS: its key")
    secure.add_argument(
        "--insecure",
        action="store_true",
        help="serve a non-loopback --host without --token-file (only on a trusted network)",
    )
    secure.add_argument(
        "--public-metrics",
        action="store_true",
        help="with tokens on, let /metrics be scraped without one (the dashboard still needs one)",
    )
    secure.add_argument(
        "--allowed-host",
        dest="allowed_hosts",
        action="append",
        metavar="NAME",
        help="a host name HTTP clients reach the server by (repeatable; '*' = any)",
    )
    secure.add_argument(
        "--allowed-origin",
        dest="allowed_origins",
        action="append",
        metavar="ORIGIN",
        help="a browser origin allowed to send requests (repeatable; '*' = any)",
    )
    ray = serve.add_argument_group("Ray (envs with ray isolation)")
    ray.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="the Ray cluster (head's host:port, ray://host:10001, or auto for the one `ray "
        "start` made here; default: RAY_ADDRESS if set, else a local Ray started on demand)",
    )
    ray.add_argument(
        "--place-timeout",
        type=_seconds,
        metavar="SECONDS",
        help="seconds a session waits for the cluster to place its actors before it gets "
        f"CAPACITY_REACHED (default {DEFAULT_PLACE_TIMEOUT:g})",
    )
    _add_observe_options(serve)
    # The log options also after "serve" (where the other server options are).
    serve.add_argument("--log-level", type=str.upper, choices=_LOG_LEVELS, default=SUPPRESS,
                       help="as before the command")  # fmt: skip
    serve.add_argument("--log-format", choices=["text", "json"], default=SUPPRESS,
                       help="as before the command")  # fmt: skip
    http = serve.add_argument_group("OpenEnv HTTP/WebSocket front end")
    for flag, kind, text in _HTTP_FLAGS:
        http.add_argument(flag, type=kind, help=text)
    http.add_argument(
        "--openenv-arrays",
        choices=["base64", "list"],
        help="Gymnasium arrays over OpenEnv as base64 objects (default) or JSON lists",
    )
    http.add_argument(
        "--openenv-compat",
        choices=["default", "strict"],
        help="strict: answer exactly as openenv-core does, without envwire's deliberate "
        "differences (stateless HTTP, no extensions; docs/openenv.md)",
    )
    serve.add_argument(
        "--unsafe-sandbox",
        action="store_true",
        help="run untrusted code (envwire/Coding-v0) even where the host cannot build the "
        "sandbox's namespaces, with the layers that remain (see docs/security.md)",
    )
    arena_cli.add_serve_options(serve)
    serve.set_defaults(run=_serve)

    listing = commands.add_parser("list", help="print the catalog with each env's spaces")
    _add_catalog_args(listing)
    listing.set_defaults(run=_list)

    commands.add_parser(
        "godot-bridge",
        help="serve an env to a GymGodot-style Python side, as if it were a Godot game "
        "(envwire godot-bridge --serverIP=IP --serverPort=PORT ENV_ID)",
        add_help=False,
    )

    arena_cli.add_parser(commands)
    return parser


def _godot_bridge(argv: Sequence[str]) -> int:
    """``envwire godot-bridge``: serve a catalog env to a GymGodot-style Python side."""

    def factory(env_id: str, render_mode: str | None) -> Any:
        spec = parse_env_arg(env_id)
        return lambda: spec.make(render_mode=render_mode) if render_mode else spec.make()

    return bridge_main(argv, make_factory=factory)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["godot-bridge"]:  # GymGodot's --key=value contract, parsed by the bridge
        return _godot_bridge(argv[1:])
    args = _parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    try:
        return int(args.run(args))
    except EnvwireError as exc:
        print(f"envwire: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
