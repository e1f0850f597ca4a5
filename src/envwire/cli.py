"""The ``envwire`` command: ``serve``, ``list``, ``godot-bridge`` and ``arena``.

``envwire serve``'s flags are made from the settings (:mod:`envwire.settings`): every setting is
a flag and a key of the config file's ``[server]`` table, checked once, before anything
listens; a mistake is one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import re
import sys
import tempfile
import warnings
from argparse import SUPPRESS
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import gymnasium

from envwire import __version__, settings
from envwire.app import Server, print_line, shutting_down
from envwire.arena import cli as arena_cli
from envwire.envs.coding import sandbox
from envwire.errors import ConfigError, EnvwireError
from envwire.frontends.godot import main as bridge_main
from envwire.observe import configure_logging
from envwire.ports import FRONT_ENDS
from envwire.registry import (
    Catalog,
    EnvSpec,
    default_catalog,
    load_errors,
    parse_env_arg,
    with_openenv,
)
from envwire.runtime.hosts import EnvHost
from envwire.server.role import WorkerRole
from envwire.server.security import Security
from envwire.server.supervisor import Supervisor, WorkerFailed, bind_ports, resolve_workers
from envwire.settings.config import ConfigFile, read
from envwire.settings.envkwargs import kwargs_errors

__all__ = ["build_catalog", "main"]

log = logging.getLogger("envwire")

#: The front ends whose port every worker binds itself (the others' sockets it inherits).
_BINDS_ITSELF = tuple(row.name for row in FRONT_ENDS if row.binds_itself)
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class _Parser(argparse.ArgumentParser):
    """argparse, but a mistake is one line: the command's short usage, then the error."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"envwire: {message} (see {self.prog} --help)\n")


def build_catalog(
    envs: Sequence[str], tables: Sequence[EnvSpec], server: settings.ServerSettings
) -> Catalog:
    """The catalog: the ids given, then the config file's ``[[env]]`` tables, else the default
    catalog; ``isolation`` and ``step_timeout``, when set, apply to every env.

    Raises:
        EnvwireError: an id or entry point is wrong.
    """
    specs = [parse_env_arg(arg) for arg in envs] + list(tables)
    # OpenEnv's own envs are recognised (and their app modules imported) here, at start-up.
    catalog = Catalog(with_openenv(spec) for spec in specs) if specs else default_catalog()
    changes: dict[str, Any] = {}
    if server.isolation is not None:
        changes["isolation"] = server.isolation
    if server.step_timeout is not None:
        changes["step_timeout"] = server.step_timeout
    return catalog.with_overrides(**changes) if changes else catalog


def _load(args: argparse.Namespace) -> tuple[settings.Settings, Catalog]:
    """The settings and catalog of ``serve`` or ``list`` (config file, then flags), with the
    app folder first on the import path, as uvicorn puts its ``--app-dir``.

    Raises:
        EnvwireError: a mistake in either.
    """
    given = settings.Source("the command line", settings.given(args))
    app_dir = given.values.get("app_dir")
    if isinstance(app_dir, str):  # the config file itself may name modules of the app folder
        _import_path(app_dir)
    config: ConfigFile | None = read(args.config) if args.config is not None else None
    chosen = settings.load([given] if config is None else [config.server, given])
    _import_path(chosen.server.app_dir)
    tables = () if config is None else config.envs
    return chosen, build_catalog(args.envs, tables, chosen.server)


def _import_path(folder: str) -> None:
    """Put ``folder`` first on the import path (once), as uvicorn's ``--app-dir`` does.

    Raises:
        ConfigError: it is not a folder.
    """
    path = os.path.abspath(folder)
    if not os.path.isdir(path):
        raise ConfigError(f"app_dir {folder!r} is not a folder")
    if path in sys.path:
        sys.path.remove(path)
    sys.path.insert(0, path)


def _check_loadable(catalog: Catalog, allow_unavailable: bool) -> dict[str, str]:
    """The envs whose entry points cannot be loaded, by id; refuse to start unless allowed.

    Raises:
        ConfigError: one line per env that cannot be loaded, when not allowed.
    """
    errors = load_errors(catalog)
    if errors and not allow_unavailable:
        lines = [
            f"{env_id} ({catalog[env_id].entry_point}) cannot be loaded: {reason}"
            for env_id, reason in errors.items()
        ]
        hint = "; --allow-unavailable serves the others"
        raise ConfigError("\nenvwire: ".join(lines) + hint)
    for env_id, reason in errors.items():
        log.warning("%s (%s) is unavailable: %s", env_id, catalog[env_id].entry_point, reason)
    return errors


def _check_kwargs(catalog: Catalog, config: Path | None) -> None:
    """Refuse to start when an env's ``kwargs`` name an argument its constructor does not take
    (a typo would otherwise reach only the first client).

    Raises:
        ConfigError: one line per such env, naming the config file, the env and the key.
    """
    errors = kwargs_errors(catalog)
    if errors:
        where = f"{config} " if config is not None else ""
        raise ConfigError(
            "\nenvwire: ".join(f"{where}[[env]] {env_id}: {why}" for env_id, why in errors.items())
        )


def _serve(args: argparse.Namespace) -> int:
    role = WorkerRole.from_environment()
    if role is not None:
        role.die_with_parent()
    chosen, catalog = _load(args)
    unavailable = _check_loadable(catalog, chosen.server.allow_unavailable)
    _check_kwargs(catalog, args.config)
    count = resolve_workers(chosen.server.workers)
    if role is None and count > 1 and _on_local_ray(catalog, chosen):
        if chosen.server.workers != "auto":
            raise ConfigError(
                f"--workers {count}: envs with ray isolation need one Ray cluster that every "
                "worker joins: start one (ray start --head) and give --ray-address (or "
                "RAY_ADDRESS), or serve with --workers 1"
            )
        log.info("one worker: envs with ray isolation run on a local Ray started on demand")
        count = 1
    if role is None and count > 1:
        return _supervise(args.argv, chosen, count)
    sandbox.configure(
        unsafe=True if chosen.server.unsafe_sandbox else None, runs=chosen.server.sandbox_runs
    )
    if any("coding" in f"{env_id} {spec.entry_point}".lower() for env_id, spec in catalog.items()):
        sandbox.probe()
    # For this process alone (it is the server's): each thread waiting for the interpreter
    # lock wakes once per interval to ask for it; with a thousand connections' threads those
    # wake-ups are a large share of the server's CPU (benchmarks/README.md, "Pooled isolation").
    sys.setswitchinterval(chosen.server.switch_interval)
    server = Server(catalog, chosen, health=_sandbox_health, unavailable=unavailable, role=role)
    recorder = server.observe.recorder
    if recorder is not None:
        recorder.check_frames(catalog)
    try:
        server.start(announce=print_line if role is None else None)
    except OSError as exc:
        server.shutdown()
        print(f"envwire: {_listen_error(exc, chosen)}", file=sys.stderr)
        return 1
    if role is not None:
        role.ready()
    # the workers' supervisor says when the server shuts down, not each worker
    server.serve_forever(announce=print_line if role is None else None)
    if recorder is not None and recorder.failed:
        # The episodes were lost while the server ran; the status lets a script notice.
        print(
            f"envwire: recording failed: {recorder.failed} episodes could not be written to "
            f"{recorder.root} (first: {recorder.writer.first_failure})",
            file=sys.stderr,
        )
        return 1
    return 0


def _on_local_ray(catalog: Catalog, chosen: settings.Settings) -> bool:
    """Whether an env runs on Ray with no cluster named: each process would start its own."""
    named = chosen.server.ray_address or os.environ.get("RAY_ADDRESS")
    return not named and any(s.resolved_isolation == "ray" for s in catalog.values())


def _supervise(argv: Sequence[str], chosen: settings.Settings, count: int) -> int:
    """``--workers N`` (N > 1): bind every port, run N workers of this same command on them,
    and announce the ports once every worker listens."""
    host = chosen.server.host
    Security.from_settings(chosen.security).check_exposure(host)
    try:
        sockets = bind_ports(host, chosen.ports(), shared=_BINDS_ITSELF)
    except OSError as exc:
        print(f"envwire: {_listen_error(exc, chosen)}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="envwire-") as rundir:
        supervisor = Supervisor(
            [sys.executable, "-m", "envwire", *argv], count, sockets, _BINDS_ITSELF, rundir
        )
        supervisor.handle_signals(forward_hup=chosen.security.token_file is not None)
        try:
            supervisor.start()
        except WorkerFailed as exc:
            print(f"envwire: {exc}", file=sys.stderr)
            return 1
        if supervisor.stopping:  # stopped while the workers started
            return supervisor.stop()
        tls = " (TLS)" if chosen.security.tls_cert is not None else ""
        for name, sock in sockets.items():
            print_line(f"envwire: {name} listening on {host}:{sock.getsockname()[1]}{tls}")
        log.info("%d workers serving: processes %s", count, supervisor.pids())
        status = supervisor.serve(announce=_announce_shutdown)
        if supervisor.failure:
            print(f"envwire: {supervisor.failure}", file=sys.stderr)
        return status


def _announce_shutdown(sessions: int | None) -> None:
    """The supervisor's shutdown lines, as a single server prints them."""
    print_line(shutting_down(sessions) if sessions is not None else "envwire: stopped")


def _listen_error(exc: OSError, chosen: settings.Settings) -> str:
    """One line saying which front end could not listen, and what to do."""
    name = getattr(exc, "front_end", "")
    port = chosen.ports().get(name)
    flag = f"--{name}"  # each listener's port has the flag of its name
    if exc.errno == errno.EADDRINUSE and name:
        return f"{name} port {port} is in use; {flag} N picks another, 0 a free one"
    if exc.errno == errno.EACCES and name:
        return f"{name} cannot listen on port {port}: permission denied ({flag} N picks another)"
    where = f"{name} " if name else ""
    return f"{where}cannot listen on {chosen.server.host}:{port}: {exc.strerror or exc}"


def _sandbox_health() -> dict[str, Any]:
    """``/health``'s extra field: the code sandbox's enforcement, once probed."""
    layers = sandbox.status()
    return {"sandbox": layers} if layers is not None else {}


def _list(args: argparse.Namespace) -> int:
    """Print each env with its spaces; exit status 1 when one cannot be made."""
    _, catalog = _load(args)
    failed = 0
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
                failed += 1
                continue
        print(f"{env_id}  [{spec.resolved_isolation}]")
        print(f"    action:      {action_space}")
        print(f"    observation: {observation_space}")
        for note in dict.fromkeys(_ANSI.sub("", str(w.message)) for w in caught):
            print(f"    note:        {note.removeprefix('WARN: ')}")
    return 1 if failed else 0


def _add_catalog_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "envs",
        nargs="*",
        metavar="ENV",
        help="env ids to serve (default: the built-in catalog); forms: CartPole-v1, "
        "pkg.mod:Class, my/Env-v0=pkg.mod:Class, each optionally ending in @inline, @process, "
        "@pool or @ray",
    )
    parser.add_argument(
        "--config", type=Path, metavar="FILE", help="a TOML file with [server] and [[env]] tables"
    )


def _add_log_args(parser: argparse.ArgumentParser, default: str | None) -> None:
    """The log options; ``default`` is None, or ``SUPPRESS`` where they repeat (a value given
    before the subcommand stays when it is not given again)."""
    parser.add_argument(
        "--log-level",
        default=default if default is SUPPRESS else "WARNING",
        type=str.upper,
        choices=_LOG_LEVELS,
        help="logging level (default WARNING)",
    )
    parser.add_argument(
        "--log-format",
        default=default if default is SUPPRESS else "text",
        choices=["text", "json"],
        help="log lines as text (default) or one JSON object per line",
    )


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="envwire", description="Serve any environment to any agent.")
    _add_log_args(parser, None)
    parser.add_argument("--version", action="version", version=f"envwire {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    serve = commands.add_parser(
        "serve",
        help="serve envs over every front end",
        usage="envwire serve [ENV ...] [--config FILE] [--SETTING VALUE ...]",
    )
    _add_catalog_args(serve)
    settings.add_arguments(serve)
    _add_log_args(serve, SUPPRESS)  # the log options also after "serve", as before it
    serve.set_defaults(run=_serve)

    listing = commands.add_parser(
        "list",
        help="print the catalog with each env's spaces",
        usage="envwire list [ENV ...] [--config FILE] [--app-dir DIR] [--isolation I] ...",
    )
    _add_catalog_args(listing)
    settings.add_arguments(listing, only=("isolation", "step_timeout", "app_dir"))
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

    def factory(env_id: str, render_mode: str | None) -> Callable[[], gymnasium.Env[Any, Any]]:
        spec = parse_env_arg(env_id)
        return lambda: spec.make(render_mode=render_mode) if render_mode else spec.make()

    return bridge_main(argv, make_factory=factory)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["godot-bridge"]:  # GymGodot's --key=value contract, parsed by the bridge
        return _godot_bridge(argv[1:])
    args = _parser().parse_args(argv)
    args.argv = argv  # the workers of --workers N run the same command
    configure_logging(args.log_level, args.log_format)
    try:
        return int(args.run(args))
    except EnvwireError as exc:
        print(f"envwire: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
