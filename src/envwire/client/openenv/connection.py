"""OpenEnv connections: one session over a WebSocket (``<base>/ws``) or over envwire's
stateful HTTP endpoints, both behind the :class:`Connection` protocol that
:mod:`envwire.client.openenv` builds on.

Errors the server reports are raised as the envwire error class their code names; a connection
that meets something other than an OpenEnv server says what answered instead.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import quote, urlsplit, urlunsplit

import httpx
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as ws_connect

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
from envwire.ports import HTTP
from envwire.protocols.openenv import dumps, parse_server_message

__all__ = [
    "Connection",
    "HttpConnection",
    "WebSocketConnection",
    "base_url",
    "rpc_result",
]

#: What the wrong server's answers are told from (with the default port of ``--http``).
_EXPECTING = Expecting("OpenEnv", Found.HTTP, HTTP.default_port)
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
        return rpc_result(self._call("mcp", request), method)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._ws.send('{"type":"close"}')
        with contextlib.suppress(Exception):
            self._ws.close()


def rpc_result(response: Mapping[str, JsonValue], method: str) -> JsonValue:
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
        return rpc_result(self._request("POST", "/mcp", request), method)

    def close(self) -> None:
        try:
            if self.token is not None:
                self._request("DELETE", "/session")
        except EnvwireError:
            pass
        finally:
            self.token = None
            self._http.close()
