"""The AISysProj server's own routes, beside envwire's: its admin API and its public pages.

An organizer's tooling for that server (its ``AdminClient`` and admin command line) works
against envwire unchanged. The admin password travels as that server sends it: ``admin-pwd``
in the JSON body, or ``Authorization: Basic <base64 of the password>`` (uploads); envwire also
takes ``Bearer``. Any admin token of the arena is a password (``envwire arena admin-token``,
which can also store a password of the organizer's choosing), and so is any admin password
hash carried over by ``envwire arena migrate``.

==============================================  ==================================================
``PUT /makeenv/<env>``                          ``{env_class, display_name, config, overwrite}``
``POST /makeagent/<env>/<agent>``               ``{overwrite}``: ``{agent, pwd, env}``
``PUT /blockagent/<env>/<agent>``               the agent's own ``pwd`` or the admin password
``PUT /unblockagent/<env>/<agent>``             the admin password
``GET /getenvs``                                ``{env: [titles of its groups]}``
``GET /errors``                                 the last 50 internal errors (tracebacks)
``GET /diskusage``                              the sizes of the database and plugins folder
``GET /removenonrecentruns``                    ``{just-vacuum}``: prune old finished runs
``GET /deleteunusedagents/<env>``               delete agents without finished runs
``PUT /groupmanagement/make/<group>``           ``{title, description, overwrite}``
``DELETE /groupmanagement/delete/<group>``
``PUT /groupmanagement/addsubgroup/<g>/<sub>``
``PUT /groupmanagement/addenv/<group>/<env>``
``PUT /uploadplugin``                           a zipped plugin package (``--arena-plugin-upload``)
``GET /results``, ``GET /results/<env>``        ratings as JSON (public)
``GET /env/<env>``, ``GET /agent/<env>/<a>``    the leaderboard and agent pages (public)
``GET /group/<group>``                          a group's page (``main`` is the front page)
==============================================  ==================================================

Admin answers are JSON; errors are the arena's ``{"errorcode", "errorname", "description"}``
with that server's statuses (400 for a name that exists or does not, 401 for the password).
"""

from __future__ import annotations

import base64
import binascii
import collections
import json
import logging
import threading
import traceback
from collections.abc import Callable

from envwire.arena.aisys.admin import CourseAdmin
from envwire.arena.errors import (
    ARENA_STATUS,
    AuthenticationError,
    MalformedRequestError,
    NotFoundError,
)
from envwire.arena.maintenance import delete_unused_agents, disk_usage, prune_runs
from envwire.arena.web import pages
from envwire.arena.web.routes import ArenaRoute, ArenaWeb, route
from envwire.errors import ConfigError, EnvError, EnvwireError
from envwire.jsonio import JsonObject
from envwire.protocols.arena import decode_body, error_body, error_reply, lax_bool
from envwire.protocols.http.http11 import Request, Response

__all__ = ["ERRORS", "AisysRoutes", "ErrorLog"]

log = logging.getLogger("envwire.arena")


class ErrorLog(logging.Handler):
    """The last ``capacity`` errors logged by the arena, with tracebacks (for ``/errors``)."""

    def __init__(self, capacity: int = 50, max_chars: int = 20_000) -> None:
        super().__init__(logging.ERROR)
        self.max_chars = max_chars
        self._entries: collections.deque[str] = collections.deque(maxlen=capacity)
        self._entries_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += "\n" + "".join(traceback.format_exception(*record.exc_info))
        with self._entries_lock:
            self._entries.append(text[: self.max_chars])

    def entries(self) -> list[str]:
        """The errors, oldest first."""
        with self._entries_lock:
            return list(self._entries)


#: The process's arena error log, attached to the ``envwire.arena`` logger once.
ERRORS = ErrorLog()
log.addHandler(ERRORS)


def _json(value: object) -> Response:
    return Response(200, json.dumps(value).encode())


def _fail(exc: EnvwireError, *, not_found: int = 400) -> Response:
    """The arena's error body, with that server's statuses: a name that exists or does not
    exist, or an env that cannot be made, is a bad request there."""
    status, body = error_reply(exc, ARENA_STATUS)
    if isinstance(exc, ConfigError | EnvError) or status in (404, 409, 422):
        status = not_found if status == 404 else 400
        body = error_body(status, exc.message)
    return Response(status, body)


class AisysRoutes:
    """The AISysProj server's routes over one arena web (see the module docstring).

    Args:
        web: the arena's endpoints (its pages serve the public page routes).
        admin: the admin operations.
    """

    def __init__(self, web: ArenaWeb, admin: CourseAdmin) -> None:
        self.web = web
        self.admin = admin
        self.arena = web.arena
        get, put = ("GET",), ("PUT",)
        self.routes: list[ArenaRoute] = [
            route("/results", get, self.results),
            route("/results/{env}", get, self.results),
            route("/env/{env}/?", get, web.env_page),
            route("/agent/{env}/{agent}/?", get, web.agent_page),
            route("/group/{group}/?", get, self.group_page),
            route("/makeenv/{env}", put, self._admin(self.make_env)),
            route("/makeagent/{env}/{agent}", ("POST",), self._admin(self.make_agent)),
            route("/blockagent/{env}/{agent}", put, self.block),
            route("/unblockagent/{env}/{agent}", put, self.block),
            route("/getenvs", get, self._admin(lambda r, p, d: admin.envs_and_groups())),
            route("/errors", get, self._admin(lambda r, p, d: ERRORS.entries())),
            route("/diskusage", get, self._admin(self.diskusage)),
            route("/removenonrecentruns", get, self._admin(self.prune)),
            route("/deleteunusedagents/{env}", get, self._admin(self.unused_agents)),
            route("/groupmanagement/make/{group}", put, self._admin(self.make_group)),
            route("/groupmanagement/delete/{group}", ("DELETE",), self._admin(self.del_group)),
            route("/groupmanagement/addsubgroup/{group}/{sub}", put, self._admin(self.add_sub)),
            route("/groupmanagement/addenv/{group}/{env}", put, self._admin(self.add_env)),
            route("/uploadplugin", put, self._admin(self.upload, json_body=False)),
        ]

    # -- request plumbing ----------------------------------------------------------------------

    def _data(self, request: Request) -> JsonObject:
        if not request.body.strip():
            return {}
        data = decode_body(request.body, request.header("content-type"), self.arena.max_body)
        if not isinstance(data, dict):
            raise MalformedRequestError("body", "expected a JSON object")
        return data

    def _check_admin(self, request: Request, data: JsonObject) -> None:
        """Accept the admin password of a request (header, else ``admin-pwd``).

        Raises:
            AuthenticationError: none, or a wrong one.
            MalformedRequestError: an unreadable header or a password that is not a string.
        """
        scheme, _, value = request.header("authorization").strip().partition(" ")
        candidates: list[str] = []
        if scheme:
            if scheme.lower() == "basic":
                try:
                    text = base64.b64decode(value.strip(), validate=True).decode()
                except (binascii.Error, UnicodeDecodeError):
                    raise MalformedRequestError("Authorization", "bad Basic credentials") from None
                candidates = [text] + ([text.partition(":")[2]] if ":" in text else [])
            elif scheme.lower() == "bearer":
                candidates = [value.strip()]
            else:
                raise MalformedRequestError("Authorization", f"unknown scheme {scheme!r}")
        elif "admin-pwd" in data:
            if not isinstance(data["admin-pwd"], str):
                raise MalformedRequestError("admin-pwd", "expected a string")
            candidates = [data["admin-pwd"]]
        if not candidates:
            raise AuthenticationError("admin authorization is required")
        for candidate in candidates:
            try:
                self.arena.admin.check_admin_token(candidate)
                return
            except AuthenticationError:
                continue
        raise AuthenticationError("wrong admin password")

    def _admin(
        self,
        operation: Callable[[Request, dict[str, str], JsonObject], object],
        *,
        json_body: bool = True,
    ) -> Callable[[Request, dict[str, str]], Response]:
        def handler(request: Request, params: dict[str, str]) -> Response:
            try:
                data = self._data(request) if json_body else {}
                self._check_admin(request, data)
                return _json(operation(request, params, data))
            except EnvwireError as exc:
                return _fail(exc)

        return handler

    # -- public --------------------------------------------------------------------------------

    def results(self, request: Request, params: dict[str, str]) -> Response:
        """Ratings as JSON: of one env, or of every env."""
        try:
            if "env" in params:
                return _json(self.admin.results(params["env"]))
            return _json(self.admin.all_results())
        except EnvwireError as exc:
            return _fail(exc, not_found=404)

    def group_page(self, request: Request, params: dict[str, str]) -> Response:
        """A group's page: its envs and subgroups."""

        def render() -> str:
            group = self.admin.groups.get(params["group"])
            envs = [e for e in (self.arena.store.env(n) for n in group.envs) if e is not None]
            subgroups = [self.admin.groups.get(g) for g in group.subgroups
                         if self.admin.groups.exists(g)]  # fmt: skip
            return pages.group_page(group, envs, subgroups)

        return self.web.page(render)

    # -- admin ---------------------------------------------------------------------------------

    @staticmethod
    def _string(data: JsonObject, key: str, default: str | None = None) -> str:
        if key not in data:
            if default is None:
                raise MalformedRequestError(key, "missing")
            return default
        value = data[key]
        if not isinstance(value, str):
            raise MalformedRequestError(key, "expected a string")
        return value

    def make_env(self, request: Request, params: dict[str, str], data: JsonObject) -> object:
        """``PUT /makeenv/<env>``."""
        if "config" not in data:
            raise MalformedRequestError("config", "missing")
        self.admin.make_env(
            params["env"],
            self._string(data, "env_class"),
            self._string(data, "display_name"),
            data["config"],
            overwrite=lax_bool(data.get("overwrite", False), "overwrite"),
        )
        return {"success": True}

    def make_agent(self, request: Request, params: dict[str, str], data: JsonObject) -> object:
        """``POST /makeagent/<env>/<agent>`` (``overwrite`` is read as that server reads it:
        any true value)."""
        return self.admin.make_agent(
            params["env"], params["agent"], overwrite=bool(data.get("overwrite"))
        )

    def block(self, request: Request, params: dict[str, str]) -> Response:
        """``PUT /blockagent/...`` (the agent's own password will do) and ``/unblockagent/...``
        (admins only)."""
        env, agent = params["env"], params["agent"]
        blocking = request.path.startswith("/block")
        try:
            data = self._data(request)
            if "agent" in data:
                raise MalformedRequestError("agent", "the agent is named in the path")
            row = self.arena.store.agent(env, agent)
            if row is None:
                raise AuthenticationError("unknown agent")
            own = False
            if "pwd" in data:
                if not isinstance(data["pwd"], str):
                    raise MalformedRequestError("pwd", "expected a string")
                self.arena.check_password(env, agent, data["pwd"], request.client)
                own = blocking
            if not own:
                self._check_admin(request, data)
            self.admin.set_blocked(env, agent, blocking)
            return _json({"success": True})
        except EnvwireError as exc:
            return _fail(exc)

    def diskusage(self, request: Request, params: dict[str, str], data: JsonObject) -> object:
        """``GET /diskusage``: one text, as that server answers."""
        folder = self.admin.plugins.path if self.admin.plugins is not None else None
        return disk_usage(self.arena.store, folder)

    def prune(self, request: Request, params: dict[str, str], data: JsonObject) -> object:
        """``GET /removenonrecentruns`` (``just-vacuum``: only compact the file)."""
        if data.get("just-vacuum"):
            self.arena.store.vacuum()
        else:
            prune_runs(self.arena.store)
        return {"result": "done"}

    def unused_agents(self, request: Request, params: dict[str, str], data: JsonObject) -> object:
        """``GET /deleteunusedagents/<env>``."""
        env = params["env"]
        if self.arena.store.env(env) is None:
            raise NotFoundError(f"No such environment {env}")
        delete_unused_agents(self.arena.store, env)
        return {"result": "done"}

    def make_group(self, request: Request, params: dict[str, str], data: JsonObject) -> object:
        """``PUT /groupmanagement/make/<group>``."""
        self.admin.groups.make(
            params["group"],
            self._string(data, "title"),
            self._string(data, "description"),
            replace=lax_bool(data.get("overwrite", False), "overwrite"),
        )
        return {"success": True}

    def del_group(self, request: Request, params: dict[str, str], data: JsonObject) -> object:
        """``DELETE /groupmanagement/delete/<group>`` (``main`` is only emptied)."""
        self.admin.groups.delete(params["group"])
        return {"success": True}

    def add_sub(self, request: Request, params: dict[str, str], data: JsonObject) -> object:
        """``PUT /groupmanagement/addsubgroup/<group>/<subgroup>``."""
        self.admin.groups.add(params["group"], "group", params["sub"])
        return {"success": True}

    def add_env(self, request: Request, params: dict[str, str], data: JsonObject) -> object:
        """``PUT /groupmanagement/addenv/<group>/<env>``."""
        self.admin.groups.add(params["group"], "env", params["env"])
        return {"success": True}

    def upload(self, request: Request, params: dict[str, str], data: JsonObject) -> object:
        """``PUT /uploadplugin``: the body is the zip (the password is in the header)."""
        package = self.admin.upload_plugin(request.body)
        log.info("arena: plugin %s uploaded", package)
        return {"status": "success"}
