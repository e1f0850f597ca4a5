"""The arena's HTTP endpoints, framework-free: a request in, a response out.

:class:`ArenaWeb` answers each :class:`~envwire.protocols.http.http11.Request` with a
:class:`~envwire.protocols.http.http11.Response`, and returns None for paths that are not the
arena's, so any HTTP server can put it in front of its own routes. Two servers use it:
envwire's own HTTP front end (``envwire serve --http PORT --arena-db FILE``, see
:mod:`envwire.server.http`) and any ASGI server (:func:`envwire.arena.web.asgi.create_app`).
Handlers block (database, envs): servers call them from a worker thread.

==========================================  =================================================
``PUT``/``GET /act/{env}``                  the act protocol (v0 and v1; ``//act/...`` too)
``GET /arena/``                             the arena envs
``GET /arena/env/{env}``                    leaderboard and recent runs
``GET /arena/agent/{env}/{agent}``          an agent's rating and recent runs
``GET /arena/run/{env}/{run}``              a run's full history (``/run/{env}/{run}`` redirects)
``GET /arena/api/envs``                     the arena envs as JSON
``GET /arena/api/results/{env}``            the leaderboard as JSON
``GET /arena/api/run/{env}/{run}``          a run's history as JSON
``/arena/admin/...``                        the admin API (``Authorization: Bearer <token>``)
==========================================  =================================================
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus

from envwire.arena import history
from envwire.arena.core import Arena
from envwire.arena.errors import ARENA_STATUS, MalformedRequestError, NotFoundError
from envwire.arena.history import OutcomeRow
from envwire.arena.rows import EnvRow, RunRow
from envwire.arena.web import pages
from envwire.errors import ConfigError, EnvError, EnvwireError
from envwire.jsonio import JsonObject, JsonValue
from envwire.protocols.arena import decode_body, error_body, error_reply
from envwire.protocols.http.http11 import Request, Response
from envwire.protocols.http.status import StatusTable, status_of, statuses

__all__ = ["ArenaRoute", "ArenaWeb", "route"]

log = logging.getLogger("envwire.arena")

_HTML = "text/html; charset=utf-8"
_NAME = r"(?P<{}>[^/]+)"
_SLASHES = re.compile(r"/{2,}")


Handler = Callable[[Request, dict[str, str]], Response]


@dataclass(frozen=True, slots=True)
class ArenaRoute:
    """A path pattern, the methods it answers, and its handler."""

    pattern: re.Pattern[str]
    methods: tuple[str, ...]
    handler: Handler

    def match(self, path: str) -> dict[str, str] | None:
        """The path parameters when ``path`` is this route's."""
        found = self.pattern.match(path)
        return None if found is None else found.groupdict()


def route(path: str, methods: tuple[str, ...], handler: Handler) -> ArenaRoute:
    """A route: ``path`` with ``{name}`` parameters (one path segment each)."""
    regex = re.sub(r"\{(\w+)\}", lambda m: _NAME.format(m[1]), path)
    return ArenaRoute(re.compile(f"^{regex}$"), methods, handler)


def _json(status: int, value: object) -> Response:
    return Response(status, json.dumps(value).encode())


def _error(exc: EnvwireError) -> Response:
    status, body = error_reply(exc, _STATUS)
    return Response(status, body)


def _html_error(exc: EnvwireError) -> Response:
    status = status_of(exc, _STATUS)
    page = pages.error_page(status, HTTPStatus(status).phrase, exc.message)
    return Response(status, page.encode(), _HTML)


class ArenaWeb:
    """The arena's endpoints over one :class:`Arena`.

    Args:
        arena: the arena.
        public_url: the server URL for agent config files made through the admin API (default:
            the database's ``public_url``, else the URL the admin request came to).
    """

    def __init__(self, arena: Arena, *, public_url: str | None = None) -> None:
        self.arena = arena
        self.public_url = public_url
        get, act = ("GET",), ("GET", "PUT")
        admin = "/arena/admin/envs"
        self.routes = [
            route("/act/{env}", act, self.act),
            route("/arena/?", get, self.index),
            route("/arena/env/{env}/?", get, self.env_page),
            route("/arena/agent/{env}/{agent}/?", get, self.agent_page),
            route("/arena/run/{env}/{run}/?", get, self.run_page),
            route("/run/{env}/{run}/?", get, self.run_redirect),
            route("/arena/api/envs", get, self.api_envs),
            route("/arena/api/results/{env}", get, self.api_results),
            route("/arena/api/run/{env}/{run}", get, self.api_run),
            route(admin, get, self.admin_envs),
            route(admin + "/{env}", ("PUT",), self.admin_create_env),
            route(admin + "/{env}/agents", get, self.admin_agents),
            route(admin + "/{env}/agents/{agent}", ("POST",), self.admin_add_agent),
            route(admin + "/{env}/agents/{agent}/{op}", ("POST",), self.admin_agent_op),
        ]

    def mount(self, routes: Sequence[ArenaRoute]) -> None:
        """Serve more routes (after these: the AISysProj server's, see ``aisys.py``)."""
        self.routes.extend(routes)

    def owns(self, path: str) -> bool:
        """Whether ``path`` is one of the arena's routes."""
        path = _SLASHES.sub("/", path)
        return any(r.match(path) is not None for r in self.routes)

    def body_limit(self, request: Request) -> int | None:
        """The largest body an arena route takes (``--arena-max-body``); None for other paths.
        The HTTP front end refuses a longer body on its declared length, before reading it."""
        return self.arena.max_body if self.owns(request.path) else None

    def refuse(self, request: Request, status: int, message: str) -> Response | None:
        """The arena's error response for a request refused before it was read (413), or None
        for other paths."""
        if not self.owns(request.path):
            return None
        return Response(status, error_body(status, message))

    def handle(self, request: Request) -> Response | None:
        """The response to ``request``, or None when the path is not the arena's. Never raises."""
        # The course clients join ``url`` (ending in '/') and '/act/...', its AdminClient joins
        # it and '/uploadplugin': repeated slashes name the same route, as on that server.
        path = _SLASHES.sub("/", request.path)
        for entry in self.routes:
            params = entry.match(path)
            if params is None:
                continue
            method = "GET" if request.method == "HEAD" else request.method
            if method not in entry.methods:
                response = _error(_NotAllowed(f"{request.method} is not allowed here"))
                response.headers.append(("allow", ", ".join(entry.methods)))
                return response
            try:
                return entry.handler(request, params)
            except Exception:
                log.exception("arena: %s %s failed", request.method, request.path)
                return Response(500, error_body(500, "internal server error; see the log"))
        return None

    # -- act -------------------------------------------------------------------------------

    def act(self, request: Request, params: dict[str, str]) -> Response:
        """The act endpoint."""
        status, body, headers = self.arena.act_response(
            params["env"], request.body, request.headers.get("content-type"), request.client
        )
        response = Response(status, body)
        response.headers.extend(headers)
        return response

    # -- pages -----------------------------------------------------------------------------

    @staticmethod
    def page(render: Callable[[], str]) -> Response:
        """An HTML page; an envwire error while rendering is an error page."""
        try:
            return Response(200, render().encode(), _HTML)
        except EnvwireError as exc:
            return _html_error(exc)

    def _run(self, env: str, text: str) -> RunRow:
        row = self.arena.store.run(int(text)) if text.isdigit() and len(text) <= 18 else None
        if row is None or row.env != env:
            raise NotFoundError(f"no run {text!r} in arena env {env!r}")
        return row

    def index(self, request: Request, params: dict[str, str]) -> Response:
        """The arena envs."""
        store = self.arena.store

        def render() -> str:
            rows = []
            for env in store.envs():
                runs, finished = store.count_runs(env.name)
                rows.append((env, len(store.agents(env.name)), runs, finished))
            return pages.index_page(rows)

        return self.page(render)

    def env_page(self, request: Request, params: dict[str, str]) -> Response:
        """An env's leaderboard."""
        name, store = params["env"], self.arena.store

        def render() -> str:
            env = self.arena.admin.env(name)
            agents = store.agents(name)
            settings = env.settings
            objective = str(settings.get("rating_objective", "max"))
            initial = float(settings.get("initial_rating", 0.0))
            ratings = {
                a.name: self._rating_points(env, a.name)
                for a in pages.ranked(agents, objective, initial)[: pages.TOP_AGENTS]
            }
            recent = history.outcomes(store, name, limit=2000)
            first = history.count_outcomes(store, name) - len(recent)
            order = {row.run: first + i + 1 for i, row in enumerate(recent)}
            return pages.env_page(env, agents, store.runs(name, limit=20), ratings, order)

        return self.page(render)

    def agent_page(self, request: Request, params: dict[str, str]) -> Response:
        """An agent's page."""
        name, agent = params["env"], params["agent"]

        def render() -> str:
            env, row = self.arena.admin.env(name), self.arena.admin.agent(name, agent)
            runs = self.arena.store.runs(name, agent, limit=50)
            return pages.agent_page(env, row, runs, self._rating_points(env, agent))

        return self.page(render)

    def run_page(self, request: Request, params: dict[str, str]) -> Response:
        """A run's history."""
        name, store = params["env"], self.arena.store

        def render() -> str:
            env, run = self.arena.admin.env(name), self._run(name, params["run"])
            return pages.run_page(
                env, run, store.steps(run.id), store.messages(run.id),
                extras=history.extras(store, run.id), carried=history.carried_run(store, run.id),
                migrated_at=history.migrated_at(store),
            )  # fmt: skip

        return self.page(render)

    def _rating_points(self, env: EnvRow, agent: str) -> list[tuple[OutcomeRow, float]]:
        settings = env.settings
        return history.rating_points(
            self.arena.store, env.name, agent, shown=pages.CHART_RUNS,
            rating_runs=int(settings.get("rating_runs", 50)),
            initial=float(settings.get("initial_rating", 0.0)),
        )  # fmt: skip

    def run_redirect(self, request: Request, params: dict[str, str]) -> Response:
        """The original clients print ``<url>/run/<env>/<run>``: send them to the run page."""
        target = f"/arena/run/{params['env']}/{params['run']}"
        return Response(308, b"", _HTML, [("location", target)])

    # -- public JSON -----------------------------------------------------------------------

    @staticmethod
    def _json(produce: Callable[[], object]) -> Response:
        try:
            return _json(200, produce())
        except EnvwireError as exc:
            return _error(exc)

    def api_envs(self, request: Request, params: dict[str, str]) -> Response:
        """The arena envs as JSON."""
        return self._json(self.arena.admin.list_envs)

    def api_results(self, request: Request, params: dict[str, str]) -> Response:
        """An env's agents and ratings as JSON."""
        agents = self.arena.admin.list_agents
        return self._json(
            lambda: [{k: v for k, v in a.items() if k != "blocked"} for a in agents(params["env"])]
        )

    def api_run(self, request: Request, params: dict[str, str]) -> Response:
        """A run's history as JSON (percepts, actions and outcomes as the agent saw them; the
        env's extra information about an action, where it kept one; for a run carried over
        from another server, whether its percepts are known)."""
        store = self.arena.store

        def produce() -> JsonObject:
            self.arena.admin.env(params["env"])
            run = self._run(params["env"], params["run"])
            extras = history.extras(store, run.id)
            steps: list[JsonValue] = []
            for s in store.steps(run.id):
                step: JsonObject = {
                    "act_no": s.act_no,
                    "percept": json.loads(s.percept),
                    "action": json.loads(s.action),
                    "reward": s.reward,
                }
                if s.act_no in extras:
                    step["extra"] = json.loads(extras[s.act_no])
                steps.append(step)
            messages: list[JsonValue] = [
                {"act_no": m.act_no, "type": m.type, "content": m.content}
                for m in store.messages(run.id)
            ]
            carried = history.carried_run(store, run.id)
            return {
                "run": str(run.id),
                "agent": run.agent,
                "finished": run.finished,
                "how": run.how,
                "outcome": None if run.outcome is None else json.loads(run.outcome),
                "act_no": run.act_no,
                "percept": json.loads(run.percept),
                "steps": steps,
                "messages": messages,
                "carried_over": carried is not None,
                "percepts_known": carried is None or carried.percepts,
            }

        return self._json(produce)

    # -- admin API ---------------------------------------------------------------------------

    def _admin(self, request: Request, operation: Callable[[JsonObject], object]) -> Response:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        try:
            self.arena.admin.check_admin_token(
                token.strip() if scheme.lower() == "bearer" else None
            )
            data: JsonObject = {}
            if request.body.strip():
                body = decode_body(
                    request.body, request.headers.get("content-type"), self.arena.max_body
                )
                if not isinstance(body, dict):
                    raise MalformedRequestError("body", "expected a JSON object")
                data = body
            return _json(200, operation(data))
        except (ConfigError, EnvError) as exc:  # the admin named an env that cannot be made
            return Response(400, error_body(400, exc.message))
        except EnvwireError as exc:
            return _error(exc)

    def _url(self, request: Request, data: Mapping[str, JsonValue]) -> str:
        given = data.get("url")
        if isinstance(given, str) and given:
            return given
        stored = self.arena.store.meta("public_url")
        return self.public_url or stored or request.base_url or "http://127.0.0.1:8000/"

    def admin_envs(self, request: Request, params: dict[str, str]) -> Response:
        """Admin: every arena env."""
        return self._admin(request, lambda _: self.arena.admin.list_envs())

    def admin_create_env(self, request: Request, params: dict[str, str]) -> Response:
        """Admin: create an arena env from ``{"env_id", "settings", "display_name",
        "description", "replace"}``."""

        def create(data: JsonObject) -> object:
            env_id = data.get("env_id")
            if not isinstance(env_id, str) or not env_id:
                raise MalformedRequestError("env_id", "expected a catalog env id")
            settings = data.get("settings") or {}
            if not isinstance(settings, dict):
                raise MalformedRequestError("settings", "expected an object")
            row = self.arena.admin.create_env(
                params["env"],
                env_id,
                settings,
                display_name=str(data.get("display_name") or ""),
                description=str(data.get("description") or ""),
                replace=data.get("replace") is True,
            )
            return {"env": row.name, "env_id": row.env_id, "settings": row.settings}

        return self._admin(request, create)

    def admin_agents(self, request: Request, params: dict[str, str]) -> Response:
        """Admin: the agents of an env."""
        return self._admin(request, lambda _: self.arena.admin.list_agents(params["env"]))

    def admin_add_agent(self, request: Request, params: dict[str, str]) -> Response:
        """Admin: add an agent (``{"replace": bool, "url": str}``); its config file."""

        def add(data: JsonObject) -> object:
            url = self._url(request, data)
            replace = data.get("replace") is True
            return self.arena.admin.add_agent(
                params["env"], params["agent"], url=url, replace=replace
            )

        return self._admin(request, add)

    def admin_agent_op(self, request: Request, params: dict[str, str]) -> Response:
        """Admin: ``block``, ``unblock`` or ``password`` (a new password; the config file)."""
        env, agent, op = params["env"], params["agent"], params["op"]
        admin = self.arena.admin

        def blocking(blocked: bool) -> Callable[[JsonObject], object]:
            def operation(_: JsonObject) -> object:
                admin.set_blocked(env, agent, blocked)
                return {"agent": agent, "blocked": blocked}

            return operation

        operations: dict[str, Callable[[JsonObject], object]] = {
            "block": blocking(True),
            "unblock": blocking(False),
            "password": lambda d: admin.reset_password(env, agent, url=self._url(request, d)),
        }
        operation = operations.get(op)
        if operation is None:
            return _error(
                NotFoundError(f"unknown agent operation {op!r}: block, unblock, password")
            )
        return self._admin(request, operation)


class _NotAllowed(EnvwireError):
    code = "method_not_allowed"
    remote = True


#: The statuses these routes answer with: the arena's and a wrong method's.
_STATUS: StatusTable = statuses(ARENA_STATUS, {_NotAllowed: 405})
