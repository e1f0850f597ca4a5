"""Env ids -> :class:`EnvSpec`: what a server serves, and how each env is made.

A :class:`Catalog` is the set of envs one server serves. Entries come from three places:

- Gymnasium ids (``CartPole-v1``), made with ``gymnasium.make``;
- envwire's built-ins (``envwire/Catch-v0``), which are registered with Gymnasium too;
- ``module:attr`` entry points given on the server's command line or config file, never from
  the wire: a client can only name ids the server operator chose.

Unknown ids raise :class:`~envwire.errors.UnknownEnvError` with did-you-mean suggestions.
"""

from __future__ import annotations

import difflib
import functools
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import dm_env
import gymnasium

from envwire.entrypoints import import_attr
from envwire.errors import ConfigError, EnvError, InvalidArgumentError, UnknownEnvError, clip
from envwire.kinds.dm_env import DmEnvGym, control
from envwire.kinds.openenv_core import appmodule as openenv_app
from envwire.kinds.openenv_core.appmodule import read_manifest
from envwire.kinds.typed.gymenv import as_gymnasium, is_typed_env

__all__ = [
    "DEFAULT_IDS",
    "DEFAULT_STEP_TIMEOUT",
    "MAX_ENV_ID",
    "Catalog",
    "EnvSpec",
    "Isolation",
    "default_catalog",
    "load_errors",
    "parse_env_arg",
    "with_openenv",
]

log = logging.getLogger(__name__)

Isolation = Literal["auto", "inline", "process", "pool", "ray"]

#: Gymnasium's classic-control envs, served by default beside the built-ins.
CLASSIC_CONTROL = (
    "CartPole-v1",
    "CartPole-v0",
    "MountainCar-v0",
    "MountainCarContinuous-v0",
    "Pendulum-v1",
    "Acrobot-v1",
)

#: envwire's own envs (registered with Gymnasium by ``envwire.envs``).
BUILTIN_IDS = (
    "envwire/Catch-v0",
    "envwire/Nim-v0",
    "envwire/Echo-v0",
    "envwire/Connect4-v0",
    "envwire/Coding-v0",
)

DEFAULT_IDS = CLASSIC_CONTROL + BUILTIN_IDS

#: Seconds one env call may take when the operator set no ``step_timeout``, for every env but
#: OpenEnv's own, which get no deadline: openenv-core waits for a step however long it takes
#: (OpenEnv's julia env allows its code 120 s), and its envs are written for that.
DEFAULT_STEP_TIMEOUT = 30.0

#: The longest env id a client may name: longer ids are unknown without a did-you-mean search.
MAX_ENV_ID = 256

#: Entry points that name a dm_control suite env: ``dm_control/<domain>-<task>``.
DM_CONTROL = "dm_control/"

#: The keyword arguments of a dm_env entry that go to its Gymnasium form, not to the env.
_DM_VIEW = ("render_mode", "render_kwargs")

# Entry points from these packages are trusted and cheap: they run inline by default.
_TRUSTED_PREFIXES = ("gymnasium.envs.", "envwire.envs.", "envwire.kinds.godot.")


@dataclass(frozen=True, slots=True)
class EnvSpec:
    """How to make one env, and how to host it.

    Attributes:
        id: the id clients name.
        entry_point: a Gymnasium id (``gym:CartPole-v1``) or ``module:attr`` naming a
            ``gymnasium.Env`` subclass or a factory returning one, or a typed env
            (:mod:`envwire.kinds.typed`), which is hosted behind
            :class:`~envwire.kinds.typed.TypedGymEnv`.
        kwargs: keyword arguments for the env's constructor.
        isolation: ``inline`` (in the server process), ``process`` (a worker process per
            session), ``pool`` (a few worker processes, one per core by default, each hosting
            many sessions' envs), ``ray`` (a Ray actor per session, anywhere on a Ray cluster),
            or ``auto`` (inline for Gymnasium's and envwire's envs, else process).
        max_episode_steps: wrap the env in a time limit (``module:attr`` envs only; Gymnasium
            ids carry their own).
        step_timeout: seconds one reset/step/render may take before the env is abandoned, or
            ``auto`` (:attr:`resolved_step_timeout`): :data:`DEFAULT_STEP_TIMEOUT`, and no
            deadline for OpenEnv's own envs.
        make_timeout: seconds making the env may take.
        client_kwargs: constructor arguments clients may set when they open a session (e.g.
            dm_env_rpc's CreateWorld settings); any other name is refused. Empty by default:
            what an env is made with is the operator's choice.
        ray: the ``[env.ray]`` table: the resources of the env's Ray actors and how a session's
            actors are placed (see ``envwire.runtime.ray.RayOptions``); used with ``ray``
            isolation only.
        record: record this env's episodes as a Minari dataset (``record = true`` in an
            ``[[env]]`` table; see ``docs/guides/observability.md``).
        openenv: set for OpenEnv's own envs (openenv-core ``Environment`` classes), which
            ``envwire.kinds.openenv_core.gymenv`` hosts as openenv-core does: how to load the
            env (:func:`envwire.kinds.openenv_core.appmodule.resolve`). :func:`with_openenv`
            fills it in for entry points that name an OpenEnv app or class.
        max_sessions: most sessions of this env at once (None: no limit of its own); for an
            OpenEnv env, the ``max_concurrent_envs`` its app chose.
        session_timeout: seconds one of this env's sessions on the OpenEnv front end (HTTP,
            WebSocket, MCP) may go unused before it is closed, when shorter than the server's
            own idle limits (None: those alone); for an OpenEnv env, the ``session_timeout`` its
            app chose.
    """

    id: str
    entry_point: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    isolation: Isolation = "auto"
    max_episode_steps: int | None = None
    step_timeout: float | Literal["auto"] = "auto"
    make_timeout: float = 120.0
    client_kwargs: tuple[str, ...] = ()
    ray: Mapping[str, Any] = field(default_factory=dict)
    record: bool = False
    openenv: Mapping[str, Any] | None = None
    max_sessions: int | None = None
    session_timeout: float | None = None

    def __post_init__(self) -> None:
        # Every wait has a bound: a zero or negative timeout would fail every call at once.
        for name in ("step_timeout", "make_timeout", "session_timeout"):
            value = getattr(self, name)
            if (value is None and name == "session_timeout") or (
                value == "auto" and name == "step_timeout"
            ):
                continue
            if not (isinstance(value, int | float) and 0 < value < float("inf")):
                raise ConfigError(
                    f"{self.id}: {name} must be a positive number of seconds, got {value!r}"
                )

    def with_client_kwargs(self, kwargs: Mapping[str, Any]) -> EnvSpec:
        """This spec with constructor arguments a client asked for.

        Raises:
            InvalidArgumentError: an argument the operator did not open to clients.
        """
        if not kwargs:
            return self
        refused = sorted(set(kwargs) - set(self.client_kwargs))
        if refused:
            allowed = ", ".join(self.client_kwargs) or "none"
            raise InvalidArgumentError(
                f"{self.id}: clients may not set {refused} (allowed: {allowed}); the server's "
                "config opens arguments to clients with client_kwargs = [...]"
            )
        return replace(self, kwargs={**self.kwargs, **kwargs})

    @property
    def resolved_isolation(self) -> Literal["inline", "process", "pool", "ray"]:
        """``isolation`` with ``auto`` decided."""
        if self.isolation != "auto":
            return self.isolation
        if self.openenv is not None:
            # openenv-core runs its envs in its own process, and loading one in a worker means
            # importing openenv-core there (seconds): they run inline unless asked otherwise.
            return "inline"
        return "inline" if self._target_module().startswith(_TRUSTED_PREFIXES) else "process"

    @property
    def decides_steps(self) -> bool:
        """Whether the env decides for itself what a step before the first reset, or after its
        episode ended, means (OpenEnv's own envs: openenv-core passes every step to the env), so
        that a session passes such steps on rather than refusing them."""
        return self.openenv is not None

    @property
    def resolved_step_timeout(self) -> float | None:
        """``step_timeout`` with ``auto`` decided: None (no deadline) for OpenEnv's own envs,
        as openenv-core has none, else :data:`DEFAULT_STEP_TIMEOUT`."""
        if self.step_timeout != "auto":
            return self.step_timeout
        return None if self.openenv is not None else DEFAULT_STEP_TIMEOUT

    def _target_module(self) -> str:
        if self.entry_point.startswith("gym:"):
            try:
                gym_spec = gymnasium.spec(self.entry_point[4:])
            except gymnasium.error.Error:
                return ""
            target = gym_spec.entry_point
            if callable(target):
                return f"{target.__module__}."
            return f"{str(target).partition(':')[0]}."
        return f"{self.entry_point.partition(':')[0]}."

    def target(self) -> Callable[..., object] | None:
        """The class (or factory) envs are made with, loaded without making one (for ``gym:``
        ids, what Gymnasium registered, which may be None).

        Raises:
            ConfigError: the entry point cannot be loaded.
        """
        if not self.entry_point.startswith("gym:"):
            return self._factory()
        try:
            target = gymnasium.spec(self.entry_point[4:]).entry_point
        except gymnasium.error.Error as exc:
            raise ConfigError(f"{self.id}: {exc}") from exc
        return load_entry_point(target) if isinstance(target, str) else target

    def _factory(self) -> Callable[..., object]:
        """:meth:`target` for the entry points that are not Gymnasium ids."""
        if self.entry_point.startswith(DM_CONTROL):
            return functools.partial(control.load, self.entry_point)
        return load_entry_point(self.entry_point)

    def metadata(self) -> dict[str, Any]:
        """The ``metadata`` the env's class declares ({} for factories, or when the entry point
        cannot be loaded here)."""
        if self.entry_point.startswith(DM_CONTROL):  # drawn by MuJoCo, where GL works
            return {"render_modes": ["rgb_array"]}
        try:
            metadata = getattr(self.target(), "metadata", None)
        except ConfigError:
            return {}
        return dict(metadata) if isinstance(metadata, dict) else {}

    def render_mode(self) -> str | None:
        """The render mode envs are made with: the catalog entry's choice, else
        ``rgb_array`` when the env offers it (so Render and monitor videos work without
        re-making the env; frames are only drawn when asked for)."""
        if "render_mode" in self.kwargs:
            return self.kwargs["render_mode"]  # type: ignore[no-any-return]
        return "rgb_array" if "rgb_array" in self.metadata().get("render_modes", ()) else None

    def make(self, **overrides: Any) -> gymnasium.Env[Any, Any]:
        """Construct the env, with ``overrides`` over the spec's constructor arguments (both
        handed to the env's own code as they are).

        Raises:
            ConfigError: the entry point cannot be imported or does not make an env.
            EnvError: the env's constructor raised.
        """
        kwargs = {**self.kwargs, **overrides}
        if self.openenv is not None:
            raise ConfigError(
                f"{self.id} is an OpenEnv env: envwire's runtime hosts it "
                "(envwire.kinds.openenv_core.gymenv), not EnvSpec.make"
            )
        if self.entry_point.startswith("gym:"):
            try:
                return gymnasium.make(self.entry_point[4:], **kwargs)
            except gymnasium.error.Error as exc:
                raise ConfigError(f"{self.id}: gymnasium.make failed: {exc}") from exc
            except Exception as exc:
                raise EnvError(f"{self.id}: making the env raised {_describe(exc)}") from exc
        factory = self._factory()  # gym: ids were made above
        view = {}  # a dm_env env's rendering settings are its Gymnasium form's
        if self.entry_point.startswith(DM_CONTROL) or (
            isinstance(factory, type) and issubclass(factory, dm_env.Environment)
        ):
            view = {key: kwargs.pop(key) for key in _DM_VIEW if key in kwargs}
        try:
            made = factory(**kwargs)
        except Exception as exc:
            raise EnvError(f"{self.id}: making the env raised {_describe(exc)}") from exc
        if isinstance(made, gymnasium.Env):
            env: gymnasium.Env[Any, Any] = made
        elif isinstance(made, dm_env.Environment):
            env = DmEnvGym(made, **view)
        else:
            if not is_typed_env(made):
                raise ConfigError(
                    f"{self.id}: entry point {self.entry_point} returned "
                    f"{type(made).__name__}, expected a gymnasium.Env, a dm_env.Environment or "
                    "a typed env"
                )
            env = as_gymnasium(made)  # a typed (OpenEnv-style) env, hosted like any other
        if self.max_episode_steps is not None:
            return gymnasium.wrappers.TimeLimit(env, self.max_episode_steps)
        return env


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def load_entry_point(entry_point: str) -> Callable[..., Any]:
    """Import ``module:attr`` (attr may be dotted).

    Raises:
        ConfigError: malformed, not importable, or not callable.
    """
    target = import_attr(entry_point, f"entry point {entry_point!r}")
    if not callable(target):
        raise ConfigError(f"entry point {entry_point!r} is not callable")
    return target


def parse_env_arg(arg: str) -> EnvSpec:
    """Parse one ``envwire serve`` env argument.

    Forms: ``CartPole-v1`` (a Gymnasium or built-in id), ``pkg.mod:Class`` (served under that
    string), ``my/Env-v0=pkg.mod:Class`` (served under ``my/Env-v0``), ``path/to/env_dir`` or
    ``my/Env-v0=path/to/env_dir`` (an OpenEnv env directory with an ``openenv.yaml``
    manifest, served under its manifest name or the given id); any of them may end in
    ``@inline``, ``@process``, ``@pool`` or ``@ray`` to choose where the env runs.

    Raises:
        ConfigError: the id is unknown to Gymnasium and is not an entry point.
    """
    text, _, isolation = arg.partition("@")
    if isolation not in ("", "inline", "process", "pool", "ray", "auto"):
        raise ConfigError(
            f"{arg!r}: isolation must be 'inline', 'process', 'pool', 'ray' or 'auto'"
        )
    iso: Isolation = isolation or "auto"  # type: ignore[assignment]
    env_id, eq, target = text.partition("=")
    directory = target if eq else text
    if os.path.isfile(os.path.join(directory, "openenv.yaml")):
        return _manifest_spec(env_id if eq else None, directory, iso)
    if os.sep in directory and os.path.isdir(directory):
        raise ConfigError(
            f"{directory!r} is a directory without an openenv.yaml manifest: name its app "
            "module instead (pkg.server.app:app, with the directory's parent on PYTHONPATH)"
        )
    if eq:
        if ":" not in target and not target.startswith(DM_CONTROL):
            _check_gym_id(arg, target, dotted_only=True)
        entry = target if ":" in target or target.startswith(DM_CONTROL) else f"gym:{target}"
        if entry.startswith(DM_CONTROL):
            _check_dm_control(entry)
        return EnvSpec(env_id, entry, isolation=iso)
    if ":" in text:
        return EnvSpec(text, text, isolation=iso)
    if text.startswith(DM_CONTROL):
        _check_dm_control(text)
        return EnvSpec(text, text, isolation=iso)
    _check_gym_id(arg, text)
    return EnvSpec(text, f"gym:{text}", isolation=iso)


def _check_gym_id(arg: str, name: str, *, dotted_only: bool = False) -> None:
    """Refuse ``name`` (from the argument ``arg``) unless Gymnasium knows it; a dotted name
    (``mypkg.envs.MyEnv``) is most likely a class written with a dot for the colon. With
    ``dotted_only``, only a dotted name is refused (the others are left to
    :func:`load_errors`, which ``--allow-unavailable`` may pass over).

    Raises:
        ConfigError: the id is unknown, with the ``module:Class`` form or a did-you-mean.
    """
    if name in gymnasium.registry:
        return
    module, dot, attr = name.rpartition(".")
    if dot and module and attr.isidentifier() and "/" not in module:
        fixed = arg.replace(name, f"{module}:{attr}", 1)
        raise ConfigError(
            f"unknown env id {name!r}: Gymnasium has no such id; a class or factory is named "
            f"module:Class ({fixed})"
        )
    if not dotted_only:
        hint = _did_you_mean(name, gymnasium.registry.keys())
        raise ConfigError(f"unknown env id {name!r}{hint}")


def _manifest_spec(env_id: str | None, directory: str, isolation: Isolation) -> EnvSpec:
    manifest = read_manifest(directory)
    settings = {"app": True, "paths": [manifest.path]}
    return EnvSpec(env_id or manifest.name, manifest.app, isolation=isolation, openenv=settings)


def with_openenv(spec: EnvSpec) -> EnvSpec:
    """``spec`` with its OpenEnv settings filled in and checked, when it names an OpenEnv env.

    An OpenEnv env is recognised by loading the entry point (so its module is imported here):
    an app built by openenv-core's ``create_app`` (or its ``HTTPEnvServer``), or a subclass of
    openenv-core's ``Environment``. ``max_sessions`` becomes the env's ``max_concurrent_envs``
    and ``session_timeout`` its app's ``session_timeout``, unless the spec sets them. Entry
    points that cannot be imported are left as they are (making the env reports the error, as
    before).

    Raises:
        ConfigError: an OpenEnv env whose settings are inconsistent.
    """
    if spec.entry_point.startswith(("gym:", DM_CONTROL)):
        return spec
    settings = spec.openenv if spec.openenv is not None else openenv_app.detect(spec.entry_point)
    if settings is None:
        return spec
    target = openenv_app.resolve(settings, spec.entry_point)
    if target.extra_routes:
        log.warning(
            "%s: routes its app module added itself are not served: %s",
            spec.id,
            ", ".join(target.extra_routes),
        )
    limit = spec.max_sessions if spec.max_sessions is not None else target.max_concurrent_envs
    idle = spec.session_timeout if spec.session_timeout is not None else target.session_timeout
    return replace(spec, openenv=settings, max_sessions=limit, session_timeout=idle)


def load_errors(catalog: Mapping[str, EnvSpec]) -> dict[str, str]:
    """Each env of ``catalog`` whose entry point cannot be loaded here, with one line saying
    why: its module cannot be imported (or raised while it was), it has no such name, or the
    extra it needs is missing. Nothing is made; this is what uvicorn checks before it listens.
    """
    errors: dict[str, str] = {}
    for env_id, spec in catalog.items():
        try:
            if spec.entry_point.startswith(DM_CONTROL):
                control.require()
            else:
                spec.target()
        except ConfigError as exc:
            errors[env_id] = str(exc).removeprefix(f"entry point {spec.entry_point!r}: ")
        except Exception as exc:  # the module's own top-level code failed
            errors[env_id] = f"importing it raised {_describe(exc)}"
    return errors


def _check_dm_control(name: str) -> None:
    control.split_name(name)


def _did_you_mean(name: str, candidates: Iterable[str]) -> str:
    matches = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
    if not matches:
        return ""
    return "; did you mean " + " or ".join(repr(m) for m in matches) + "?"


class Catalog(Mapping[str, EnvSpec]):
    """The envs one server serves, by id, in the order they were added."""

    def __init__(self, specs: Iterable[EnvSpec] = ()) -> None:
        self._specs: dict[str, EnvSpec] = {}
        for spec in specs:
            self.add(spec)

    def add(self, spec: EnvSpec) -> None:
        """Add (or replace) an entry."""
        self._specs[spec.id] = spec

    def __getitem__(self, env_id: str) -> EnvSpec:
        return self._specs[env_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def lookup(self, env_id: str) -> EnvSpec:
        """The spec for ``env_id``.

        Raises:
            UnknownEnvError: not served here; the message suggests close ids, and says so when
                Gymnasium knows the id but this server was not started with it. An id longer
                than :data:`MAX_ENV_ID` gets no suggestions, and is never echoed whole.
        """
        try:
            return self._specs[env_id]
        except KeyError:
            pass
        if len(env_id) > MAX_ENV_ID:  # did-you-mean costs memory and time in the id's length
            raise UnknownEnvError(
                f"unknown env {clip(env_id)}: ids served here are at most {MAX_ENV_ID} characters"
            )
        hint = _did_you_mean(env_id, self._specs)
        if not hint and env_id in gymnasium.registry:
            hint = (
                "; Gymnasium knows it, but this server was not started with it "
                f"(envwire serve {env_id})"
            )
        served = ", ".join(list(self._specs)[:12]) + (", ..." if len(self._specs) > 12 else "")
        raise UnknownEnvError(f"unknown env {clip(env_id)}{hint} (served here: {served})")

    def with_overrides(self, **changes: Any) -> Catalog:
        """A copy with ``changes`` (e.g. ``step_timeout=5``) applied to every spec."""
        return Catalog(replace(spec, **changes) for spec in self._specs.values())


def default_catalog() -> Catalog:
    """Gymnasium's classic-control envs and envwire's built-ins."""
    return Catalog(EnvSpec(env_id, f"gym:{env_id}") for env_id in DEFAULT_IDS)
