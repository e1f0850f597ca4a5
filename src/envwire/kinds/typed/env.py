"""The typed-env base class and MCP tools.

A typed env is an OpenEnv-style environment: ``reset`` and ``step`` return a pydantic
:class:`~envwire.kinds.typed.models.Observation`, ``step`` takes a pydantic
:class:`~envwire.kinds.typed.models.Action`, and ``state`` is a
:class:`~envwire.kinds.typed.models.State`.
Methods decorated with :func:`tool` are offered to agents as MCP tools (``tools/list``,
``tools/call``); a tool call does not count as a step.

envwire hosts a typed env behind the same session machinery as a Gymnasium env (see
:mod:`envwire.kinds.typed.gymenv`): the host validates actions against ``action_type`` and applies
``transform`` to every observation, so an env's own code never does either.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from envwire.errors import InvalidArgumentError
from envwire.kinds.typed.models import Action, EnvMetadata, Observation, State
from envwire.kinds.typed.transforms import Transform

__all__ = ["RESERVED_TOOL_NAMES", "Tool", "TypedEnv", "tool"]

ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)
F = TypeVar("F", bound=Callable[..., Any])

#: Tool names that would shadow the simulation API (OpenEnv reserves the same).
RESERVED_TOOL_NAMES = frozenset({"reset", "step", "state", "close"})

_TOOL_MARK = "__envwire_tool__"


@overload
def tool(function: F) -> F: ...


@overload
def tool(*, name: str | None = None) -> Callable[[F], F]: ...


def tool(function: F | None = None, *, name: str | None = None) -> F | Callable[[F], F]:
    """Mark a method of a :class:`TypedEnv` as an MCP tool.

    The tool's input schema comes from the method's annotated parameters, its description from
    the docstring's first paragraph. Use as ``@tool`` or ``@tool(name="run_code")``.
    """

    def mark(fn: F) -> F:
        setattr(fn, _TOOL_MARK, name or fn.__name__)
        return fn

    return mark(function) if function is not None else mark


@dataclass(frozen=True)
class Tool:
    """One tool an env offers: its name, description, JSON Schema and the bound callable."""

    name: str
    description: str
    input_schema: dict[str, Any]
    arguments: type[BaseModel] = field(repr=False)
    function: Callable[..., Any] = field(repr=False)

    def spec(self) -> dict[str, Any]:
        """The MCP ``tools/list`` entry (``name``, ``description``, ``inputSchema``)."""
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
        }

    def call(self, arguments: dict[str, Any]) -> object:
        """Validate ``arguments`` against the input schema, then call the tool; what the tool
        returned (the host passes it on).

        Raises:
            InvalidArgumentError: the arguments do not fit the schema.
        """
        try:
            parsed = self.arguments.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            raise InvalidArgumentError(f"tool {self.name!r}: {problems}") from None
        return self.function(**{name: getattr(parsed, name) for name in type(parsed).model_fields})

    @classmethod
    def from_method(cls, method: Callable[..., Any], name: str) -> Tool:
        """Build a tool from a bound method's signature and docstring."""
        if name in RESERVED_TOOL_NAMES:
            raise ValueError(f"tool name {name!r} is reserved ({sorted(RESERVED_TOOL_NAMES)})")
        fields: dict[str, Any] = {}
        for param in inspect.signature(method).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            annotation = Any if param.annotation is param.empty else param.annotation
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (annotation, default)
        model = create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        schema = model.model_json_schema()
        schema.pop("title", None)
        doc = inspect.getdoc(method) or name
        return cls(name, doc.split("\n\n")[0].replace("\n", " "), schema, model, method)


class TypedEnv(ABC, Generic[ActT, ObsT, StateT]):
    """Base of envwire's typed envs.

    Subclasses set the class attributes ``action_type``, ``observation_type`` and (if they use
    a State subclass) ``state_type``, and implement :meth:`reset`, :meth:`step` and
    :attr:`state`. Raising :class:`~envwire.errors.InvalidActionError` from ``step`` reports
    an illegal move to the agent without ending the episode.

    Args:
        transform: applied by the host to every observation ``reset`` and ``step`` return.
    """

    action_type: ClassVar[type[Action]]
    observation_type: ClassVar[type[Observation]]
    state_type: ClassVar[type[State]] = State

    def __init__(self, *, transform: Transform[Any] | None = None) -> None:
        self.transform = transform

    # ``**kwargs`` are the client's own keywords, handed to the env's code as they came; typed
    # Any so that a subclass may name the ones it takes with types of its own.

    @abstractmethod
    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> ObsT:
        """Start an episode and return its first observation."""

    @abstractmethod
    def step(self, action: ActT, timeout_s: float | None = None, **kwargs: Any) -> ObsT:
        """Apply a (validated) action and return the observation that follows."""

    @property
    @abstractmethod
    def state(self) -> StateT:
        """The current episode's state."""

    def get_metadata(self) -> EnvMetadata:
        """Name, description and documentation (default: from the class and its docstring)."""
        doc = inspect.getdoc(type(self)) or f"{type(self).__name__} environment"
        return EnvMetadata(
            name=type(self).__name__,
            description=doc.split("\n\n")[0].replace("\n", " "),
            readme_content=doc,
            version="1.0.0",
        )

    def tools(self) -> list[Tool]:
        """The methods marked with :func:`tool`, as :class:`Tool` objects."""
        found: list[Tool] = []
        for attr in dir(type(self)):
            member = getattr(type(self), attr, None)
            name = getattr(member, _TOOL_MARK, None)
            if isinstance(name, str):
                found.append(Tool.from_method(getattr(self, attr), name))
        return found

    def close(self) -> None:
        """Free what the env holds (default: nothing)."""
