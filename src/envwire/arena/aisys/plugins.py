"""Envs written for the AISysProj server's plugin interface, loaded as envwire arena envs.

That server loads envs from a plugins folder: each plugin is a Python package in it, and an env
is named by ``"package.module:Class"``, a subclass of its ``GenericEnvironment``. envwire names
such an env ``"aisys:package.module:Class"`` (the :data:`PREFIX` marks the interface) and plays
it through :class:`envwire.arena.aisys.game.PluginGame`.

- :class:`PluginFolder` is the plugins folder: it goes on ``sys.path``, it lists its packages,
  and it takes uploads (a zip of one package, as that server's ``/uploadplugin`` takes them,
  checked before anything is written: one top-level package, no absolute or ``..`` paths, no
  links, bounded file count and size). An upload replaces the package and forgets its modules,
  so the next env made from it runs the new code.
- :func:`install_interface` makes ``aisysprojserver.*`` importable as the interface modules of
  :mod:`envwire.arena.aisys.interface` when that server is not installed (an installed one
  wins: the finder is the last one asked).
- :func:`load_env_class` imports ``module:Class`` and checks it subclasses ``GenericEnvironment``.
- :func:`arena_settings` reads a plugin's ``EnvSettings`` as arena settings.

Plugins are code the admin installs: they run in the server process (as they did on the
original server), with the same trust as an entry point on the command line.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import shutil
import stat
import sys
import tempfile
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Protocol

from envwire.errors import ConfigError, InvalidArgumentError
from envwire.jsonio import JsonValue

__all__ = [
    "MAX_UPLOAD_FILES",
    "MAX_UPLOAD_SIZE",
    "PLUGINS_HINT",
    "PREFIX",
    "Plugin",
    "PluginFolder",
    "arena_settings",
    "install_interface",
    "is_plugin_id",
    "load_env_class",
    "make_plugin",
    "plugin_ref",
    "run_data",
]

#: The env id prefix of plugin envs: ``aisys:package.module:Class``.
PREFIX = "aisys:"
#: Most files in an uploaded plugin.
MAX_UPLOAD_FILES = 2000
#: Most bytes an uploaded plugin unpacks to.
MAX_UPLOAD_SIZE = 64 << 20

_ORIGINAL = "aisysprojserver"
_INTERFACE = "envwire.arena.aisys.interface"
_MODULES = ("env_interface", "env_settings", "env_mixins", "website")
_lock = threading.Lock()


class Plugin(Protocol):
    """What the arena calls on a plugin env: an instance of a subclass of the interface's
    ``GenericEnvironment`` (envwire's copy, or an installed ``aisysprojserver``'s, which wins).

    Which of the two it is is known only at run time, so the run it is given is typed
    ``object`` (it is what :func:`run_data` made, only handed back to the plugin), and what it
    returns is read with ``getattr`` (results, action requests) or encoded as JSON (states,
    outcomes).
    """

    def new_run(self) -> object:
        """The first state of a new run."""
        ...

    def act(self, action: JsonValue, run_data: object, /) -> object:
        """The ``ActionResult`` of an action."""
        ...

    def get_action_request(self, run_data: object, /) -> object:
        """The ``ActionRequest`` (its ``content`` is the percept) of the run's next action."""
        ...

    def get_abandon_outcome(self, run_data: object, /) -> object:
        """The outcome of a run the client abandons."""
        ...


def is_plugin_id(env_id: str) -> bool:
    """Whether an arena env's id names a plugin env."""
    return env_id.startswith(PREFIX)


def plugin_ref(env_id: str) -> str:
    """``package.module:Class`` of a plugin env id."""
    return env_id[len(PREFIX) :] if is_plugin_id(env_id) else env_id


class _Alias(importlib.abc.Loader):
    """Loads a module name as another, already importable module."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the target module ran when it was imported."""


class _InterfaceFinder(importlib.abc.MetaPathFinder):
    """Finds ``aisysprojserver`` and its interface modules as envwire's interface modules."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == _ORIGINAL:
            return importlib.util.spec_from_loader(fullname, _Alias(_INTERFACE), is_package=True)
        head, _, tail = fullname.partition(".")
        if head == _ORIGINAL and tail in _MODULES:
            return importlib.util.spec_from_loader(fullname, _Alias(f"{_INTERFACE}.{tail}"))
        return None


def install_interface() -> None:
    """Make the plugin interface importable under its original names (idempotent)."""
    with _lock:
        if not any(isinstance(f, _InterfaceFinder) for f in sys.meta_path):
            sys.meta_path.append(_InterfaceFinder())


def _generic_base() -> type:
    base: type = _interface().GenericEnvironment
    return base


#: What to do about a plugin that does not import, by default (the server's flag).
PLUGINS_HINT = (
    "is its plugins folder given: --arena-plugins DIR for envwire serve, --plugins DIR for "
    "envwire arena create-env?"
)


def load_env_class(ref: str, *, hint: str = PLUGINS_HINT) -> type:
    """Import a plugin env class from ``package.module:Class``; ``hint`` ends the message of a
    module that does not import.

    Raises:
        ConfigError: the reference is malformed, does not import, or is not a subclass of the
            interface's ``GenericEnvironment``.
    """
    module_name, sep, attribute = plugin_ref(ref).partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(f"a plugin env is named 'package.module:Class', got {ref!r}")
    base = _generic_base()
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError(
            f"plugin module {module_name!r} does not import: {type(exc).__name__}: {exc} ({hint})"
        ) from exc
    cls = getattr(module, attribute, None)
    if not isinstance(cls, type) or not issubclass(cls, base):
        raise ConfigError(
            f"{module_name}:{attribute} is not a subclass of GenericEnvironment "
            "(the AISysProj plugin interface)"
        )
    return cls


def _interface() -> ModuleType:
    install_interface()
    return importlib.import_module(f"{_ORIGINAL}.env_interface")


def make_plugin(cls: type, display_name: str, identifier: str, config: JsonValue) -> Plugin:
    """An instance of a plugin env for an arena env, as that server makes them.

    Raises:
        ConfigError: the constructor failed.
    """
    info = _interface().EnvInfo(display_name=display_name, identifier=identifier)
    try:
        # load_env_class checked that cls subclasses GenericEnvironment: a Plugin.
        plugin: Plugin = cls(info, config)
    except Exception as exc:
        raise ConfigError(f"{cls.__name__}(...) failed: {type(exc).__name__}: {exc}") from exc
    return plugin


def run_data(
    run_id: int,
    agent: str,
    state: JsonValue,
    history: Sequence[tuple[JsonValue, JsonValue]],
    outcome: JsonValue = None,
) -> object:
    """The interface's ``RunData`` of a run (state and history as JSON values), for the plugin's
    calls (see :class:`Plugin`)."""
    iface = _interface()
    return iface.RunData(
        action_history=[iface.ActionHistoryEntry(a, x) for a, x in history],
        state=state,
        outcome=outcome,
        run_id=run_id,
        agent_name=agent,
    )


def arena_settings(cls: type) -> tuple[dict[str, object], str]:
    """A plugin's ``EnvSettings`` as arena settings, and its description.

    Raises:
        ConfigError: a rating strategy other than ``"average"`` (the only one there is).
    """
    settings = getattr(cls, "settings", None)
    strategy = getattr(settings, "RATING_STRATEGY", "average")
    if strategy != "average":
        raise ConfigError(f"{cls.__name__}: unsupported RATING_STRATEGY {strategy!r}")

    def get(name: str, default: object) -> object:
        return getattr(settings, name, default)

    values = {
        "initial_rating": get("INITIAL_RATING", 0.0),
        "rating_runs": get("MIN_RUNS_FOR_FULLY_EVALUATED", 50),
        "rating_objective": get("RATING_OBJECTIVE", "max"),
        "requests_per_reply": get("NUMBER_OF_ACTION_REQUESTS", 5),
        "can_abandon": bool(get("CAN_ABANDON_RUNS", False)),
    }
    return values, str(get("DESCRIPTION", "") or "")


class PluginFolder:
    """The folder plugin packages live in (that server's ``plugins`` folder).

    Args:
        path: the folder (created when missing).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()
        self.path.mkdir(parents=True, exist_ok=True)
        with _lock:
            if str(self.path) not in sys.path:
                sys.path.append(str(self.path))
        install_interface()

    def packages(self) -> list[str]:
        """The plugin packages, by name."""
        return sorted(p.name for p in self.path.iterdir() if p.is_dir() and p.name.isidentifier())

    def upload(self, data: bytes) -> str:
        """Install a zipped plugin package (replacing one of the same name); its name.

        Raises:
            InvalidArgumentError: not a zip, or not one package, or a member is unsafe or the
                whole too large (nothing was written).
        """
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
        except (zipfile.BadZipFile, ValueError) as exc:
            raise InvalidArgumentError(f"the plugin is not a zip file ({exc})") from None
        with archive:
            package = _check_members(archive.infolist())
            with _lock:
                staging = Path(tempfile.mkdtemp(prefix=".upload-", dir=self.path))
                try:
                    archive.extractall(staging)
                    target, old = self.path / package, self.path / f".old-{package}"
                    shutil.rmtree(old, ignore_errors=True)
                    if target.exists():
                        target.rename(old)
                    (staging / package).rename(target)
                    shutil.rmtree(old, ignore_errors=True)
                finally:
                    shutil.rmtree(staging, ignore_errors=True)
                forget_package(package)
        return package


def forget_package(package: str) -> None:
    """Drop a package's modules from ``sys.modules`` (the next import reads the files again)."""
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]
    importlib.invalidate_caches()


def _check_members(members: list[zipfile.ZipInfo]) -> str:
    """The one top-level package of an upload, after checking every member."""
    if not members:
        raise InvalidArgumentError("the plugin zip is empty")
    if len(members) > MAX_UPLOAD_FILES:
        raise InvalidArgumentError(
            f"the plugin has {len(members)} files; at most {MAX_UPLOAD_FILES} are accepted"
        )
    total = sum(m.file_size for m in members)
    if total > MAX_UPLOAD_SIZE:
        raise InvalidArgumentError(
            f"the plugin unpacks to {total} bytes; at most {MAX_UPLOAD_SIZE} are accepted"
        )
    package = PurePosixPath(members[0].filename).parts[0] if members[0].filename else ""
    if not package.isidentifier():
        raise InvalidArgumentError(
            f"the plugin must be one package folder, got {members[0].filename!r}"
        )
    for member in members:
        path = PurePosixPath(member.filename)
        mode = member.external_attr >> 16
        if (
            path.is_absolute()
            or "\\" in member.filename
            or ".." in path.parts
            or path.parts[0] != package
            or stat.S_ISLNK(mode)
        ):
            raise InvalidArgumentError(
                f"unexpected file {member.filename!r} in plugin {package!r} (every file must "
                "lie inside the package folder)"
            )
    return package
