"""How one env's values look on the OpenEnv wire: typed envs and Gymnasium envs.

A :class:`Binding` is made once per env id from a session's spaces and is shared by every
session of that env. It turns wire JSON into native requests (validating actions) and replies
into wire JSON:

- a typed env (its action space is a :class:`~envwire.kinds.typed.ModelSpace`): the action is the
  model's fields, validated by pydantic; the observation is the model's own fields, with
  ``reward`` and ``done`` beside it; ``/schema`` gives the models' JSON Schemas.
- a Gymnasium env: the action is ``{"action": <sample>}``; the observation is ``{"obs":
  <sample>, "terminated", "truncated", "info"}`` with ``reward`` and ``done`` beside it. Samples
  are JSON as :func:`envwire.spacecodec.to_json` writes them; numeric arrays travel as
  ``{"__ndarray__": base64, "dtype", "shape"}`` objects (server option ``openenv_arrays =
  "list"`` sends nested lists instead); both forms are accepted in actions.
"""

from __future__ import annotations

import math
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Literal

import gymnasium
from pydantic import BaseModel, ValidationError

from envwire import messages as m
from envwire import spacecodec
from envwire.errors import EnvError, EnvwireError, InvalidArgumentError
from envwire.jsonio import JsonValue
from envwire.kinds.typed.models import EnvMetadata, State, wire_json
from envwire.protocols.openenv import (
    ResetRequest,
    dumps,
    jsonable,
    step_result,
    validation_detail,
)
from envwire.spacecodec.modelspace import ModelSpace

__all__ = ["ActionRejected", "Arrays", "Binding", "GymBinding", "TypedBinding"]

Arrays = Literal["list", "base64"]


class ActionRejected(InvalidArgumentError):
    """A request's data failed validation; ``detail`` is the 422 list (``errors`` on WS)."""

    def __init__(self, message: str, detail: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.detail = detail


def _summary(detail: list[dict[str, Any]]) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in detail)


def reset_arguments(data: dict[str, Any], prefix: tuple[str, ...]) -> ResetRequest:
    """Validate reset keywords (``seed`` >= 0, ``episode_id`` a string, extras allowed).

    Raises:
        ActionRejected: with the error list, ``loc`` prefixed with ``prefix``.
    """
    try:
        return ResetRequest.model_validate(data)
    except ValidationError as exc:
        detail = validation_detail(exc, prefix, include_url=False)
        raise ActionRejected(f"invalid reset arguments: {_summary(detail)}", detail) from None


class Binding(ABC):
    """One env's wire forms (see the module docstring)."""

    kind: str

    def __init__(
        self,
        env_id: str,
        action_space: gymnasium.Space[Any],
        observation_space: gymnasium.Space[Any],
    ) -> None:
        self.env_id = env_id
        self.action_space = action_space
        self.observation_space = observation_space

    @abstractmethod
    def reset(self, args: ResetRequest) -> tuple[m.Reset, str | None]:
        """The Reset request and the episode id the client asked for (if any)."""

    @abstractmethod
    def action(self, data: dict[str, Any], prefix: tuple[str, ...] = ()) -> object:
        """The native action for a step's data (a sample of the action space).

        Raises:
            ActionRejected: the data does not describe an action.
        """

    @abstractmethod
    def result(self, reply: m.ResetReply | m.StepReply, http: bool = False) -> str:
        """The ``{"observation", "reward", "done"}`` payload of a reply, as JSON text (for an
        HTTP response when ``http``)."""

    @abstractmethod
    def schema(self) -> dict[str, Any]:
        """``/schema``: JSON Schemas of action, observation and state."""

    @abstractmethod
    def metadata(self) -> dict[str, Any]:
        """``/metadata``: name, description, readme, version, author, documentation url."""

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """The envwire ``spaces`` extension: what a client needs to decode this env."""

    def tools(self) -> list[dict[str, Any]]:
        """MCP tool specs (none for Gymnasium envs)."""
        return []

    #: True for OpenEnv's own envs, whose MCP requests and state the env itself answers.
    native = False
    #: True for an OpenEnv app built in openenv-core's production mode (no HTTP reset, step,
    #: state).
    production = False

    def step_call(self, action: object, kwargs: Mapping[str, Any]) -> object:
        """The step request for an action (one :meth:`action` made) and the HTTP ``/step``
        body's other keys (which only OpenEnv's own envs receive); without such keys, the
        action itself (callers may skip the call then)."""
        return action

    def sample(self, action: object) -> JsonValue:
        """A sampled action as wire JSON."""
        raise InvalidArgumentError(f"{self.env_id}: actions cannot be sampled")


class TypedBinding(Binding):
    """A typed env: pydantic models on the wire."""

    kind = "typed"

    def __init__(
        self, env_id: str, action_space: ModelSpace, observation_space: ModelSpace
    ) -> None:
        super().__init__(env_id, action_space, observation_space)
        self.action_model = action_space.model
        # The model's validator itself, without model_validate's frame (the step's hot path).
        self._validate = self.action_model.__pydantic_validator__.validate_python
        self.observation_model = observation_space.model
        self.state_model = observation_space.state_model or State
        self.about = observation_space.about or EnvMetadata(name=env_id, description=env_id)
        self._tools = [dict(spec) for spec in action_space.tools]

    def reset(self, args: ResetRequest) -> tuple[m.Reset, str | None]:
        options = args.model_dump(exclude_unset=True, exclude={"seed"})
        return m.Reset(seed=args.seed, options=options), args.episode_id

    def action(self, data: dict[str, Any], prefix: tuple[str, ...] = ()) -> BaseModel:
        try:
            action: BaseModel = self._validate(data)
        except ValidationError as exc:
            detail = validation_detail(exc, prefix)
            name = self.action_model.__name__
            raise ActionRejected(f"invalid {name}: {_summary(detail)}", detail) from None
        return action

    def result(self, reply: m.ResetReply | m.StepReply, http: bool = False) -> str:
        observation = reply.observation
        assert isinstance(observation, BaseModel)  # a typed env's observations are its model's
        reward = getattr(observation, "reward", None)
        if http and reward is not None:  # openenv-core's HTTP responses declare a float reward
            reward = float(reward)
        reward = _scalar(reward)
        done = "true" if getattr(observation, "done", False) else "false"
        # pydantic writes the fields' JSON in one pass; the envelope is three fixed keys.
        return f'{{"observation":{wire_json(observation)},"reward":{reward},"done":{done}}}'

    def schema(self) -> dict[str, Any]:
        return {
            "action": self.action_model.model_json_schema(),
            "observation": self.observation_model.model_json_schema(),
            "state": self.state_model.model_json_schema(),
        }

    def metadata(self) -> dict[str, Any]:
        return self.about.model_dump()

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "env_id": self.env_id,
            "schema": self.schema(),
            "metadata": self.metadata(),
            "tools": self._tools,
        }

    def tools(self) -> list[dict[str, Any]]:
        return self._tools


class GymBinding(Binding):
    """A Gymnasium env: spacecodec samples on the wire."""

    kind = "gymnasium"

    def __init__(
        self,
        env_id: str,
        action_space: gymnasium.Space[Any],
        observation_space: gymnasium.Space[Any],
        arrays: Arrays = "base64",
    ) -> None:
        super().__init__(env_id, action_space, observation_space)
        self.arrays: Arrays = arrays

    def reset(self, args: ResetRequest) -> tuple[m.Reset, str | None]:
        extra = args.model_extra or {}
        options = extra.get("options")
        if options is not None and not isinstance(options, dict):
            detail = [
                {
                    "type": "dict_type",
                    "loc": ["options"],
                    "msg": "Input should be a valid dictionary",
                    "input": options,
                }
            ]
            raise ActionRejected("invalid reset arguments: options must be an object", detail)
        return m.Reset(seed=args.seed, options=options), args.episode_id or str(uuid.uuid4())

    def action(self, data: dict[str, Any], prefix: tuple[str, ...] = ()) -> object:
        unknown = sorted(set(data) - {"action", "metadata"})
        if "action" not in data or unknown:
            detail = (
                [
                    {
                        "type": "missing",
                        "loc": [*prefix, "action"],
                        "msg": "Field required",
                        "input": data,
                    }
                ]
                if "action" not in data
                else []
            )
            detail += [
                {
                    "type": "extra_forbidden",
                    "loc": [*prefix, key],
                    "msg": "Extra inputs are not permitted",
                    "input": data[key],
                }
                for key in unknown
            ]
            raise ActionRejected(
                f'a Gymnasium action is {{"action": <sample of {self.action_space}>}}', detail
            )
        value = data["action"]
        try:
            return spacecodec.from_json(self.action_space, value)
        except InvalidArgumentError as exc:
            detail = [
                {"type": "value_error", "loc": [*prefix, "action"], "msg": str(exc), "input": value}
            ]
            raise ActionRejected(f"action: {exc}", detail) from None

    def _obs(self, observation: object) -> JsonValue:
        try:
            return spacecodec.to_json(self.observation_space, observation, arrays=self.arrays)
        except EnvwireError as exc:
            raise EnvError(
                f"{self.env_id}: the observation does not fit the observation space: {exc}"
            ) from None

    def result(self, reply: m.ResetReply | m.StepReply, http: bool = False) -> str:
        info = jsonable(reply.info, self.arrays)
        obs = self._obs(reply.observation)
        if isinstance(reply, m.StepReply):
            body = {"obs": obs, "terminated": reply.terminated, "truncated": reply.truncated}
            body["info"] = info
            return dumps(step_result(body, reply.reward, reply.terminated or reply.truncated))
        body = {"obs": obs, "terminated": False, "truncated": False, "info": info}
        return dumps(step_result(body, None, False))

    def schema(self) -> dict[str, Any]:
        action = {
            "title": "Action",
            "type": "object",
            "properties": {"action": _space_schema(self.action_space)},
            "required": ["action"],
            "additionalProperties": False,
            "x-envwire-space": spacecodec.describe(self.action_space),
        }
        observation = {
            "title": "Observation",
            "type": "object",
            "properties": {
                "obs": _space_schema(self.observation_space),
                "terminated": {"type": "boolean"},
                "truncated": {"type": "boolean"},
                "info": {"type": "object"},
            },
            "x-envwire-space": spacecodec.describe(self.observation_space),
        }
        return {"action": action, "observation": observation, "state": State.model_json_schema()}

    def metadata(self) -> dict[str, Any]:
        readme = None
        try:
            entry = gymnasium.spec(self.env_id).entry_point
            readme = f"Gymnasium env {self.env_id} ({entry})"
        except gymnasium.error.Error:
            pass
        return EnvMetadata(
            name=self.env_id,
            description=(
                f"Gymnasium env {self.env_id}: action space {self.action_space}, "
                f"observation space {self.observation_space}"
            ),
            readme_content=readme,
            version=None,
        ).model_dump()

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "env_id": self.env_id,
            "action_space": spacecodec.describe(self.action_space),
            "observation_space": spacecodec.describe(self.observation_space),
            "arrays": self.arrays,
        }

    def sample(self, action: object) -> JsonValue:
        return spacecodec.to_json(self.action_space, action, arrays=self.arrays)


_ARRAY_SCHEMA = {
    "anyOf": [
        {"type": "array", "description": "nested lists of numbers"},
        {
            "type": "object",
            "properties": {
                "__ndarray__": {"type": "string", "contentEncoding": "base64"},
                "dtype": {"type": "string"},
                "shape": {"type": "array", "items": {"type": "integer"}},
            },
            "required": ["__ndarray__", "dtype", "shape"],
        },
    ]
}


def _space_schema(space: gymnasium.Space[Any]) -> dict[str, Any]:
    """A JSON Schema for the JSON form of ``space``'s samples (the spacecodec forms)."""
    spaces = gymnasium.spaces
    if isinstance(space, spaces.Discrete):
        start = int(space.start)
        return {"type": "integer", "minimum": start, "maximum": start + int(space.n) - 1}
    if isinstance(space, spaces.Box | spaces.MultiBinary | spaces.MultiDiscrete):
        return {**_ARRAY_SCHEMA, "description": repr(space)}
    if isinstance(space, spaces.Text):
        return {"type": "string", "minLength": space.min_length, "maxLength": space.max_length}
    if isinstance(space, spaces.Dict):
        return {
            "type": "object",
            "properties": {str(k): _space_schema(v) for k, v in space.spaces.items()},
            "required": [str(k) for k in space.spaces],
        }
    if isinstance(space, spaces.Tuple):
        return {
            "type": "array",
            "prefixItems": [_space_schema(s) for s in space.spaces],
            "minItems": len(space.spaces),
            "maxItems": len(space.spaces),
        }
    return {"description": repr(space)}


def _scalar(value: object) -> str:
    """A reward as JSON text, without the json module's per-call overhead."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if type(value) is float and math.isfinite(value):
        return repr(value)
    if type(value) is int:
        return str(value)
    return dumps(value)
