"""Settings from the config file and the command line, checked once, before anything listens.

:func:`load` takes the sources in order of precedence (the file's ``[server]`` table, then the
flags given) and returns one frozen :class:`Settings`. Every mistake is one
:class:`~envwire.errors.ConfigError` naming where it came from, the key and what the key
expects; an unknown key names the nearest valid one. :func:`add_arguments` makes the flags of
``envwire serve`` from the same fields, and :func:`markdown` the docs' settings table.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_type_hints

from envwire.errors import ConfigError, clip
from envwire.ports import FRONT_ENDS
from envwire.settings.sections import (
    ArenaSettings,
    DmEnvRpcSettings,
    GymSocketSettings,
    HttpSettings,
    Meta,
    ObserveSettings,
    OpenEnvSettings,
    Section,
    SecuritySettings,
    ServerSettings,
    metas,
)
from envwire.settings.values import Choice, Flag, Kind, Names, Value

__all__ = [
    "SECTIONS",
    "Settings",
    "Source",
    "add_arguments",
    "given",
    "keys",
    "load",
    "markdown",
]

#: Old keys kept working: the key, and the (key, value) it stands for when true.
_ALIASES: dict[str, tuple[str, str]] = {"legacy_monitor_reply": ("monitor_layout", "video")}


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything ``envwire serve`` can set, section by section (in the order of ``--help``
    and the docs); each front end of :data:`envwire.ports.FRONT_ENDS` has the section its row
    names."""

    server: ServerSettings = field(default_factory=ServerSettings)
    security: SecuritySettings = field(default_factory=SecuritySettings)
    gym_socket: GymSocketSettings = field(default_factory=GymSocketSettings)
    http: HttpSettings = field(default_factory=HttpSettings)
    openenv: OpenEnvSettings = field(default_factory=OpenEnvSettings)
    dmenvrpc: DmEnvRpcSettings = field(default_factory=DmEnvRpcSettings)
    observe: ObserveSettings = field(default_factory=ObserveSettings)
    arena: ArenaSettings = field(default_factory=ArenaSettings)

    def ports(self) -> dict[str, int | None]:
        """Each listener's port by its name (None: off): every front end's, then the metrics
        listener's."""
        ports: dict[str, int | None] = {row.name: self.port(row.section) for row in FRONT_ENDS}
        return {**ports, "metrics": self.observe.metrics}

    def port(self, section: str) -> int | None:
        """The port of the front end whose settings are the section ``section`` (None: off)."""
        port: int | None = getattr(self, section).port
        return port

    @classmethod
    def of(cls, **given: object) -> Settings:
        """The defaults with some keys changed (``Settings.of(http=0, grpc="off")``), checked as
        :func:`load` checks them.

        Raises:
            ConfigError: an unknown key or a bad value.
        """
        return load([Source("the caller", given)])

    def replace(self, **given: object) -> Settings:
        """These settings with some keys changed, checked as :func:`load` checks them.

        Raises:
            ConfigError: an unknown key or a bad value.
        """
        return load([Source("the caller", given)], base=self)


#: Every section, in the order of ``--help`` and the docs: :class:`Settings`'s fields.
SECTIONS: tuple[type[Section], ...] = tuple(get_type_hints(Settings).values())


@dataclass(frozen=True, slots=True)
class Source:
    """Settings from one place: its name in error messages, and its keys and values."""

    where: str
    values: Mapping[str, object]


def _index() -> dict[str, tuple[str, str, Meta]]:
    """key -> (section attribute of :class:`Settings`, field, meta)."""
    index: dict[str, tuple[str, str, Meta]] = {}
    for item, section in zip(dataclasses.fields(Settings), SECTIONS, strict=True):
        for name, meta in metas(section):
            index[meta.key] = (item.name, name, meta)
    return index


def keys() -> list[str]:
    """Every key the ``[server]`` table takes, in the docs' order."""
    return list(_index())


def _nearest(key: str) -> str:
    # a front end's name in the code (its section: dmenvrpc) stands for its port's key (grpc)
    ports = {row.section: row.key for row in FRONT_ENDS}
    close = [ports[key]] if key in ports else []
    close = close or difflib.get_close_matches(key, [*_index(), *_ALIASES], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def load(sources: Iterable[Source], *, base: Settings | None = None) -> Settings:
    """The settings of ``base`` (the defaults) with each source's values laid over it, later
    sources winning.

    Raises:
        ConfigError: an unknown key, a value of the wrong kind, or settings that cannot go
            together (TLS without its key, every front end off, ...).
    """
    index = _index()
    chosen: dict[str, dict[str, Any]] = {}
    for source in sources:
        for key, value in source.values.items():
            if key in _ALIASES:
                if value is True:
                    key, value = _ALIASES[key]  # noqa: PLW2901
                elif value is False:
                    continue
            if key not in index:
                raise ConfigError(f"{source.where}: unknown key {key!r}{_nearest(key)}")
            section, name, meta = index[key]
            chosen.setdefault(section, {})[name] = _checked(source.where, key, meta.kind, value)
    settings = base or Settings()
    changes = {s: dataclasses.replace(getattr(settings, s), **v) for s, v in chosen.items()}
    settings = dataclasses.replace(settings, **changes)
    _check_together(settings)
    return settings


def _checked(where: str, key: str, kind: Kind, value: object) -> Value:
    try:
        return kind.check(value)
    except (TypeError, ValueError, OverflowError):
        shown = clip(value) if isinstance(value, str) else clip(repr(value))[1:-1]
        hint = ""
        if isinstance(kind, Choice) and isinstance(value, str):
            close = difflib.get_close_matches(value, kind.choices, n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"{where}: {key} must be {kind.expects}, got {shown}{hint}") from None


def _check_together(settings: Settings) -> None:
    security, arena = settings.security, settings.arena
    if bool(security.tls_cert) != bool(security.tls_key):
        raise ConfigError(
            "TLS needs both a certificate and its key (--tls-cert and --tls-key, or tls_cert and "
            "tls_key in the config file)"
        )
    if arena.arena_plugin_upload and arena.arena_plugins is None:
        raise ConfigError(
            "arena_plugin_upload needs arena_plugins, the plugins folder (--arena-plugins DIR)"
        )
    if all(settings.port(row.section) is None for row in FRONT_ENDS):
        keys = [row.key for row in FRONT_ENDS]
        raise ConfigError(
            f"every front end is off ({', '.join(keys[:-1])} and {keys[-1]}): nothing would be "
            "served; give at least one a port (0 picks a free one)"
        )


# -- the command line ---------------------------------------------------------------------


def _argument_type(kind: Kind) -> Callable[[str], Value]:
    def parse(text: str) -> Value:
        try:
            return kind.parse(text)
        except (TypeError, ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"expected {kind.expects}, got {text!r}") from None

    parse.__name__ = type(kind).__name__.lower()  # argparse names the type in its messages
    return parse


def add_arguments(parser: argparse.ArgumentParser, only: Iterable[str] | None = None) -> None:
    """A flag for every setting (or for the keys ``only`` names), in a group per section; a
    flag not given leaves its key out of the parsed namespace (:func:`given` picks the ones
    that were)."""
    chosen = None if only is None else set(only)
    for section in SECTIONS:
        fields = [(n, m) for n, m in metas(section) if chosen is None or m.key in chosen]
        if not fields:
            continue
        group = parser.add_argument_group(f"{section.title} settings")
        for name, meta in fields:
            default = getattr(section(), name)
            shown = meta.shown or meta.kind.show(default)
            text = f"{meta.help} (default {shown})"
            options: dict[str, Any] = {"dest": meta.key, "default": argparse.SUPPRESS}
            if isinstance(meta.kind, Flag):
                group.add_argument(meta.flag, action="store_true", help=text, **options)
            elif isinstance(meta.kind, Names):
                group.add_argument(
                    meta.flag, action="append", metavar=meta.kind.metavar, help=text, **options
                )
            else:
                kind = meta.kind
                group.add_argument(
                    meta.flag, type=_argument_type(kind), metavar=kind.metavar, help=text, **options
                )
    if chosen is not None:
        return
    # The old flag of monitor_layout video, kept working.
    parser.add_argument(
        "--legacy-monitor-reply",
        dest="monitor_layout",
        action="store_const",
        const="video",
        default=argparse.SUPPRESS,
        help=argparse.SUPPRESS,
    )


def given(namespace: argparse.Namespace) -> dict[str, object]:
    """The settings among parsed flags (only those given on the command line)."""
    known = _index()
    return {key: value for key, value in vars(namespace).items() if key in known}


# -- the docs ------------------------------------------------------------------------------


def markdown() -> str:
    """The settings table of ``docs/guides/serving.md``: a table per section."""
    lines: list[str] = []
    for section in SECTIONS:
        lines += [f"#### {section.title[:1].upper()}{section.title[1:]}", ""]
        lines += ["| key | flag | default | what |", "|---|---|---|---|"]
        for name, meta in metas(section):
            default = meta.shown or meta.kind.show(getattr(section(), name))
            what = f"{meta.help}; {meta.kind.expects}"
            lines.append(f"| `{meta.key}` | `{meta.flag}` | {default} | {what} |")
        lines.append("")
    return "\n".join(lines)
