"""OpenEnv's own envs (openenv-core ``Environment`` subclasses) behind envwire's workers.

:class:`OpenEnvGymEnv` hosts one env instance the way openenv-core's server does, so that it
answers what it answers there:

- the env is made by its factory without arguments; reset and step keywords are filtered by
  the signature of the method that receives them;
- ``reset_async`` / ``step_async``, when a class overrides them (every ``MCPEnvironment``
  does), run on an event loop of the env's own (a thread per env, started on first use), as
  openenv-core awaits them; other calls run in the calling thread, or on one shared thread
  for classes that set ``REQUIRES_SINGLE_THREAD_EXECUTOR``;
- an env with an ``mcp_session()`` keeps its MCP client session open for its whole life, as
  openenv-core holds it for a WebSocket session;
- any Observation the env returns is accepted (openenv-core does not check the type);
- MCP ``tools/list`` and ``tools/call`` go to the env's MCP client (or its FastMCP server),
  and their results are turned into JSON the way openenv-core turns them.

The session sees a ``gymnasium.Env`` whose spaces are :class:`OpenEnvSpace` objects; the
OpenEnv front end recognises them and puts the env's own models on the wire.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, Protocol, TypedDict, TypeVar

import gymnasium
from pydantic import BaseModel

from envwire.errors import EnvError, InvalidArgumentError, UnsupportedError
from envwire.jsonio import JsonObject, JsonValue
from envwire.kinds.openenv_core.appmodule import OpenEnvTarget, StepCall
from envwire.kinds.typed.gymenv import about, step_result
from envwire.spacecodec.modelspace import ModelSpace

__all__ = [
    "McpAnswer",
    "McpClient",
    "McpError",
    "OpenEnvGymEnv",
    "OpenEnvSpace",
    "RpcFailure",
    "ServerTool",
    "openenv_jsonable",
]

T = TypeVar("T")
P = ParamSpec("P")

# JSON-RPC codes openenv-core answers with (the numbers are JSON-RPC 2.0's).
_INVALID_PARAMS = -32602
_INTERNAL_ERROR = -32603


class OpenEnvSpace(ModelSpace):
    """A space of an OpenEnv env's models: the action space holds any action the env may be
    given (its Action model, or openenv-core's MCP actions for MCP envs).

    Attributes:
        production: (action spaces) the app was built in openenv-core's production mode.
    """

    def __init__(
        self,
        model: type[BaseModel],
        *,
        production: bool = False,
        state_model: type[BaseModel] | None = None,
        about: BaseModel | None = None,
        tools: tuple[dict[str, Any], ...] = (),
    ) -> None:
        super().__init__(model, state_model=state_model, about=about, tools=tools)
        self.production = production

    def contains(self, x: object) -> bool:
        if isinstance(x, StepCall):
            x = x.action
        return isinstance(x, BaseModel)


class McpClient(Protocol):
    """What is used of an env's MCP client (FastMCP's ``Client``, duck-typed): an async
    context manager that lists and calls tools."""

    def list_tools(self) -> Awaitable[list[object]]:
        """The tools the server offers."""
        ...

    def call_tool(self, *, name: str, arguments: object) -> Awaitable[object]:
        """Call tool ``name`` with ``arguments`` (the request's, passed on as they came)."""
        ...

    async def __aenter__(self) -> object:
        """Connect."""
        ...

    async def __aexit__(self, *exc_info: object) -> object:
        """Disconnect."""
        ...


class ServerTool(Protocol):
    """What is used of a tool of an env's FastMCP server (duck-typed)."""

    name: str
    description: str | None

    @property
    def fn(self) -> Callable[..., object]:
        """The function the tool runs."""
        ...


class McpError(TypedDict):
    """A JSON-RPC error of the env's MCP (openenv-core's code and message)."""

    code: int
    message: str


class McpAnswer(TypedDict, total=False):
    """What the ``mcp`` operation answers: the JSON-RPC ``result``, or its ``error``."""

    result: JsonValue
    error: McpError


class RpcFailure(Exception):
    """A JSON-RPC error answer for an MCP request (``code``, ``message``)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def openenv_jsonable(value: object, depth: int = 0) -> JsonValue:
    """A tool result as openenv-core makes it JSON-serialisable: models are dumped, objects
    with attributes (FastMCP's result dataclass) become their attribute dicts, anything else
    unknown becomes its ``str``."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if depth > 64:
        return str(value)
    if isinstance(value, list | tuple):
        return [openenv_jsonable(v, depth + 1) for v in value]
    if isinstance(value, Mapping):
        return {k: openenv_jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) or hasattr(value, "__dict__"):
        return {k: openenv_jsonable(v, depth + 1) for k, v in vars(value).items()}
    return str(value)


def _overrides(env: object, name: str) -> bool:
    """Whether the env's class overrides openenv-core's default ``name`` (``reset_async``,
    ``step_async``), which only calls the synchronous method."""
    method = getattr(type(env), name, None)
    if method is None or not inspect.iscoroutinefunction(method):
        return False
    for klass in type(env).__mro__:
        if name in vars(klass):
            # openenv-core's own default lives in its interfaces module.
            return not klass.__module__.startswith("openenv.core.env_server.interfaces")
    return False  # pragma: no cover


def _accepted(function: Callable[..., Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` the function's signature takes (all of them with ``**kwargs``)."""
    params = inspect.signature(function).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return dict(kwargs)
    return {k: v for k, v in kwargs.items() if k in params}


class _Loop:
    """An event loop in a thread of its own, for one env's coroutines."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        # The caller's own timeout (the worker's watchdog or process timeout) bounds the wait.
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing must not raise
            self.run(self.loop.shutdown_default_executor())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        if not self.thread.is_alive():
            self.loop.close()


_SINGLE_THREADS: dict[type, ThreadPoolExecutor] = {}
_SINGLE_LOCK = threading.Lock()


def _single_thread(cls: type) -> ThreadPoolExecutor:
    """The one thread every instance of ``cls`` is called on (openenv-core's shared
    executor for ``REQUIRES_SINGLE_THREAD_EXECUTOR`` classes)."""
    with _SINGLE_LOCK:
        pool = _SINGLE_THREADS.get(cls)
        if pool is None:
            pool = ThreadPoolExecutor(1, thread_name_prefix=f"envwire-{cls.__name__}")
            _SINGLE_THREADS[cls] = pool
        return pool


class OpenEnvGymEnv(gymnasium.Env[Any, Any]):
    """One OpenEnv env instance as a ``gymnasium.Env`` (see the module docstring).

    Raises (from the constructor):
        EnvError: the factory raised (openenv-core's factory error message).
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, target: OpenEnvTarget, env_id: str = "") -> None:
        self.target = target
        self.env_id = env_id or target.name
        cls = target.env_class
        self._pool = _single_thread(cls) if cls is not None and target.single_thread else None
        self._loop: _Loop | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        try:
            self.env = self._sync(target.factory)
        except Exception as exc:
            raise EnvError(
                f"Environment factory '{target.name}' failed to create instance: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        self._async_reset = _overrides(self.env, "reset_async")
        self._async_step = _overrides(self.env, "step_async")
        if callable(getattr(self.env, "mcp_session", None)):
            self._stack = contextlib.AsyncExitStack()
            self._run(self._stack.enter_async_context(self.env.mcp_session()))
        from openenv.core.env_server.types import State  # the /schema openenv-core gives

        self.action_space = OpenEnvSpace(target.action, production=target.production)
        self.observation_space = OpenEnvSpace(
            target.observation, state_model=State, about=about(self.env)
        )

    # -- where calls run ------------------------------------------------------------------

    def _sync(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        if self._pool is None:
            return function(*args, **kwargs)
        return self._pool.submit(function, *args, **kwargs).result()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            self._loop = _Loop(f"envwire-loop[{self.env_id}]")
        return self._loop.run(coroutine)

    # -- the gymnasium API ----------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset with the keywords the client sent (``options``; ``seed`` if given)."""
        kwargs = dict(options or {})
        if seed is not None:
            kwargs["seed"] = seed
        if self._async_reset:
            observation = self._run(self.env.reset_async(**_accepted(self.env.reset_async, kwargs)))
        else:
            observation = self._sync(self.env.reset, **_accepted(self.env.reset, kwargs))
        return self._checked(observation, "reset"), {}

    def step(self, action: object) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """Step with an action model (or a :class:`StepCall` carrying step keywords)."""
        kwargs: dict[str, Any] = {}
        if isinstance(action, StepCall):
            kwargs = dict(action.kwargs)
            action = action.action
        if self._async_step:
            kwargs = _accepted(self.env.step_async, kwargs)
            observation = self._run(self.env.step_async(action, **kwargs))
        else:
            kwargs = _accepted(self.env.step, kwargs)
            observation = self._sync(self.env.step, action, **kwargs)
        return step_result(self._checked(observation, "step"))

    def _checked(self, observation: object, method: str) -> BaseModel:
        if not isinstance(observation, BaseModel) or not hasattr(observation, "done"):
            raise EnvError(
                f"{type(self.env).__name__}.{method} returned {type(observation).__name__}, "
                "expected an Observation"
            )
        return observation

    def extension(self, name: str, *args: object) -> JsonObject | McpAnswer:
        """Out-of-band operations: ``state`` (the state as JSON data), ``mcp(method, params)``
        (an :class:`McpAnswer`: the JSON-RPC result, or the error of an :class:`RpcFailure`).

        Raises:
            InvalidArgumentError: an unknown operation.
        """
        match name, args:
            case "state", ():
                state = self._sync(getattr, self.env, "state")
                if hasattr(state, "model_dump"):
                    dumped: JsonObject = state.model_dump(mode="json")
                    return dumped
                return dict(state) if state else {}
            case "mcp", (str() as method, dict() as params):
                try:
                    return {"result": self._mcp(method, params)}
                except RpcFailure as exc:
                    return {"error": {"code": exc.code, "message": exc.message}}
        raise InvalidArgumentError(f"unknown OpenEnv operation {name!r}")

    # -- MCP ------------------------------------------------------------------------------

    def _mcp(self, method: str, params: dict[str, Any]) -> JsonValue:
        client = getattr(self.env, "mcp_client", None)
        server = getattr(self.env, "mcp_server", None)
        if method not in ("tools/list", "tools/call"):
            raise UnsupportedError(f"MCP method {method} is not the env's")
        if client is None and server is None:
            raise RpcFailure(_INTERNAL_ERROR, "Environment does not support MCP")
        if method == "tools/list":
            if client is not None:
                tools = self._run(self._with_client(client, lambda c: c.list_tools()))
                return {"tools": [openenv_jsonable(t) for t in tools]}
            return {"tools": [_server_tool_spec(t) for t in _server_tools(server).values()]}
        name, arguments = params.get("name"), params.get("arguments", {})
        if not name:
            raise RpcFailure(_INVALID_PARAMS, "Missing 'name' in params")
        try:
            if client is not None:
                result = self._run(
                    self._with_client(client, lambda c: c.call_tool(name=name, arguments=arguments))
                )
            else:
                found = _server_tools(server)
                if name not in found:
                    raise RpcFailure(_INVALID_PARAMS, f"Tool not found: {name}")
                function = found[name].fn
                result = (
                    self._run(function(**arguments))
                    if inspect.iscoroutinefunction(function)
                    else self._sync(function, **arguments)
                )
        except RpcFailure:
            raise
        except Exception as exc:  # the tool (or the MCP client) failed: openenv-core's answer
            raise RpcFailure(_INTERNAL_ERROR, str(exc)) from None
        return openenv_jsonable(result)

    async def _with_client(self, client: McpClient, call: Callable[[McpClient], Awaitable[T]]) -> T:
        connected = getattr(client, "is_connected", None)
        if callable(connected) and connected():
            return await call(client)
        session = getattr(self.env, "mcp_session", None)
        manager = session() if callable(session) else client
        async with manager:
            return await call(client)

    def close(self) -> None:
        """Leave the MCP session, close the env, stop the loop (never raises)."""
        if self._stack is not None:
            with contextlib.suppress(Exception):
                self._run(self._stack.aclose())
            self._stack = None
        with contextlib.suppress(Exception):
            self._sync(self.env.close)
        if self._loop is not None:
            self._loop.close()
            self._loop = None


def _server_tools(server: object) -> dict[str, ServerTool]:
    """A FastMCP server's tools by name (FastMCP 2's ``get_tools`` or 3's ``list_tools``)."""
    getter = getattr(server, "get_tools", None) or getattr(server, "list_tools", None)
    if getter is None:
        return {}
    loop = asyncio.new_event_loop()
    try:
        found = loop.run_until_complete(getter())
    finally:
        loop.close()
    return dict(found) if isinstance(found, Mapping) else {t.name: t for t in found}


def _server_tool_spec(tool: ServerTool) -> JsonObject:
    return {
        "name": tool.name,
        "description": tool.description or "",
        "inputSchema": getattr(tool, "parameters", None) or {},
    }
