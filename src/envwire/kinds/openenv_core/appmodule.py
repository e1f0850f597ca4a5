"""OpenEnv's envs as their authors wrote them: what an app module gave to ``create_app``.

An OpenEnv env package ends in a ``server/app.py`` that hands its env class (or a factory), its
Action and Observation models and its options to openenv-core's ``create_app`` and names the
result ``app``; uvicorn serves that. envwire takes the same string (``pkg.server.app:app``),
imports the module as uvicorn would (building openenv-core's FastAPI app starts no server) and
reads back what the app was built from: the ``HTTPEnvServer`` that ``create_app`` (or the
module itself, through ``HTTPEnvServer(...).register_routes(app)``) attached to the app's
routes holds the factory, the models and the concurrency settings. envwire serves those itself;
openenv-core's server never runs.

Three ways to name such an env, all resolved to an :class:`OpenEnvTarget`:

- the app: ``module:attr`` naming the FastAPI app (or the ``HTTPEnvServer``) the module built;
- the env class (or factory) and its models, given explicitly (``[env.openenv]`` in the
  config file: ``action``, ``observation``, ``max_concurrent_envs``);
- an env directory holding OpenEnv's ``openenv.yaml`` manifest, whose ``app`` entry names the
  app module relative to that directory.

Limits (documented in ``docs/protocols/openenv.md``): routes and middleware a module adds to the app
itself are not served (:attr:`OpenEnvTarget.extra_routes` lists them); the app must have been
built by openenv-core 0.3's ``create_app`` / ``HTTPEnvServer.register_routes``.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeGuard

from pydantic import BaseModel

from envwire.entrypoints import import_attr
from envwire.errors import ConfigError
from envwire.kinds.typed.gymenv import generic_models

__all__ = [
    "MANIFEST",
    "CoreServer",
    "OpenEnvTarget",
    "StepCall",
    "detect",
    "find_server",
    "from_class",
    "from_config",
    "from_server",
    "load_app",
    "read_manifest",
    "resolve",
]

#: The name of OpenEnv's env manifest.
MANIFEST = "openenv.yaml"

# What openenv-core itself registers on an app (FastAPI's own pages included); anything else a
# module added is not served by envwire.
_CORE_PATHS = frozenset(
    {
        "/openapi.json",
        "/docs",
        "/docs/oauth2-redirect",
        "/redoc",
        "/reset",
        "/step",
        "/state",
        "/metadata",
        "/health",
        "/schema",
        "/mcp",
        "/ws",
    }
)


@dataclass(frozen=True)
class OpenEnvTarget:
    """An OpenEnv env as openenv-core would serve it.

    Attributes:
        factory: makes one env instance, called without arguments (openenv-core's contract).
        action: the Action model clients send.
        observation: the Observation model ``/schema`` describes.
        max_concurrent_envs: most sessions at once (openenv-core's default is 1; None: no
            limit, for an env class served without an app that supports concurrent sessions).
        session_timeout: seconds an idle session is kept (None: openenv-core reaps none).
        production: True when the app was built in openenv-core's production mode (no HTTP
            ``/reset``, ``/step``, ``/state``).
        name: the factory's name, as openenv-core names it in error messages.
        extra_routes: routes the module added to the app itself (not served by envwire).
    """

    factory: Callable[[], Any]
    action: type[BaseModel]
    observation: type[BaseModel]
    max_concurrent_envs: int | None = 1
    session_timeout: float | None = None
    production: bool = False
    name: str = ""
    extra_routes: tuple[str, ...] = ()

    @property
    def env_class(self) -> type | None:
        """The class the factory makes, when it is known without making one."""
        factory: object = self.factory
        while hasattr(factory, "func"):  # functools.partial
            factory = factory.func
        return factory if inspect.isclass(factory) else None

    @property
    def single_thread(self) -> bool:
        """Whether the env class asks for every call on one thread (openenv-core's
        ``REQUIRES_SINGLE_THREAD_EXECUTOR``)."""
        return bool(getattr(self.env_class, "REQUIRES_SINGLE_THREAD_EXECUTOR", False))


@dataclass(frozen=True)
class StepCall:
    """A step of an OpenEnv env with the keywords the request carried besides the action
    (HTTP ``/step``'s ``timeout_s``, ``request_id`` and extra keys, which openenv-core passes
    to an env whose ``step`` accepts them)."""

    action: BaseModel
    kwargs: Mapping[str, Any]


class CoreServer(Protocol):
    """What is read of openenv-core's ``HTTPEnvServer`` (duck-typed, so that openenv-core
    need not be imported to tell one): its factory and its two model slots (None when the
    app was built without models)."""

    @property
    def _env_factory(self) -> Callable[[], Any]: ...

    @property
    def action_cls(self) -> object: ...

    @property
    def observation_cls(self) -> object: ...


def _is_model(value: object) -> TypeGuard[type[BaseModel]]:
    return isinstance(value, type) and issubclass(value, BaseModel)


def _model(key: str, value: object) -> type[BaseModel]:
    """``value``, checked to be a pydantic model class.

    Raises:
        ConfigError: it is not one.
    """
    if not _is_model(value):
        raise ConfigError(f"openenv {key} {value!r} is not a pydantic model class")
    return value


def _looks_like_server(value: object) -> TypeGuard[CoreServer]:
    """Duck-typed openenv-core ``HTTPEnvServer``: a factory and the two model slots."""
    return (
        not isinstance(value, type)
        and callable(getattr(value, "_env_factory", None))
        and hasattr(value, "action_cls")
        and hasattr(value, "observation_cls")
    )


def _base_models() -> tuple[type[BaseModel], type[BaseModel]]:
    from openenv.core.env_server.types import Action, Observation

    return Action, Observation


def _routes(app: object) -> Iterator[object]:
    """Every route of a Starlette/FastAPI app, mounted sub-apps included."""
    for route in getattr(app, "routes", ()) or ():
        yield route
        inner = getattr(route, "app", None)
        if inner is not None and inner is not app and hasattr(inner, "routes"):
            yield from _routes(inner)


def _closure_values(function: object) -> Iterator[object]:
    for cell in getattr(function, "__closure__", None) or ():
        try:
            yield cell.cell_contents
        except ValueError:  # an empty cell
            continue


def find_server(app: object) -> CoreServer:
    """The ``HTTPEnvServer`` whose routes an app carries (``app`` itself if it is one).

    openenv-core registers its endpoints as closures over the server object; the ``/ws`` and
    ``/schema`` endpoints reference it directly.

    Raises:
        ConfigError: the object was not built by openenv-core.
    """
    if _looks_like_server(app):
        return app
    for route in _routes(app):
        for value in _closure_values(getattr(route, "endpoint", None)):
            if _looks_like_server(value):
                return value
    raise ConfigError(
        f"{type(app).__name__} object was not built by openenv-core's create_app or "
        "HTTPEnvServer.register_routes (no HTTPEnvServer found among its routes)"
    )


def from_server(server: CoreServer, app: object = None) -> OpenEnvTarget:
    """The target an openenv-core ``HTTPEnvServer`` (and the app it registered on) serves."""
    config = getattr(server, "_concurrency_config", None)
    # An int in openenv-core: the config's, else (a config without one) the server's own.
    limit: int = getattr(config, "max_concurrent_envs", 0) or getattr(
        server, "_max_concurrent_envs", 1
    )
    timeout = getattr(config, "session_timeout", None)
    factory = server._env_factory
    paths = {getattr(route, "path", "") for route in _routes(app)} if app is not None else set()
    extra = tuple(sorted(p for p in paths if p and p not in _CORE_PATHS and "/web" not in p))
    # An app built without models (``create_app(env, None, None)``) still serves MCP; its
    # actions are validated as openenv-core's base Action, which routes MCP actions.
    action, observation = _base_models()
    return OpenEnvTarget(
        factory=factory,
        action=server.action_cls if _is_model(server.action_cls) else action,
        observation=server.observation_cls if _is_model(server.observation_cls) else observation,
        max_concurrent_envs=int(limit),
        session_timeout=float(timeout) if timeout else None,
        production=app is not None and "/reset" not in paths,
        name=getattr(factory, "__name__", str(factory)),
        extra_routes=extra,
    )


def _load_attr(entry: str) -> object:
    try:
        return import_attr(entry, repr(entry))
    except ConfigError:
        raise
    except Exception as exc:  # the module's own top-level code failed
        module_name = entry.partition(":")[0]
        raise ConfigError(
            f"{entry!r}: importing {module_name} raised {type(exc).__name__}: {exc}"
        ) from exc


def _is_environment_class(value: object) -> TypeGuard[type]:
    """A subclass of openenv-core's ``Environment`` (recognised by its module's name, so that
    openenv-core need not be imported to tell)."""
    return isinstance(value, type) and any(
        klass.__name__ == "Environment"
        and klass.__module__.startswith("openenv.core.env_server.interfaces")
        for klass in value.__mro__[1:]
    )


def detect(entry: str) -> dict[str, Any] | None:
    """The settings :func:`resolve` needs if ``entry`` (``module:attr``) names an OpenEnv app,
    server or ``Environment`` subclass; None for anything else, or when it cannot be loaded."""
    try:
        value = _load_attr(entry)
    except ConfigError:
        return None
    if _is_environment_class(value):
        return {"class": True}
    try:
        find_server(value)
    except ConfigError:
        return None
    return {"app": True}


def from_class(cls: type) -> OpenEnvTarget:
    """A target for an ``Environment[Act, Obs, State]`` subclass served without an app: its
    models are the type arguments; it takes any number of sessions if it declares
    ``SUPPORTS_CONCURRENT_SESSIONS``, else one.

    Raises:
        ConfigError: the class has no model type arguments.
    """
    models = generic_models(cls)
    if models is None:
        raise ConfigError(
            f"{cls.__name__} gives openenv-core's Environment no type arguments: serve its app "
            "module (pkg.server.app:app), or name its models in the config ([env.openenv] "
            "action = ..., observation = ...)"
        )
    concurrent = getattr(cls, "SUPPORTS_CONCURRENT_SESSIONS", False)
    return OpenEnvTarget(
        factory=cls,
        action=models[0],
        observation=models[1],
        max_concurrent_envs=None if concurrent else 1,
        name=cls.__name__,
    )


def load_app(entry: str) -> OpenEnvTarget:
    """Import an app module (``pkg.server.app:app``) and read what its app was built from.

    Raises:
        ConfigError: the module cannot be imported, or ``attr`` is not an openenv-core app.
    """
    app = _load_attr(entry)
    try:
        server = find_server(app)
    except ConfigError as exc:
        raise ConfigError(f"{entry}: {exc}") from None
    return from_server(server, None if server is app else app)


def from_config(
    env: str,
    action: str,
    observation: str,
    *,
    max_concurrent_envs: int | None = None,
    session_timeout: float | None = None,
) -> OpenEnvTarget:
    """A target from an env class (or factory) and its models, named as ``module:attr``.

    The same checks as openenv-core's ``HTTPEnvServer``: the env must be callable, and more
    than one concurrent session needs ``SUPPORTS_CONCURRENT_SESSIONS``. Without
    ``max_concurrent_envs``, a class that supports concurrent sessions takes any number, any
    other env one.

    Raises:
        ConfigError: something cannot be imported, or the settings are inconsistent.
    """
    factory = _load_attr(env)
    loaded = {"action": _load_attr(action), "observation": _load_attr(observation)}
    models = {key: _model(key, value) for key, value in loaded.items()}
    if not callable(factory):
        raise ConfigError(f"{env} is not callable: give the env class or a factory")
    target = OpenEnvTarget(
        factory=factory,
        action=models["action"],
        observation=models["observation"],
        max_concurrent_envs=max_concurrent_envs,
        session_timeout=session_timeout,
        name=getattr(factory, "__name__", env),
    )
    cls = target.env_class
    concurrent = getattr(cls, "SUPPORTS_CONCURRENT_SESSIONS", False)
    if max_concurrent_envs is None:
        return dataclasses.replace(target, max_concurrent_envs=None if concurrent else 1)
    if max_concurrent_envs < 1:
        raise ConfigError(f"{env}: max_concurrent_envs must be >= 1")
    if max_concurrent_envs > 1 and cls is not None and not concurrent:
        raise ConfigError(
            f"Environment '{cls.__name__}' is not marked as SUPPORTS_CONCURRENT_SESSIONS: "
            f"it cannot run with max_concurrent_envs={max_concurrent_envs}"
        )
    return target


@dataclass(frozen=True)
class Manifest:
    """What envwire reads from an env directory's ``openenv.yaml``."""

    name: str
    app: str  # module:attr, importable once ``path`` is on sys.path
    path: str


def read_manifest(directory: str | os.PathLike[str]) -> Manifest:
    """Read ``openenv.yaml`` in an env directory.

    The manifest's ``app`` (``server.app:app``) is relative to the directory, as uvicorn runs
    it from there. A directory that is a package (it has ``__init__.py``) is imported as one
    (``echo_env.server.app``, with its parent on ``sys.path``), so that several envs of one
    checkout can be served together; otherwise the directory itself goes on ``sys.path``.

    Raises:
        ConfigError: no manifest, or it names no app.
    """
    root = Path(directory).resolve()
    manifest = root / MANIFEST
    try:
        import yaml  # type: ignore[import-untyped]
    except ImportError as exc:  # pragma: no cover - openenv-core depends on PyYAML
        raise ConfigError(f"reading {manifest} needs PyYAML: {exc}") from exc
    try:
        data = yaml.safe_load(manifest.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read {manifest}: {exc}") from exc
    if not isinstance(data, Mapping) or not isinstance(data.get("app"), str):
        raise ConfigError(f"{manifest} names no app (expected 'app: server.app:app')")
    module, sep, attr = str(data["app"]).partition(":")
    if not sep:
        raise ConfigError(f"{manifest}: app {data['app']!r} must look like 'server.app:app'")
    name = str(data.get("name") or root.name)
    if (root / "__init__.py").exists():
        return Manifest(name, f"{root.name}.{module}:{attr}", str(root.parent))
    return Manifest(name, f"{module}:{attr}", str(root))


def add_paths(paths: Sequence[str]) -> None:
    """Put ``paths`` at the front of ``sys.path`` (once each)."""
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)


_CACHE: dict[tuple[Any, ...], OpenEnvTarget] = {}


def resolve(settings: Mapping[str, Any], entry_point: str) -> OpenEnvTarget:
    """The target an ``EnvSpec``'s ``openenv`` settings and entry point describe.

    ``settings`` keys: ``target`` (an :class:`OpenEnvTarget` made in this process, for envs
    served in-process), ``app`` (True: the entry point names an app), ``class`` (True: an
    ``Environment[Act, Obs, State]`` subclass), ``action`` and
    ``observation`` (model entry points, with the env class or factory as entry point),
    ``max_concurrent_envs``, ``session_timeout``, ``paths`` (added to ``sys.path`` first).
    Loading is cached per process: an app module is imported once.

    Raises:
        ConfigError: as :func:`load_app` and :func:`from_config`.
    """
    given = settings.get("target")
    if isinstance(given, OpenEnvTarget):
        return given
    key = (entry_point, *sorted((k, repr(v)) for k, v in settings.items()))
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    add_paths(tuple(settings.get("paths", ())))
    if settings.get("class"):
        cls = _load_attr(entry_point)
        if not _is_environment_class(cls):
            raise ConfigError(f"{entry_point} is not a subclass of openenv-core's Environment")
        target = from_class(cls)
    elif settings.get("app"):
        target = load_app(entry_point)
        overrides = {
            k: settings[k] for k in ("max_concurrent_envs", "session_timeout") if k in settings
        }
        if overrides:
            target = dataclasses.replace(target, **overrides)
    elif "action" in settings and "observation" in settings:
        target = from_config(
            entry_point,
            str(settings["action"]),
            str(settings["observation"]),
            max_concurrent_envs=settings.get("max_concurrent_envs"),
            session_timeout=settings.get("session_timeout"),
        )
    else:
        raise ConfigError(
            f"{entry_point}: OpenEnv settings need either app = true or action and observation"
        )
    _CACHE[key] = target
    return target
