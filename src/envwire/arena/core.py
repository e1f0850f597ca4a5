"""The arena: act requests carried out over the store and the games, with no HTTP in sight.

:meth:`Arena.handle_act` is the whole act endpoint as a function from (env name, body bytes,
content type) to (status, body bytes); a web layer only moves bytes. Each act request:

1. is decoded and validated (:mod:`envwire.protocols.arena`): 413, 415, 400 naming the field;
2. names an arena env (400 if unknown) and an agent with its password (401 if unknown, wrong or
   blocked; 429 with ``Retry-After`` after too many failures, :mod:`envwire.arena.logins`);
3. abandons runs (v1 ``to_abandon``; 400 if the env does not allow it), then applies each
   action to its run: a problem with one action (someone else's run, a finished run, a wrong
   action number, an action the env rejects) is an error message about that run, and the run
   keeps waiting for its action;
4. picks the runs of the reply (:func:`envwire.arena.rules.schedule`), starting new runs;
5. writes everything in one transaction, then replies. If the write fails, the live envs it
   touched are dropped (they are rebuilt from the database) and the client gets 503 and retries.

Requests of one agent are handled one at a time; different agents proceed in parallel.
"""

from __future__ import annotations

import difflib
import logging
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from envwire.arena.accounts import Verifier, hash_secret, needs_rehash
from envwire.arena.admin import ArenaAdmin, resolve_spec
from envwire.arena.aisys.game import plugin_game
from envwire.arena.aisys.plugins import is_plugin_id
from envwire.arena.errors import (
    ARENA_STATUS,
    ArenaBusyError,
    AuthenticationError,
    MalformedRequestError,
    UnknownArenaEnvError,
)
from envwire.arena.games import Accepted, ArenaGame, Game
from envwire.arena.logins import LoginLimits
from envwire.arena.rows import (
    AgentRow,
    Batch,
    EnvRow,
    Finish,
    MessageRow,
    NewRun,
    RunRow,
    StepRow,
)
from envwire.arena.rules import RunSlot, request_limit, schedule
from envwire.arena.settings import ArenaEnvSettings
from envwire.arena.store import Store
from envwire.errors import EnvwireError, RateLimitedError
from envwire.jsonio import JsonValue
from envwire.protocols.arena import (
    ActionRequest,
    ActReply,
    ActRequest,
    Message,
    MessageType,
    RawJSON,
    decode_body,
    dumps,
    encode_reply,
    error_body,
    error_reply,
    parse_act_request,
)
from envwire.registry import Catalog
from envwire.session import SessionObserver, WorkerFactory

__all__ = ["DEFAULT_MAX_BODY", "Arena"]

log = logging.getLogger("envwire.arena")

#: The largest act request body accepted by default (bytes).
DEFAULT_MAX_BODY = 1 << 20
_MAX_SHOWN_ACTION = 120


@dataclass
class _Request:
    """The working state of one act request."""

    env: EnvRow
    settings: ArenaEnvSettings
    game: ArenaGame
    agent: str
    active: dict[int, RunRow]
    batch: Batch
    reply: ActReply
    now: float

    def say(self, kind: MessageType, content: str, run: RunRow | str | None = None) -> None:
        """A message in the reply; about one of the agent's own runs, also in its history."""
        if isinstance(run, RunRow):
            self.reply.messages.append(Message(kind, content, str(run.id)))
            self.batch.messages.append(MessageRow(run.id, run.act_no, kind, content, self.now))
        else:
            self.reply.messages.append(Message(kind, content, run))


class Arena:
    """The arena over one database.

    Args:
        store: the database.
        catalog: the server's catalog (arena envs name ids in it, or ids ``envwire serve`` reads).
        worker_factory: where the arena's envs live (the server passes
            ``envwire.runtime.make_worker``).
        max_body: the largest act request body, in bytes.
        live_runs: how many live envs each arena env keeps (others are rebuilt on demand).
        observer: told of the arena's env sessions (front end ``arena``), as the server's
            session table tells it of the others; None for none.
        on_actions: called with an arena env's name and how many actions one act request
            carried (the server counts them as a metric).
        seed: the source of run seeds.
        clock: the source of timestamps.
        logins: the failed-login limits (default: :class:`LoginLimits`'s).
    """

    def __init__(
        self,
        store: Store,
        catalog: Catalog | None = None,
        *,
        worker_factory: WorkerFactory,
        max_body: int = DEFAULT_MAX_BODY,
        live_runs: int = 1024,
        observer: SessionObserver | None = None,
        on_actions: Callable[[str, int], None] | None = None,
        seed: Callable[[], int] = lambda: secrets.randbelow(1 << 31),
        clock: Callable[[], float] = time.time,
        logins: LoginLimits | None = None,
    ) -> None:
        self.store = store
        self.catalog = catalog
        self.admin = ArenaAdmin(store, catalog)
        self.max_body = max_body
        self.live_runs = live_runs
        self.worker_factory = worker_factory
        self.observer = observer
        self._on_actions = on_actions
        self._seed = seed
        self._clock = clock
        self._passwords = Verifier()
        self.logins = logins or LoginLimits()
        self._games: dict[str, tuple[tuple[str, str], ArenaGame]] = {}
        self._games_lock = threading.Lock()
        self._agent_locks: dict[tuple[str, str], threading.Lock] = {}

    def close(self) -> None:
        """Close every live env and the database."""
        with self._games_lock:
            games = [g for _, g in self._games.values()]
            self._games.clear()
        for game in games:
            game.close()
        self.store.close()

    # -- lookups ---------------------------------------------------------------------------

    def now(self) -> float:
        """The arena's clock (a timestamp)."""
        return self._clock()

    def _make_game(self, env: EnvRow) -> ArenaGame:
        settings = ArenaEnvSettings.build(env.settings)
        if is_plugin_id(env.env_id):
            return plugin_game(env, settings, self.store, live_runs=self.live_runs)
        spec = resolve_spec(env.env_id, self.catalog, settings.kwargs)
        return Game(
            env.name,
            spec,
            settings,
            self.store.actions,
            worker_factory=self.worker_factory,
            live_runs=self.live_runs,
            observer=self.observer,
        )

    def game(self, env: EnvRow) -> tuple[ArenaGame, ArenaEnvSettings]:
        """The game of an arena env (made on first use, remade when the env was redefined).

        Raises:
            ConfigError: the env's catalog id cannot be resolved, or its plugin not loaded.
        """
        key = (env.env_id, dumps(env.settings))
        with self._games_lock:
            known = self._games.get(env.name)
            if known is not None and known[0] == key:
                return known[1], known[1].settings
            game = self._make_game(env)
            self._games[env.name] = (key, game)
        if known is not None:
            known[1].close()
        return game, game.settings

    def check_env(self, row: EnvRow) -> None:
        """Make the game of an env about to be stored, to report now what would fail later.

        Raises:
            ConfigError: it cannot be made.
        """
        self._make_game(row).close()

    def forget_games(self, which: Callable[[str], bool]) -> None:
        """Close the games of envs whose id ``which`` selects (they are made again on use, from
        code that changed: an uploaded plugin)."""
        with self._games_lock:
            names = [n for n, (key, _) in self._games.items() if which(key[0])]
            games = [self._games.pop(n)[1] for n in names]
        for game in games:
            game.close()

    def _env(self, name: str) -> EnvRow:
        row = self.store.env(name)
        if row is not None:
            return row
        names = [e.name for e in self.store.envs()]
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise UnknownArenaEnvError(
            f"unknown arena env {name!r}{hint} (arena envs here: {', '.join(names) or 'none'})"
        )

    def check_password(self, env: str, agent: str, pwd: str, client: str = "") -> AgentRow:
        """The agent, if ``pwd`` is its password (``client``: the address it came from). A
        password stored in an older scheme (carried over from another server) is stored again
        as a scrypt hash once it matched.

        Raises:
            RateLimitedError: too many failed logins for the agent or from ``client``.
            AuthenticationError: unknown agent or wrong password.
        """
        self.logins.check(env, agent, client)
        row = self.store.agent(env, agent)
        if row is None or not self._passwords.verify((env, agent), pwd, row.pwd_hash):
            self.logins.failed(env, agent, client)
            log.info("arena %s: failed login of agent %.64r from %s", env, agent, client or "-")
            if row is None:
                raise AuthenticationError(f"unknown agent {agent!r} in arena env {env!r}")
            raise AuthenticationError(f"wrong password for agent {agent!r} in arena env {env!r}")
        self.logins.succeeded(env, agent)
        if needs_rehash(row.pwd_hash):
            self.store.replace_pwd_hash(env, agent, row.pwd_hash, hash_secret(pwd))
        return row

    def authenticate(self, env: str, agent: str, pwd: str, client: str = "") -> None:
        """Accept the agent's credentials (``client``: the address they came from).

        Raises:
            RateLimitedError: too many failed logins for the agent or from ``client``.
            AuthenticationError: unknown agent, wrong password, or blocked agent.
        """
        if self.check_password(env, agent, pwd, client).blocked:
            raise AuthenticationError(f"agent {agent!r} is blocked in arena env {env!r}")

    def _agent_lock(self, env: str, agent: str) -> threading.Lock:
        with self._games_lock:
            return self._agent_locks.setdefault((env, agent), threading.Lock())

    # -- the act endpoint ------------------------------------------------------------------

    def handle_act(
        self, env: str, body: bytes, content_type: str | None, client: str = ""
    ) -> tuple[int, bytes]:
        """The act endpoint: status and JSON body for a request body from the address
        ``client``. Never raises."""
        return self.act_response(env, body, content_type, client)[:2]

    def act_response(
        self, env: str, body: bytes, content_type: str | None, client: str = ""
    ) -> tuple[int, bytes, list[tuple[str, str]]]:
        """:meth:`handle_act` with the response headers it needs (``Retry-After`` on 429)."""
        try:
            request = parse_act_request(decode_body(body, content_type, self.max_body))
            return 200, encode_reply(self.act(env, request, client), request.version), []
        except RateLimitedError as exc:
            return (
                *error_reply(exc, ARENA_STATUS),
                [("retry-after", str(max(round(exc.retry_after), 1)))],
            )
        except EnvwireError as exc:
            return (*error_reply(exc, ARENA_STATUS), [])
        except sqlite3.Error as exc:  # the database is busy or failing: nothing was changed
            log.error("act request for %r: database error: %s", env, exc)
            busy = ArenaBusyError(f"the arena's database is not available ({exc})")
            return (*error_reply(busy, ARENA_STATUS), [])
        except Exception:
            log.exception("act request for %r failed", env)
            return 500, error_body(500, "internal server error; the server log has the details"), []

    def act(self, env_name: str, request: ActRequest, client: str = "") -> ActReply:
        """Carry out one act request (see the module docstring).

        Raises:
            UnknownArenaEnvError, AuthenticationError, MalformedRequestError, ArenaBusyError,
            ConfigError: the request as a whole fails; nothing was changed.
        """
        env = self._env(env_name)
        self.authenticate(env_name, request.agent, request.pwd, client)
        if self._on_actions is not None and request.actions:
            self._on_actions(env_name, len(request.actions))
        game, settings = self.game(env)
        if request.to_abandon and not settings.can_abandon:
            raise MalformedRequestError(
                "to_abandon", f"arena env {env_name!r} does not allow abandoning runs"
            )
        with self._agent_lock(env_name, request.agent):
            now = self._clock()
            active = {run.id: run for run in self.store.active_runs(env_name, request.agent)}
            work = _Request(
                env, settings, game, request.agent, active,
                Batch(env_name, request.agent), ActReply(), now,
            )  # fmt: skip
            for run_text in request.to_abandon:
                run = self._own_run(work, run_text)
                if run is not None:
                    self._abandon(work, run)
            for action in request.actions:
                run = self._own_run(work, action.run, action.act_no)
                if run is not None:
                    self._apply(work, run, action.act_no, action.action)
            self._plan(work, request.parallel_runs)
            try:
                self.store.apply(
                    work.batch,
                    rating_runs=settings.rating_runs,
                    objective=settings.rating_objective,
                    initial_rating=settings.initial_rating,
                )
            except sqlite3.Error as exc:
                for run_id in {*work.batch.progress, *(r.id for r in work.batch.new_runs)}:
                    game.drop(run_id)
                log.error("arena %s: saving a request of %s failed: %s", env_name, work.agent, exc)
                raise ArenaBusyError(
                    f"the arena could not save this request ({exc}); retry"
                ) from exc
            return work.reply

    def _own_run(self, work: _Request, text: str, act_no: int | None = None) -> RunRow | None:
        """The agent's active run ``text``, or None after an error message saying why not.

        For an action (``act_no`` given) to a finished run, the message is the one a wrong
        action number gets, as on the original server: a resent action whose reply was lost
        gets "wrong action number", never a second effect.
        """
        run_id = int(text) if text.isdigit() and len(text) <= 18 else None
        if run_id is not None and run_id in work.active:
            return work.active[run_id]
        row = self.store.run(run_id) if run_id is not None else None
        if row is None or row.env != work.env.name:
            work.say("error", "unknown run", text)
        elif row.agent != work.agent:
            work.say("error", "this run belongs to another agent", text)
        elif not row.finished:  # finished earlier in this very request
            work.say("error", "the run was finished earlier in this request", text)
        elif act_no is not None and act_no != row.act_no:
            work.say(
                "error",
                f"wrong action number {act_no}: the run finished after {row.act_no} actions "
                f"(outcome {row.outcome}); the action may have been meant for an earlier request",
                text,
            )
        else:
            work.say("error", f"the run is already finished (outcome {row.outcome})", text)
        return None

    def _abandon(self, work: _Request, run: RunRow) -> None:
        outcome, value = work.game.abandon(run.id, run.act_no, agent=work.agent)
        work.batch.finished.append(Finish(run.id, outcome, value, "abandoned", work.now))
        work.reply.finished_runs[str(run.id)] = outcome
        work.say("warning", "run abandoned at the client's request", run)
        del work.active[run.id]
        work.batch.progress.pop(run.id, None)

    def _apply(self, work: _Request, run: RunRow, act_no: int, action: JsonValue) -> None:
        if act_no != run.act_no:
            work.say(
                "error",
                f"wrong action number {act_no}: the run waits for action {run.act_no} "
                "(the action may have been meant for an earlier request)",
                str(run.id),
            )
            return
        result = work.game.step(run.id, run.seed, run.act_no, run.percept, action, agent=work.agent)
        if not isinstance(result, Accepted):
            shown = dumps(action)
            if len(shown) > _MAX_SHOWN_ACTION:
                shown = RawJSON(shown[: _MAX_SHOWN_ACTION - 3] + "...")
            work.say("error", f"action {shown} rejected: {result.reason}", run)
            return
        batch = work.batch
        batch.steps.append(
            StepRow(run.id, run.act_no, run.percept, result.action, result.reward, work.now)
        )
        if result.state is not None:
            batch.states[run.id] = result.state
            batch.extras.append((run.id, run.act_no, result.extra or RawJSON("null")))
        for text in result.messages:
            work.say("info", text, run)
        if result.done:
            assert result.outcome is not None
            batch.finished.append(
                Finish(run.id, result.outcome, result.outcome_value, "done", work.now)
            )
            work.reply.finished_runs[str(run.id)] = result.outcome
            del work.active[run.id]
            batch.progress[run.id] = (run.act_no + 1, result.percept, result.episode_return)
            return
        work.active[run.id] = replace(
            run,
            act_no=run.act_no + 1,
            percept=result.percept,
            outstanding=False,
            episode_return=result.episode_return,
        )
        batch.progress[run.id] = (run.act_no + 1, result.percept, result.episode_return)

    def _plan(self, work: _Request, parallel_runs: bool) -> None:
        limit = request_limit(work.settings.requests_per_reply, parallel_runs)
        plan = schedule([RunSlot(r.id, r.outstanding) for r in work.active.values()], limit)
        send = list(plan.send)
        for run_id in self.store.allocate_run_ids(plan.new_runs):
            seed = self._seed()
            try:
                started = work.game.start(run_id, seed, agent=work.agent)
            except EnvwireError as exc:
                work.say("error", f"could not start a new run: {exc}")
                break
            percept = started.percept
            if started.state is not None:
                work.batch.states[run_id] = started.state
            work.batch.new_runs.append(NewRun(run_id, seed, percept, work.now))
            work.active[run_id] = RunRow(
                run_id, work.env.name, work.agent, seed, 0, percept, True, False, 0.0,
                None, None, work.now, None,
            )  # fmt: skip
            send.append(run_id)
        for run_id in send:
            run = work.active[run_id]
            work.reply.action_requests.append(ActionRequest(str(run_id), run.act_no, run.percept))
            work.batch.asked.add(run_id)
        work.reply.active_runs = [str(run_id) for run_id in sorted(work.active)]
