"""A plugin env of the AISysProj server's interface, played as an arena game.

:class:`PluginGame` has the shape of :class:`envwire.arena.games.Game` (start, step, abandon,
drop, close), so the arena's act handling, scheduling, storage and ratings are the same for
both. What differs is where a run's state lives: a plugin env is not replayed from a seed but
keeps its state as JSON, so each accepted action stores the run's new state and the action's
extra info beside the action (in the same transaction as the rest of the request), and a run
is resumed by reading them back. The last states of recently played runs are cached.

Calls into the plugin, per run:

- start: ``new_run()``, then ``get_action_request(run)`` for the first percept;
- step: ``act(action, run)``; a result without ``new_state`` (or an exception, logged) rejects
  the action and the run stays as it was; otherwise the new state is kept, the result's
  message becomes an info message, and an ``outcome`` other than None ends the run; while the
  run goes on, ``get_action_request`` gives the next percept;
- abandon: ``get_abandon_outcome(run)``.

The plugin instance is shared by every agent's requests; calls into it are serialized by a lock,
as they were on the original server (one request at a time).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from envwire.arena.aisys.plugins import Plugin, load_env_class, make_plugin, run_data
from envwire.arena.games import Accepted, Rejected, Started
from envwire.arena.rows import EnvRow
from envwire.arena.settings import ArenaEnvSettings
from envwire.errors import EnvError
from envwire.jsonio import JsonValue
from envwire.protocols.arena import RawJSON, dumps

__all__ = ["PluginGame", "StoredRun", "plugin_game"]

log = logging.getLogger("envwire.arena")

_MAX_SHOWN = 200


@dataclass(frozen=True, slots=True)
class StoredRun:
    """What the database holds of a plugin run: its state and ``(action, extra)`` history, as
    JSON text."""

    state: str
    history: list[tuple[str, str]]


@dataclass
class _Live:
    act_no: int
    state: str
    history: list[tuple[str, str]]


def _brief(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 3] + "..."


class PluginGame:
    """The runs of one arena env whose env is a plugin.

    Args:
        name: the arena env's name.
        env: the plugin instance (``Class(EnvInfo(display name, name), config)``).
        settings: the arena env's settings.
        load_run: the stored state and history of a run (for runs not in the cache).
        live_runs: how many runs' states to cache.
    """

    def __init__(
        self,
        name: str,
        env: Plugin,
        settings: ArenaEnvSettings,
        load_run: Callable[[int], StoredRun],
        *,
        live_runs: int = 1024,
    ) -> None:
        self.name = name
        self.env = env
        self.settings = settings
        self._load_run = load_run
        self._capacity = max(1, live_runs)
        self._live: OrderedDict[int, _Live] = OrderedDict()
        self._lock = threading.RLock()

    # -- the interface's view of a run ----------------------------------------------------------

    @staticmethod
    def _run_data(run_id: int, agent: str, live: _Live) -> object:
        history = [(json.loads(a), json.loads(x)) for a, x in live.history]
        return run_data(run_id, agent, json.loads(live.state), history)

    def _percept(self, run_id: int, agent: str, live: _Live) -> RawJSON:
        request = self.env.get_action_request(self._run_data(run_id, agent, live))
        return dumps(getattr(request, "content", None))

    def _get(self, run_id: int, act_no: int) -> _Live:
        live = self._live.pop(run_id, None)
        if live is None or live.act_no != act_no:
            stored = self._load_run(run_id)
            live = _Live(len(stored.history), stored.state, list(stored.history))
        return live

    def _keep(self, run_id: int, live: _Live) -> None:
        self._live[run_id] = live
        while len(self._live) > self._capacity:
            self._live.popitem(last=False)

    # -- runs ----------------------------------------------------------------------------------

    def start(self, run_id: int, seed: int, *, agent: str = "") -> Started:
        """Start a run: its first percept and state (``seed`` is not used: plugins keep state).

        Raises:
            EnvError: the plugin failed; the run was not started.
        """
        with self._lock:
            try:
                live = _Live(0, dumps(self.env.new_run()), [])
                percept = self._percept(run_id, agent, live)
            except Exception as exc:
                log.exception("%s: the plugin failed to start a run", self.name)
                raise EnvError(f"the env failed to start a run: {_brief(exc)}") from exc
            self._keep(run_id, live)
            return Started(percept, RawJSON(live.state))

    def step(
        self,
        run_id: int,
        seed: int,
        act_no: int,
        percept: RawJSON,
        value: JsonValue,
        *,
        agent: str = "",
    ) -> Accepted | Rejected:
        """Apply action ``value`` to a run that has accepted ``act_no`` actions."""
        with self._lock:
            try:
                encoded = dumps(value)
                live = self._get(run_id, act_no)
            except (TypeError, ValueError) as exc:
                return Rejected(f"action cannot be stored: {exc}")
            except Exception as exc:
                log.exception("%s: run %d could not be restored", self.name, run_id)
                return Rejected(f"the run could not be restored, try again: {_brief(exc)}")
            try:
                result = self.env.act(value, self._run_data(run_id, agent, live))
            except Exception as exc:
                log.exception("%s: the plugin failed on an action of run %d", self.name, run_id)
                self._keep(run_id, live)
                return Rejected(f"the env failed on this action: {_brief(exc)}")
            message = getattr(result, "message", None)
            new_state = getattr(result, "new_state", None)
            if new_state is None:
                self._keep(run_id, live)
                return Rejected(str(message) if message else "the env refused the action")
            outcome = getattr(result, "outcome", None)
            try:
                state = dumps(new_state)
                extra = dumps(getattr(result, "action_extra_info", None))
                outcome_json = dumps(outcome) if outcome is not None else None
            except (TypeError, ValueError) as exc:
                self._keep(run_id, live)
                return Rejected(f"the env's result is not JSON ({exc}); the action was not taken")
            after = _Live(live.act_no + 1, state, [*live.history, (encoded, extra)])
            messages = (str(message),) if message else ()
            if outcome_json is not None:
                value_ = float(outcome) if isinstance(outcome, int | float) else None
                return Accepted(encoded, dumps(None), 0.0, 0.0, True, outcome_json, value_,
                                messages, state=RawJSON(state), extra=RawJSON(extra))  # fmt: skip
            try:
                next_percept = self._percept(run_id, agent, after)
            except Exception as exc:
                log.exception("%s: get_action_request failed for run %d", self.name, run_id)
                self._keep(run_id, live)
                return Rejected(f"the env failed on this action: {_brief(exc)}")
            self._keep(run_id, after)
            return Accepted(encoded, next_percept, 0.0, 0.0, False, messages=messages,
                            state=RawJSON(state), extra=RawJSON(extra))  # fmt: skip

    def abandon(self, run_id: int, act_no: int, *, agent: str = "") -> tuple[RawJSON, float | None]:
        """The outcome of an abandoned run (the plugin's ``get_abandon_outcome``, else the arena
        env's ``abandon_outcome``), as JSON and as a number."""
        with self._lock:
            outcome: object = self.settings.abandon_outcome
            try:
                live = self._get(run_id, act_no)
                outcome = self.env.get_abandon_outcome(self._run_data(run_id, agent, live))
                text = dumps(outcome)
            except Exception:
                log.exception("%s: get_abandon_outcome failed for run %d", self.name, run_id)
                outcome = self.settings.abandon_outcome
                text = dumps(outcome)
            return text, float(outcome) if isinstance(outcome, int | float) else None

    def drop(self, run_id: int, *, reuse: bool = False) -> None:
        """Forget a run's cached state (it is read from the database next time)."""
        with self._lock:
            self._live.pop(run_id, None)

    def close(self) -> None:
        """Forget every cached state."""
        with self._lock:
            self._live.clear()


class _Store(Protocol):
    def plugin_run(self, run_id: int) -> tuple[str, list[tuple[str, str]]]: ...


def plugin_game(
    env: EnvRow, settings: ArenaEnvSettings, store: _Store, *, live_runs: int = 1024
) -> PluginGame:
    """The game of an arena env whose id names a plugin env (``aisys:module:Class``).

    Raises:
        ConfigError: the plugin does not import or cannot be made.
    """
    cls = load_env_class(env.env_id)
    instance = make_plugin(cls, env.display_name, env.name, settings.config)

    def load(run_id: int) -> StoredRun:
        state, history = store.plugin_run(run_id)
        return StoredRun(state, history)

    return PluginGame(env.name, instance, settings, load, live_runs=live_runs)
