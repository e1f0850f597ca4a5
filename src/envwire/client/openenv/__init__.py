"""OpenEnv clients: ``envwire.make("ws://host:8000/envs/<id>")`` (or ``wss``, ``http``, ``https``).

URL forms: ``scheme://host:port/envs/<env id>`` (an env of an envwire server),
``scheme://host:port`` (the server's first env, or any OpenEnv server), and the shorthand
``scheme://host:port/<env id>`` for ``/envs/<env id>``. ``ws``/``wss`` talk over one WebSocket
(``<base>/ws``); ``http``/``https`` use envwire's stateful HTTP sessions.

:func:`open_url` returns a :class:`GymTransport` for a Gymnasium env (``envwire.make`` wraps it in a
``gymnasium.Env``), and a :class:`TypedClient` for a typed env or a server that is not envwire.
Errors the server reports are raised as the envwire error class its code names.

``token`` and ``ca`` (default: ``ENVWIRE_TOKEN`` and ``ENVWIRE_CA``) authenticate to a server
that requires a token (``Authorization: Bearer``, on every request and on the WebSocket
upgrade) and verify a ``wss``/``https`` server's certificate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from envwire import messages as m
from envwire import spacecodec
from envwire.client.credentials import Credentials
from envwire.client.openenv.connection import (
    Connection,
    HttpConnection,
    WebSocketConnection,
    base_url,
    rpc_result,
)
from envwire.errors import InvalidArgumentError, ProtocolError, UnsupportedError
from envwire.jsonio import JsonValue

__all__ = [
    "Connection",
    "GymTransport",
    "HttpConnection",
    "StepResult",
    "TypedClient",
    "WebSocketConnection",
    "base_url",
    "open_url",
    "rpc_result",
]

ObsT = TypeVar("ObsT")


class GymTransport:
    """envwire messages over an OpenEnv connection to a Gymnasium env (for RemoteEnv)."""

    def __init__(self, connection: Connection, described: Mapping[str, Any]) -> None:
        self.connection = connection
        self.action_space = spacecodec.from_description(described["action_space"])
        self.observation_space = spacecodec.from_description(described["observation_space"])

    def _observation(self, payload: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        body = payload.get("observation")
        if not isinstance(body, Mapping) or "obs" not in body:
            raise ProtocolError(
                f"{self.connection.url}: an observation without 'obs': {str(payload)[:200]}"
            )
        try:
            obs = spacecodec.from_json(self.observation_space, body["obs"])
        except InvalidArgumentError as exc:
            raise ProtocolError(f"{self.connection.url}: bad observation: {exc}") from None
        info = body.get("info") or {}
        return obs, dict(info)

    def _step_reply(self, payload: Mapping[str, Any]) -> m.StepReply:
        obs, info = self._observation(payload)
        body = payload["observation"]
        reward = payload.get("reward")
        return m.StepReply(
            obs,
            0.0 if reward is None else float(reward),
            bool(body.get("terminated")),
            bool(body.get("truncated")),
            info,
        )

    def send(self, request: m.Request) -> None:
        """Send a Step without waiting for it (WebSocket only: replies come back in order).

        Raises:
            UnsupportedError: not a Step, or an HTTP connection (one request at a time).
        """
        if not isinstance(request, m.Step) or not isinstance(self.connection, WebSocketConnection):
            raise UnsupportedError("pipelining over OpenEnv needs a ws:// URL and Step requests")
        encoded = spacecodec.to_json(self.action_space, request.action, arrays="base64")
        self.connection.send("step", {"action": encoded})

    def receive(self) -> m.Reply:
        """The reply to the oldest Step :meth:`send` sent."""
        assert isinstance(self.connection, WebSocketConnection)
        return self._step_reply(self.connection.receive("step"))

    def request(self, request: m.Request) -> m.Reply:
        """Carry out one request remotely."""
        match request:
            case m.Step(action=action):
                encoded = spacecodec.to_json(self.action_space, action, arrays="base64")
                return self._step_reply(self.connection.step({"action": encoded}))
            case m.Reset(seed=seed, options=options):
                data: dict[str, Any] = {} if seed is None else {"seed": seed}
                if options:
                    data["options"] = options
                obs, info = self._observation(self.connection.reset(data))
                return m.ResetReply(obs, info)
            case m.SampleAction():
                return m.SampleReply(
                    spacecodec.from_json(self.action_space, self.connection.sample())
                )
            case m.GetSpace(which=which):
                space = self.action_space if which == m.SpaceKind.ACTION else self.observation_space
                return m.SpaceReply(space)
            case m.Close():
                self.close()
                return m.Ok()
        raise UnsupportedError(f"{type(request).__name__} is not available over OpenEnv")

    def close(self) -> None:
        self.connection.close()


@dataclass
class StepResult(Generic[ObsT]):
    """What ``reset`` and ``step`` of a :class:`TypedClient` return."""

    observation: ObsT
    reward: float | None = None
    done: bool = False


class TypedClient:
    """A typed env (or any OpenEnv server) as plain methods.

    Observations are dicts, or ``observation_type`` instances when given; ``state()`` is a
    dict, or a ``state_type`` instance. Actions may be dicts or pydantic models.
    """

    def __init__(
        self,
        connection: Connection,
        described: Mapping[str, Any] | None = None,
        *,
        observation_type: type[BaseModel] | None = None,
        state_type: type[BaseModel] | None = None,
    ) -> None:
        self.connection = connection
        self.url = connection.url
        described = described or {}
        self.schema: dict[str, Any] = dict(described.get("schema") or {})
        self.metadata: dict[str, Any] = dict(described.get("metadata") or {})
        self.tools: list[dict[str, Any]] = list(described.get("tools") or [])
        self.observation_type = observation_type
        self.state_type = state_type

    def _result(self, payload: Mapping[str, Any]) -> StepResult[Any]:
        fields = payload.get("observation", {})
        reward, done = payload.get("reward"), bool(payload.get("done", False))
        observation: object = fields
        if self.observation_type is not None:
            observation = self.observation_type.model_validate(
                {**fields, "reward": reward, "done": done}
            )
        return StepResult(observation, reward, done)

    def reset(self, **kwargs: JsonValue) -> StepResult[Any]:
        """Start an episode (``seed``, ``episode_id`` and env keywords)."""
        return self._result(self.connection.reset(kwargs))

    def step(self, action: BaseModel | Mapping[str, Any]) -> StepResult[Any]:
        """Take a step."""
        if isinstance(action, BaseModel):
            data = action.model_dump(mode="json", exclude={"metadata"})
        else:
            data = dict(action)
        return self._result(self.connection.step(data))

    def state(self) -> Any:
        """The episode's state."""
        data = self.connection.state()
        return self.state_type.model_validate(data) if self.state_type is not None else data

    def list_tools(self) -> list[dict[str, Any]]:
        """The env's MCP tools (``tools/list``)."""
        result = self.connection.mcp("tools/list")
        tools = result.get("tools") if isinstance(result, dict) else None
        return [t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []

    def call_tool(self, name: str, **arguments: JsonValue) -> JsonValue:
        """Call an MCP tool; returns its result's ``data`` (no step is taken)."""
        result = self.connection.mcp("tools/call", {"name": name, "arguments": arguments})
        if isinstance(result, Mapping) and "data" in result:
            return result["data"]
        return result

    def close(self) -> None:
        """End the session."""
        self.connection.close()

    def __enter__(self) -> TypedClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TypedClient({self.url})"


def open_url(
    url: str,
    *,
    timeout: float = 30.0,
    observation_type: type[BaseModel] | None = None,
    state_type: type[BaseModel] | None = None,
    token: str | None = None,
    ca: str | None = None,
    **kwargs: object,
) -> GymTransport | TypedClient:
    """Open a session with the env at ``url`` (see the module docstring).

    Raises:
        InvalidArgumentError: a malformed URL or unknown keyword.
        TransportError: the server cannot be reached, or its certificate is not trusted.
        UnauthenticatedError: the server wants a token this client does not have.
        EnvwireError: the server refused (UnknownEnvError, CapacityError, ...).
    """
    if kwargs:
        raise InvalidArgumentError(f"unknown keyword arguments: {sorted(kwargs)}")
    scheme, base = base_url(url)
    credentials = Credentials.resolve(token, ca)
    connection: Connection
    if scheme in ("ws", "wss"):
        connection = WebSocketConnection(base, timeout=timeout, credentials=credentials)
    else:
        connection = HttpConnection(base, timeout=timeout, credentials=credentials)
    try:
        described = connection.describe()
    except BaseException:
        connection.close()
        raise
    if described is not None and described.get("kind") == "gymnasium":
        return GymTransport(connection, described)
    return TypedClient(
        connection, described, observation_type=observation_type, state_type=state_type
    )
