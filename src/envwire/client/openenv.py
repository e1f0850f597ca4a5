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

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import quote, urlsplit, urlunsplit

import httpx
from pydantic import BaseModel
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

from envwire import messages as m
from envwire import spacecodec
from envwire.client.credentials import Credentials
from envwire.client.probe import Expecting, Found, diagnose
from envwire.errors import (
    CapacityError,
    EnvwireError,
    InvalidArgumentError,
    ProtocolError,
    RemoteError,
    TransportError,
    UnsupportedError,
    error_class_for_code,
)
from envwire.jsonio import JsonObject, JsonValue
from envwire.protocols.openenv import dumps, parse_server_message

__all__ = [
    "Connection",
    "GymTransport",
    "HttpConnection",
    "StepResult",
    "TypedClient",
    "WebSocketConnection",
    "base_url",
    "open_url",
]

ObsT = TypeVar("ObsT")
#: What the wrong server's answers are told from (8000: the default port of ``--http``).
_EXPECTING = Expecting("OpenEnv", Found.HTTP, 8000)
_SESSION_HEADER = "envwire-session"


def base_url(url: str) -> tuple[str, str]:
    """(scheme, base URL without a trailing slash) for any accepted URL form.

    Raises:
        InvalidArgumentError: not ws, wss, http or https, or no host.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("ws", "wss", "http", "https"):
        raise InvalidArgumentError(f"{url!r} is not a ws://, wss://, http:// or https:// URL")
    if not parts.hostname:
        raise InvalidArgumentError(f"no host in {url!r}")
    path = parts.path.rstrip("/")
    for tail in ("/ws", "/mcp"):
        if path.endswith(tail):
            path = path[: -len(tail)]
    if path and not path.startswith("/envs/"):
        path = "/envs/" + quote(path.lstrip("/"), safe="/:@!$&'()*+,;=-._~")
    return parts.scheme, urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _http_base(base: str) -> str:
    if base.startswith("ws"):
        return "http" + base[2:]
    return base


def _ws_base(base: str) -> str:
    if base.startswith("http"):
        return "ws" + base[4:]
    return base


def _raise(data: Mapping[str, Any], where: str) -> None:
    """Raise the envwire error an error payload describes."""
    text = str(data.get("message") or data.get("detail") or "unknown error")
    code = data.get("envwire_code") or data.get("code")
    openenv_code = data.get("code") or data.get("openenv_code")
    if isinstance(code, str) and code:
        cls = error_class_for_code(code)
        if cls is not RemoteError:
            raise cls(text)
    if openenv_code == "CAPACITY_REACHED":
        raise CapacityError(text)
    raise RemoteError(f"{where}: {text}", remote_code=str(openenv_code) if openenv_code else None)


class Connection(Protocol):
    """One session with an OpenEnv server, over either transport."""

    url: str

    def reset(self, data: dict[str, Any]) -> dict[str, Any]: ...
    def step(self, data: dict[str, Any]) -> dict[str, Any]: ...
    def state(self) -> dict[str, Any]: ...
    def sample(self) -> JsonValue: ...
    def describe(self) -> dict[str, Any] | None: ...
    def mcp(self, method: str, params: JsonObject | None = None) -> JsonValue: ...
    def close(self) -> None: ...


class WebSocketConnection:
    """A session over ``<base>/ws`` (one connection, replies in order).

    Raises (from the constructor):
        TransportError: the server cannot be reached.
    """

    def __init__(
        self,
        base: str,
        *,
        timeout: float = 30.0,
        max_size: int = 100 * 1024 * 1024,
        credentials: Credentials | None = None,
    ) -> None:
        self.url = _ws_base(base)
        self.timeout = timeout
        self._rpc_id = 0
        credentials = credentials or Credentials()
        secure = credentials.ssl_context() if self.url.startswith("wss:") else None
        try:
            connection = ws_connect(
                f"{self.url}/ws",
                compression=None,
                max_size=max_size,
                open_timeout=timeout,
                close_timeout=2,
                additional_headers=credentials.headers(),
                ssl=secure,
            )
            # Entered as a context manager (closed in close()), as websockets >= 17.1 wants.
            self._ws = connection.__enter__()
        except InvalidStatus as exc:  # refused with an HTTP error: raise what its body says
            response = exc.response
            try:
                data = json.loads(response.body or b"")
            except ValueError:
                data = None
            if isinstance(data, dict) and "code" in data:
                _raise(data, f"{self.url}/ws")
            raise TransportError(f"cannot connect to {self.url}/ws: {exc}") from exc
        except Exception as exc:
            found = diagnose(exc, self.url, _EXPECTING, credentials.ca)
            raise TransportError(f"cannot connect to {self.url}/ws: {found or exc}") from exc

    def _call(self, kind: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
        self.send(kind, data)
        return self.receive(kind)

    def send(self, kind: str, data: dict[str, Any] | None = None) -> None:
        """Send one message without waiting (pipelining: replies come back in order)."""
        payload = {"type": kind} if data is None else {"type": kind, "data": data}
        # If the send fails, an error the server sent before closing may still be waiting.
        with contextlib.suppress(ConnectionClosed):
            self._ws.send(dumps(payload))

    def receive(self, kind: str) -> dict[str, Any]:
        """The reply to the oldest message still unanswered (``kind`` names it in errors)."""
        try:
            text = self._ws.recv(timeout=self.timeout)
        except TimeoutError:
            raise TransportError(
                f"{self.url}: no reply to {kind} within {self.timeout:g} s"
            ) from None
        except ConnectionClosed as exc:
            raise TransportError(f"{self.url}: the connection closed ({exc})") from None
        reply = parse_server_message(text)
        if reply.type == "error":
            _raise(reply.data, self.url)
        return reply.data

    def reset(self, data: dict[str, Any]) -> dict[str, Any]:
        return self._call("reset", data)

    def step(self, data: dict[str, Any]) -> dict[str, Any]:
        return self._call("step", data)

    def state(self) -> dict[str, Any]:
        return self._call("state")

    def sample(self) -> JsonValue:
        action: JsonValue = self._call("sample").get("action")
        return action

    def describe(self) -> dict[str, Any] | None:
        try:
            return self._call("spaces")
        except RemoteError as exc:
            if exc.remote_code == "UNKNOWN_TYPE":  # an OpenEnv server that is not envwire
                return None
            raise

    def mcp(self, method: str, params: JsonObject | None = None) -> JsonValue:
        self._rpc_id += 1
        request = {"jsonrpc": "2.0", "method": method, "params": params or {}, "id": self._rpc_id}
        return _rpc_result(self._call("mcp", request), method)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._ws.send('{"type":"close"}')
        with contextlib.suppress(Exception):
            self._ws.close()


def _rpc_result(response: Mapping[str, JsonValue], method: str) -> JsonValue:
    """The ``result`` of a JSON-RPC response, or the error its ``error`` object describes."""
    error = response.get("error")
    if error:
        details = error if isinstance(error, dict) else {"message": error}
        message, code = details.get("message"), details.get("code")
        raise RemoteError(f"{method}: {message}", remote_code=str(code))
    return response.get("result")


class HttpConnection:
    """A session over envwire's stateful HTTP endpoints (opened with ``POST <base>/session``).

    Raises (from the constructor):
        TransportError: the server cannot be reached. Others: as the server reports them.
    """

    def __init__(
        self, base: str, *, timeout: float = 30.0, credentials: Credentials | None = None
    ) -> None:
        self.url = _http_base(base)
        self.timeout = timeout
        self._rpc_id = 0
        credentials = credentials or Credentials()
        verify = credentials.ssl_context() if self.url.startswith("https:") else True
        self._http = httpx.Client(
            base_url=self.url, timeout=timeout, headers=credentials.headers(), verify=verify
        )
        self.token: str | None = None
        self._described: dict[str, Any] | None = None
        try:
            opened = self._request("POST", "/session")
        except UnsupportedError:
            opened = None
        except TransportError as exc:  # no HTTP answer (RemoteError: one): say what came
            self._http.close()
            remote = isinstance(exc, RemoteError)
            found = None if remote else diagnose(exc, self.url, _EXPECTING, credentials.ca)
            if found is None:
                raise
            raise TransportError(f"{self.url}/session: {found}") from exc
        except BaseException:
            self._http.close()
            raise
        if opened is not None:
            self.token = opened["session_id"]
            self._http.headers[_SESSION_HEADER] = str(self.token)
            self._described = opened.get("describe")

    def _request(self, method: str, path: str, body: object = None) -> dict[str, Any]:
        """The JSON object the server answered (``{}`` for an empty body).

        Raises:
            EnvwireError: the error the server reported (UnsupportedError: no envwire session
                endpoint); ProtocolError: a success reply that is not a JSON object;
                TransportError: no reply.
        """
        try:
            response = self._http.request(
                method,
                path,
                content=None if body is None else dumps(body),
                headers={"content-type": "application/json"},
            )
        except httpx.TimeoutException:
            raise TransportError(f"{self.url}{path}: no reply within {self.timeout:g} s") from None
        except httpx.HTTPError as exc:
            raise TransportError(f"{self.url}{path}: {exc}") from exc
        try:
            data = response.json() if response.content else {}
        except json.JSONDecodeError:
            data = {"detail": response.text[:300]}
        if response.status_code >= 400:
            if not isinstance(data, dict) or not data.keys() & {"message", "detail", "code"}:
                # Not an envwire error (a proxy's, a server of another API): its status says most
                data = {
                    "detail": f"the server answered {response.status_code} "
                    f"{response.reason_phrase} without an envwire error: is this an envwire "
                    f"server's --http port?"
                }
            if response.status_code in (404, 405) and path == "/session" and "code" not in data:
                raise UnsupportedError(f"{self.url} has no envwire session endpoint")
            detail = data.get("detail") if isinstance(data, dict) else None
            if isinstance(detail, list):
                text = "; ".join(
                    f"{'.'.join(map(str, e.get('loc', [])))}: {e.get('msg')}" for e in detail
                )
                data = {"message": text, "code": data.get("code") or "invalid_argument"}
            _raise(data if isinstance(data, dict) else {"detail": str(data)}, f"{self.url}{path}")
        if not isinstance(data, dict):
            raise ProtocolError(f"{self.url}{path}: expected a JSON object, got {str(data)[:200]}")
        return data

    def reset(self, data: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", "/reset", data)

    def step(self, data: dict[str, Any]) -> dict[str, Any]:
        return self._request("POST", "/step", {"action": data})

    def state(self) -> dict[str, Any]:
        return self._request("GET", "/state")

    def sample(self) -> JsonValue:
        action: JsonValue = self._request("POST", "/sample").get("action")
        return action

    def describe(self) -> dict[str, Any] | None:
        return self._described

    def mcp(self, method: str, params: JsonObject | None = None) -> JsonValue:
        self._rpc_id += 1
        request = {"jsonrpc": "2.0", "method": method, "params": params or {}, "id": self._rpc_id}
        return _rpc_result(self._request("POST", "/mcp", request), method)

    def close(self) -> None:
        try:
            if self.token is not None:
                self._request("DELETE", "/session")
        except EnvwireError:
            pass
        finally:
            self.token = None
            self._http.close()


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
