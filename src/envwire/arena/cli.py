"""``envwire arena ...``: the admin commands (the arena's ``envwire serve`` settings are
:class:`~envwire.settings.ArenaSettings`).

Admin commands work on the database file directly (the server may be running: SQLite's WAL
mode lets them write beside it)::

    envwire arena create-env nim envwire/Nim-v0 --set rating_runs=50 --db arena.sqlite3
    envwire arena add-agent nim alice --url http://host:8000/ --db arena.sqlite3 > alice.json
    envwire arena list [ENV]            envwire arena block|unblock ENV AGENT
    envwire arena reset-password ENV AGENT        envwire arena admin-token [--from-stdin]
    envwire arena set-url URL          envwire arena export ENV DIR   (a Minari dataset)
    envwire arena import-agents ENV alice.json bob.json ...   # a course's config files
    envwire arena migrate aisysprojserver.db [--plugins DIR] [--env-map NAME=ENV_ID ...]
                                             [--admin-hash sha256:HEX ...]

``--db`` defaults to ``$ENVWIRE_ARENA_DB``, else ``./envwire-arena.sqlite3``. ``migrate`` and
``export`` log a progress line every few seconds (``envwire.arena.progress``, shown unless
``--log-level`` is ERROR or above).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Protocol

from envwire.arena.admin import ArenaAdmin
from envwire.arena.aisys.configs import import_configs
from envwire.arena.aisys.database import read_database
from envwire.arena.aisys.migrate import migrate
from envwire.arena.aisys.plugins import PluginFolder
from envwire.arena.export import export_runs
from envwire.arena.progress import show_progress
from envwire.arena.store import Store
from envwire.errors import ConfigError, InvalidArgumentError
from envwire.jsonio import JsonValue
from envwire.runtime import make_worker

__all__ = ["add_parser"]

DEFAULT_DB = "envwire-arena.sqlite3"


class _Subcommands(Protocol):
    """What :func:`add_parser` needs of ``envwire``'s subparsers (argparse's
    ``add_subparsers()``, whatever parser class it makes)."""

    def add_parser(self, name: str, *, help: str) -> argparse.ArgumentParser:
        """A new subcommand's parser."""
        ...


def _db_default() -> str:
    return os.environ.get("ENVWIRE_ARENA_DB", DEFAULT_DB)


def _value(text: str) -> JsonValue:
    """``text`` read as JSON, else the text itself."""
    try:
        value: JsonValue = json.loads(text)
    except ValueError:
        return text
    return value


def _settings(args: argparse.Namespace) -> dict[str, JsonValue]:
    settings: dict[str, JsonValue] = {}
    if args.settings:
        loaded = _value(args.settings)
        if not isinstance(loaded, dict):
            raise InvalidArgumentError(f"--settings must be a JSON object, got {args.settings!r}")
        settings.update(loaded)
    for item in args.set or []:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise InvalidArgumentError(f"--set takes KEY=VALUE, got {item!r}")
        settings[key.strip()] = _value(text)
    return settings


def _admin(args: argparse.Namespace) -> ArenaAdmin:
    return ArenaAdmin(Store(args.db))


def _print(value: object, output: Path | None = None) -> None:
    text = json.dumps(value, indent=2)
    if output is not None:
        output.write_text(text + "\n")
        output.chmod(0o600)
    print(text)


def _run(args: argparse.Namespace) -> int:
    if args.arena_command in ("migrate", "export"):
        show_progress()
    if args.arena_command == "migrate":
        _print(_migrate(args))
        return 0
    admin = _admin(args)
    try:
        match args.arena_command:
            case "create-env":
                if args.plugins is not None:
                    PluginFolder(args.plugins)
                row = admin.create_env(
                    args.name,
                    args.env_id,
                    _settings(args),
                    display_name=args.display_name or "",
                    description=args.description or "",
                    replace=args.replace,
                )
                _print({"env": row.name, "env_id": row.env_id, "settings": row.settings})
            case "add-agent":
                config = admin.add_agent(args.env, args.agent, url=args.url, replace=args.replace)
                _print(config, args.output)
            case "reset-password":
                _print(admin.reset_password(args.env, args.agent, url=args.url), args.output)
            case "block" | "unblock":
                admin.set_blocked(args.env, args.agent, args.arena_command == "block")
                _print({"agent": args.agent, "blocked": args.arena_command == "block"})
            case "list":
                _print(admin.list_agents(args.env) if args.env else admin.list_envs())
            case "admin-token":
                if args.from_stdin:
                    password = sys.stdin.readline().rstrip("\r\n")
                    admin.add_admin_password(password)
                    _print({"admin_password": "stored"})
                else:
                    print(admin.new_admin_token())
            case "import-agents":
                done = import_configs(admin.store, args.env, args.files, replace=args.replace,
                                      any_env=args.any_env)  # fmt: skip
                urls = sorted({c.url for c in done})
                _print({"env": args.env, "agents": [c.agent for c in done], "urls": urls})
            case "export":
                count = export_runs(
                    admin.store, args.env, args.directory, worker_factory=make_worker,
                    limit=args.limit,
                )  # fmt: skip
                _print({"env": args.env, "exported": count, "directory": str(args.directory),
                        "dataset": f"arena/{args.env}-v0"})  # fmt: skip
            case "set-url":
                admin.set_public_url(args.url)
                _print({"public_url": admin.store.meta("public_url")})
    finally:
        admin.store.close()
    return 0


_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")


def _admin_hashes(args: argparse.Namespace, source: Path) -> tuple[list[str], list[str]]:
    """The admin password hashes to carry over, and a warning about them.

    That server reads ``admin_hashes.txt`` beside its database, unless its config class sets
    ``ADMIN_AUTH`` (a hash written in its code, not in the database): then that hash alone.
    """
    hashes_file = args.admin_hashes or source.parent / "admin_hashes.txt"
    hashes = []
    if args.admin_hashes is not None or hashes_file.is_file():
        try:
            text = hashes_file.read_text()
        except OSError as exc:
            raise ConfigError(
                f"cannot read admin password hashes from {hashes_file}: {exc}"
            ) from None
        hashes = [line.strip() for line in text.splitlines() if line.strip()]
    for digest in args.admin_hash or []:
        if not _SHA256.fullmatch(digest):
            raise InvalidArgumentError(
                f"--admin-hash takes sha256:<64 hex digits> (ADMIN_AUTH's form), got {digest!r}"
            )
        hashes.append(digest)
    warnings = []
    if not args.admin_hash:
        found = "carried over" if hashes else f"found (there is no {hashes_file})"
        warnings.append(
            f"admin passwords: {len(hashes)} {found}. If the original server's config set "
            "ADMIN_AUTH (a hash in its code, which the database does not hold; there it "
            "replaces admin_hashes.txt), carry that password over with --admin-hash "
            "'sha256:...' (the value of ADMIN_AUTH)"
        )
    return hashes, warnings


def _migrate(args: argparse.Namespace) -> dict[str, object]:
    """``migrate``: every input is checked before the target database is opened, and a failed
    migration leaves no new database behind."""
    source = Path(args.original_db)
    original = read_database(source)  # a missing file fails here, before anything is written
    if args.plugins is not None and not args.plugins.is_dir():
        raise ConfigError(f"--plugins: no plugins folder at {args.plugins}")
    folder = args.plugins or source.parent / "plugins"
    if folder.is_dir():
        PluginFolder(folder)
    hashes, warnings = _admin_hashes(args, source)
    env_map = {}
    for item in args.env_map or []:
        name, sep, env_id = item.partition("=")
        if not sep or not name or not env_id:
            raise InvalidArgumentError(f"--env-map takes NAME=ENV_ID, got {item!r}")
        env_map[name] = env_id
    target = Path(args.db)
    new = not target.exists()
    admin = ArenaAdmin(Store(target))
    try:
        report = migrate(
            original,
            admin.store,
            env_map=env_map,
            make_mapped_env=lambda env, env_id: admin.env_row(env.name, env_id,
                                                              display_name=env.display_name),
            admin_hashes=hashes,
        )  # fmt: skip
    except BaseException:
        admin.store.close()
        if new:  # nothing was written: leave no empty database behind
            for suffix in ("", "-wal", "-shm"):
                target.with_name(target.name + suffix).unlink(missing_ok=True)
        raise
    admin.store.close()
    report.warnings[:0] = warnings
    return report.to_json()


def add_parser(commands: _Subcommands) -> argparse.ArgumentParser:
    """Add ``envwire arena`` and its subcommands to ``envwire``'s subparsers."""
    arena = commands.add_parser(
        "arena", help="administer the arena: envs, agents, passwords, admin tokens"
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--db",
        default=_db_default(),
        help=f"the arena database (default $ENVWIRE_ARENA_DB or ./{DEFAULT_DB})",
    )
    sub = arena.add_subparsers(dest="arena_command", required=True)

    create = sub.add_parser(
        "create-env", parents=[common], help="create an arena env from a catalog env id"
    )
    create.add_argument("name", help="the arena env's name (it appears in URLs)")
    create.add_argument(
        "env_id", help="a catalog id: CartPole-v1, envwire/Nim-v0, pkg.mod:Class, ..."
    )
    create.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="a setting (value in JSON): requests_per_reply, rating_runs, rating_objective, "
        "initial_rating, can_abandon, abandon_outcome, percept, outcome, kwargs",
    )
    create.add_argument("--settings", metavar="JSON", help="settings as one JSON object")
    create.add_argument("--display-name", help="the name pages show")
    create.add_argument("--description", help="a description for the env's page")
    create.add_argument("--replace", action="store_true", help="redefine an existing arena env")
    create.add_argument(
        "--plugins",
        type=Path,
        help="the plugins folder of an aisys:package.module:Class env (AISysProj plugins)",
    )

    for name, text in (
        ("add-agent", "add an agent; prints its config file {agent, pwd, env, url}"),
        ("reset-password", "give an agent a new password; prints its new config file"),
        ("block", "block an agent (its requests get 401)"),
        ("unblock", "unblock an agent"),
    ):
        command = sub.add_parser(name, parents=[common], help=text)
        command.add_argument("env", help="the arena env")
        command.add_argument("agent", help="the agent's name")
        if name in ("add-agent", "reset-password"):
            command.add_argument("--url", help="the server URL for the config file")
            command.add_argument(
                "-o", "--output", type=Path, help="also write the config file here"
            )
        if name == "add-agent":
            command.add_argument(
                "--replace", action="store_true", help="give an existing agent a new password"
            )

    listing = sub.add_parser(
        "list", parents=[common], help="the arena envs, or the agents of one env"
    )
    listing.add_argument("env", nargs="?", help="list this env's agents and ratings")
    token = sub.add_parser(
        "admin-token", parents=[common], help="make a token for the admin HTTP API and print it"
    )
    export = sub.add_parser(
        "export",
        parents=[common],
        help="write an env's finished runs as a Minari dataset (arena/ENV-v0) under DIRECTORY",
    )
    export.add_argument("env", help="the arena env")
    export.add_argument(
        "directory", type=Path, help="the datasets directory (MINARI_DATASETS_PATH)"
    )
    export.add_argument("--limit", type=int, default=10_000, help="newest runs to export")
    token.add_argument(
        "--from-stdin",
        action="store_true",
        help="store the admin password read from standard input instead (an AISysProj "
        "AdminClient's password, say)",
    )
    imports = sub.add_parser(
        "import-agents",
        parents=[common],
        help="create agents from a course's config files {agent, pwd, env, url}, keeping "
        "their passwords",
    )
    imports.add_argument("env", help="the arena env the agents join")
    imports.add_argument("files", nargs="+", type=Path, help="agent config files")
    imports.add_argument(
        "--replace", action="store_true", help="give existing agents the file's password"
    )
    imports.add_argument(
        "--any-env", action="store_true", help="accept files written for another env name"
    )
    migration = sub.add_parser(
        "migrate",
        parents=[common],
        help="carry an AISysProj server's database over: envs, agents, ratings, runs, groups",
    )
    migration.add_argument("original_db", help="its aisysprojserver.db")
    migration.add_argument(
        "--plugins", type=Path, help="its plugins folder (default: 'plugins' beside the file)"
    )
    migration.add_argument(
        "--admin-hashes",
        type=Path,
        help="its admin password hashes (default: admin_hashes.txt beside the file)",
    )
    migration.add_argument(
        "--admin-hash",
        action="append",
        metavar="sha256:HEX",
        help="an admin password hash to carry over as well: the ADMIN_AUTH its config set in "
        "code, which neither the database nor admin_hashes.txt holds",
    )
    migration.add_argument(
        "--env-map",
        action="append",
        metavar="NAME=ENV_ID",
        help="play an env by a catalog env instead of its plugin (unfinished runs are left out)",
    )
    url = sub.add_parser(
        "set-url", parents=[common], help="the server URL written into agent config files"
    )
    url.add_argument("url")
    arena.set_defaults(run=_run)
    return arena


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - envwire.cli is the entry
    """``python -m envwire.arena.cli ...`` (the same as ``envwire arena ...``)."""
    parser = argparse.ArgumentParser(prog="envwire")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["arena", *(sys.argv[1:] if argv is None else argv)])
    return int(args.run(args))
