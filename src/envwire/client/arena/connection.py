"""The arena client's connection: an agent config, and the act request that carries actions.

:class:`Connection` is the one place that sends, and so the one place httpx's exceptions stop:
anything of ``httpx.HTTPError`` (no connection, a timeout, a connection lost mid-reply, a broken
reply) is retried as "no answer" and ends as :class:`~envwire.errors.TransportError`, as do 503
replies after ``retry_for`` seconds; any other refusal is an :class:`ArenaRequestError`; a 200
reply that is not a JSON object is a :class:`~envwire.errors.ProtocolError`; actions that are
not JSON data are an :class:`~envwire.errors.InvalidArgumentError`, raised before anything is
sent.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypedDict

import httpx

from envwire.errors import InvalidArgumentError, ProtocolError, RemoteError, TransportError, clip

__all__ = [
    "CLIENT_NAME",
    "AgentConfig",
    "ArenaRequestError",
    "Connection",
    "load_config",
    "run_url",
]

# the package's logger (not this module's): one name to turn the client's lines on or off
log = logging.getLogger("envwire.client.arena")

#: What the client calls itself in its requests (the ``client`` field).
CLIENT_NAME = "envwire-arena-client"


class AgentConfig(TypedDict):
    """An agent config file, as the server's admin hands it out."""

    agent: str
    pwd: str
    env: str
    url: str


class ArenaRequestError(RemoteError):
    """The server refused a request (anything but 200 and 503).

    Attributes:
        status: the HTTP status.
        errorname: the server's ``errorname`` (the status phrase).
        description: the server's ``description``.
    """

    code = "arena_request_error"

    def __init__(self, status: int, errorname: str, description: str) -> None:
        super().__init__(f"{status} {errorname}: {description}", remote_code=str(status))
        self.status = status
        self.errorname = errorname
        self.description = description


def load_config(config: str | Path | Mapping[str, Any]) -> AgentConfig:
    """An agent config from a file path or a mapping.

    Raises:
        InvalidArgumentError: a field is missing or not a string, or the file is unreadable.
    """
    if isinstance(config, str | Path):
        try:
            data = json.loads(Path(config).read_text())
        except (OSError, ValueError) as exc:
            raise InvalidArgumentError(f"cannot read agent config {config}: {exc}") from exc
    else:
        data = dict(config)
    if not isinstance(data, dict):
        raise InvalidArgumentError("an agent config is a JSON object {agent, pwd, env, url}")
    for key in ("agent", "pwd", "env", "url"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise InvalidArgumentError(f"agent config: {key!r} is missing or not a string")
    return AgentConfig(agent=data["agent"], pwd=data["pwd"], env=data["env"], url=data["url"])


def run_url(config: AgentConfig, run_id: str) -> str:
    """The web page of a run."""
    return f"{config['url'].rstrip('/')}/arena/run/{config['env']}/{run_id}"


class Connection:
    """Sends act requests for one agent, retrying 503 replies and lost connections.

    One ``httpx.Client`` per connection, so that consecutive requests reuse one keep-alive
    connection to the server. Use it as a context manager, or call :meth:`close`.

    Args:
        config: the agent config.
        retry_for: seconds to keep retrying one request (503 or no connection) before giving up.
        timeout: seconds each HTTP request may wait to connect, to send, and between bytes of
            the reply (httpx's connect, write and read timeouts).
        client: an ``httpx.Client`` to send with (one is made otherwise, and closed by
            :meth:`close`; a client passed in stays open). ``timeout`` applies to every request
            either way.

    Raises:
        InvalidArgumentError: the config's ``url`` is not an http:// or https:// URL.
    """

    def __init__(
        self,
        config: AgentConfig,
        *,
        retry_for: float = 300.0,
        timeout: float = 120.0,
        client: httpx.Client | None = None,
    ) -> None:
        self.config = config
        self.retry_for = retry_for
        self.timeout = timeout
        # The config's url ends in '/' and the reference clients append '/act/...', so servers
        # see '//act/<env>'; ours does the same (httpx keeps the empty segment), and envwire's
        # server takes both.
        self.url = f"{config['url']}/act/{config['env']}"
        try:
            parsed = httpx.URL(self.url)
        except httpx.InvalidURL as exc:
            raise InvalidArgumentError(f"agent config: url {clip(config['url'])}: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise InvalidArgumentError(
                f"agent config: url {clip(config['url'])} is not an http:// or https:// URL"
            )
        self._owns_client = client is None
        self.client = httpx.Client(timeout=timeout) if client is None else client

    def close(self) -> None:
        """Close the HTTP client if this connection made it (idempotent)."""
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def act(
        self,
        actions: list[dict[str, Any]],
        *,
        to_abandon: list[str] | None = None,
        parallel_runs: bool = True,
    ) -> dict[str, Any]:
        """One request; the server's reply.

        Raises:
            InvalidArgumentError: ``actions`` hold something that is not JSON data.
            ArenaRequestError: the server refused the request.
            ProtocolError: the server's 200 reply is not a JSON object.
            TransportError: no answer (or only 503) for ``retry_for`` seconds.
        """
        content = _encode(
            {
                "protocol_version": 1,
                "agent": self.config["agent"],
                "pwd": self.config["pwd"],
                "actions": actions,
                "to_abandon": to_abandon or [],
                "parallel_runs": parallel_runs,
                "client": CLIENT_NAME,
            }
        )
        deadline = time.monotonic() + self.retry_for
        pause = 0.25
        while True:
            try:
                response = self.client.put(
                    self.url,
                    content=content,
                    headers=_JSON_HEADERS,
                    timeout=self.timeout,
                    # as before (and as the reference clients do): a redirect is followed,
                    # 307 and 308 with the same PUT
                    follow_redirects=True,
                )
            except httpx.TimeoutException:
                problem = f"no answer from {self.url} within {self.timeout:g} s"
            except httpx.HTTPError as exc:  # no connection, connection lost, broken reply
                problem = f"no answer from {self.url}: {str(exc) or type(exc).__name__}"
            else:
                if response.status_code == 200:
                    return _reply(response, self.url)
                if response.status_code != 503:
                    raise _refusal(response)
                problem = f"server busy (503): {_description(response)}"
                retry_after = response.headers.get("retry-after", "")
                if retry_after.isdigit():
                    pause = max(pause, float(retry_after))
            if time.monotonic() + pause > deadline:
                raise TransportError(f"giving up after {self.retry_for:g} s: {problem}")
            log.warning("%s; retrying in %.2g s", problem, pause)
            time.sleep(pause)
            pause = min(pause * 2, 30.0)


_JSON_HEADERS = {"content-type": "application/json"}


def _encode(body: dict[str, Any]) -> bytes:
    """The request body: JSON with the standard library's default separators and ASCII
    escapes, byte for byte what ``requests``' ``json=`` sends, and so what the course's
    reference clients send (httpx's own ``json=`` would send a compact UTF-8 form)."""
    try:
        return json.dumps(body, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:  # ValueError: NaN or infinity; TypeError: any object
        raise InvalidArgumentError(
            f"actions must be JSON data (dict, list, str, int, finite float, bool, None): {exc}"
        ) from None


def _reply(response: httpx.Response, url: str) -> dict[str, Any]:
    try:
        reply = response.json()
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        raise ProtocolError(
            f"{url}: expected a JSON object in the 200 reply, got {clip(response.text)}"
        )
    return reply


def _description(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:500]
    if isinstance(data, dict) and "description" in data:
        return str(data["description"])
    return json.dumps(data)[:500]


def _refusal(response: httpx.Response) -> ArenaRequestError:
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, dict) and "errorname" in data:
        return ArenaRequestError(
            response.status_code, str(data["errorname"]), str(data.get("description", ""))
        )
    return ArenaRequestError(
        response.status_code, response.reason_phrase or "Error", _description(response)
    )
