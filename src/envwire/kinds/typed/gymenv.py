"""Typed envs behind envwire's one session model.

:class:`TypedGymEnv` presents a typed env as a ``gymnasium.Env`` so that it lives in the same
workers and sessions as every other env: its action and observation spaces are
:class:`ModelSpace` objects (membership = an instance of the pydantic model), ``reset`` and
``step`` return the observation model itself, ``terminated`` is its ``done``, and the gym-level
reward is its ``reward`` (0.0 when None). Front ends recognise a typed env by its
:class:`ModelSpace` action space and put the model's own fields on the wire.

Out-of-band operations (the state, MCP tools) go through :meth:`TypedGymEnv.extension`, which
the env host forwards.

Foreign typed envs are accepted too: any object with ``reset``, ``step`` and ``state`` whose
action/observation/state models are class attributes (``action_type``, ...) or the type
arguments of a generic base (as openenv-core's ``Environment[Act, Obs, State]`` subclasses
have). Those apply their transforms themselves.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeGuard

import gymnasium
from pydantic import BaseModel, ValidationError

from envwire.errors import (
    ConfigError,
    EnvError,
    InvalidActionError,
    InvalidArgumentError,
)
from envwire.kinds.typed.env import Tool, TypedEnv
from envwire.kinds.typed.models import EnvMetadata, State
from envwire.spacecodec.modelspace import ModelSpace

__all__ = [
    "TypedEnvLike",
    "TypedGymEnv",
    "about",
    "as_gymnasium",
    "generic_models",
    "is_typed_env",
    "model_types",
    "step_result",
]


class TypedEnvLike(Protocol):
    """What :class:`TypedGymEnv` uses of a typed env (envwire's :class:`TypedEnv`, or a
    foreign one such as openenv-core's ``Environment``): ``reset`` takes the keywords its
    signature names, ``step`` an action model, and both return an observation model."""

    @property
    def reset(self) -> Callable[..., object]:
        """Start an episode."""
        ...

    @property
    def step(self) -> Callable[..., object]:
        """Take one step."""
        ...

    @property
    def state(self) -> object:
        """The episode's state (a model, or a mapping of its fields)."""
        ...


def _is_model(value: object) -> TypeGuard[type[BaseModel]]:
    return isinstance(value, type) and issubclass(value, BaseModel)


def generic_models(cls: type) -> tuple[type[BaseModel], ...] | None:
    """The model type arguments of the first generic base that has three of them."""
    for klass in cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            args = typing.get_args(base)
            if len(args) == 3 and all(_is_model(a) for a in args):
                return args
    return None


def model_types(env: object) -> tuple[type[BaseModel], type[BaseModel], type[BaseModel]]:
    """(action, observation, state) models of a typed env.

    Raises:
        ConfigError: they cannot be found.
    """
    cls = type(env)
    declared = [
        getattr(cls, name, None) for name in ("action_type", "observation_type", "state_type")
    ]
    generic = generic_models(cls)
    if generic is not None:
        declared = [d if _is_model(d) else g for d, g in zip(declared, generic, strict=True)]
    if declared[2] is None or not _is_model(declared[2]):
        declared[2] = State
    if not (_is_model(declared[0]) and _is_model(declared[1])):
        raise ConfigError(
            f"{cls.__name__} is not a typed env: set action_type and observation_type "
            "(pydantic models) or subclass a generic base such as TypedEnv[Act, Obs, State]"
        )
    return declared[0], declared[1], declared[2]  # type: ignore[return-value]


def is_typed_env(obj: object) -> TypeGuard[TypedEnvLike]:
    """True for objects :func:`as_gymnasium` can host."""
    if isinstance(obj, gymnasium.Env) or not all(
        callable(getattr(obj, name, None)) for name in ("reset", "step")
    ):
        return False
    try:
        model_types(obj)
    except ConfigError:
        return False
    return True


def _accepted(function: Callable[..., Any]) -> tuple[frozenset[str], bool]:
    params = inspect.signature(function).parameters.values()
    names = frozenset(p.name for p in params if p.kind is not p.VAR_POSITIONAL)
    return names, any(p.kind is p.VAR_KEYWORD for p in params)


def _filtered(names: frozenset[str], any_name: bool, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if any_name or k in names}


def about(env: object) -> EnvMetadata:
    """What ``/metadata`` says of an env: its ``get_metadata()``, else its class name."""
    getter = getattr(env, "get_metadata", None)
    raw = getter() if callable(getter) else None
    if isinstance(raw, EnvMetadata):
        return raw
    if isinstance(raw, BaseModel):
        raw = raw.model_dump()
    if isinstance(raw, Mapping):
        try:
            return EnvMetadata.model_validate(
                {k: v for k, v in raw.items() if k in EnvMetadata.model_fields}
            )
        except ValidationError:
            pass
    return EnvMetadata(name=type(env).__name__, description=f"{type(env).__name__} environment")


class TypedGymEnv(gymnasium.Env[Any, Any]):
    """A typed env as a ``gymnasium.Env`` (see the module docstring).

    Raises (from the constructor):
        ConfigError: the object is not a typed env.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, env: TypedEnvLike) -> None:
        self.typed = env
        self.action_type, self.observation_type, self.state_type = model_types(env)
        self._tools: dict[str, Tool] = (
            {t.name: t for t in env.tools()} if isinstance(env, TypedEnv) else {}
        )
        self.action_space = ModelSpace(
            self.action_type, tools=tuple(t.spec() for t in self._tools.values())
        )
        self.observation_space = ModelSpace(
            self.observation_type, state_model=self.state_type, about=about(env)
        )
        self._reset_params = _accepted(env.reset)
        # Our own base leaves transforms to the host; foreign envs apply theirs themselves.
        self._transform = env.transform if isinstance(env, TypedEnv) else None

    def _checked(self, observation: object, method: str) -> BaseModel:
        if self._transform is not None:
            observation = self._transform(observation)
        if not isinstance(observation, self.observation_type):
            raise EnvError(
                f"{type(self.typed).__name__}.{method} returned {type(observation).__name__}, "
                f"expected {self.observation_type.__name__}"
            )
        return observation

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset; ``options`` carries ``episode_id`` and any other keyword the env accepts."""
        super().reset(seed=seed)
        kwargs = _filtered(*self._reset_params, {"seed": seed, **(options or {})})
        return self._checked(self.typed.reset(**kwargs), "reset"), {}

    def step(self, action: object) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step with an action model (a mapping is validated into one first)."""
        if not isinstance(action, self.action_type):
            try:
                action = self.action_type.model_validate(action)
            except ValidationError as exc:
                raise InvalidActionError(
                    f"invalid {self.action_type.__name__}: {_summary(exc)}"
                ) from None
        return step_result(self._checked(self.typed.step(action), "step"))

    def extension(self, name: str, *args: object) -> object:
        """Out-of-band operations: ``state``, ``call_tool(name, arguments)``.

        Raises:
            InvalidArgumentError: unknown operation or tool, or bad tool arguments.
        """
        match name, args:
            case "state", ():
                state = self.typed.state
                return state if isinstance(state, BaseModel) else State.model_validate(state)
            case "call_tool", (str() as tool_name, dict() as arguments):
                found = self._tools.get(tool_name)
                if found is None:
                    known = ", ".join(self._tools) or "none"
                    raise InvalidArgumentError(f"unknown tool {tool_name!r} (tools: {known})")
                return found.call(arguments)
        raise InvalidArgumentError(f"unknown typed-env operation {name!r}")

    def close(self) -> None:
        closer = getattr(self.typed, "close", None)
        if callable(closer):
            closer()


def step_result(observation: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
    """A typed observation as Gymnasium's step tuple: its reward (None counts 0), ``done`` as
    terminated, never truncated, no info.

    ``observation`` is a pydantic model of the env's own class, which has ``reward`` and
    ``done`` fields (OpenEnv's convention; its class is only known at run time).
    """
    reward = observation.reward
    return observation, 0.0 if reward is None else float(reward), bool(observation.done), False, {}


def _summary(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'action'}: {e['msg']}" for e in exc.errors()
    )


def as_gymnasium(env: object) -> TypedGymEnv:
    """Host a typed env as a ``gymnasium.Env``.

    Raises:
        ConfigError: ``env`` is not a typed env.
    """
    if not is_typed_env(env):
        raise ConfigError(
            f"{type(env).__name__} is neither a gymnasium.Env nor a typed env (reset, step and "
            "state, with pydantic action/observation models)"
        )
    return TypedGymEnv(env)
