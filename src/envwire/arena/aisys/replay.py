"""What a migration can rebuild of an AISysProj server's runs, which that server did not store.

That server kept, per run, only its current state, its history of ``[action, extra info]``
and its outcome: no times, no percepts, and not the order in which runs finished beyond each
agent's last 20 (``recently_finished_runs``). So:

- :func:`finish_order` puts the finished runs in the order they finished, as far as it is
  known: each agent's last 20 in the order that server recorded, its earlier runs by id (runs
  start in id order and mostly finish so); across agents, each agent's runs take the places of
  its run ids in id order.
- :func:`replay` rebuilds the percepts a run's actions answered by playing the run again
  through its plugin: ``new_run()``, then each recorded action. The percepts are kept only if
  the replay gives back every recorded extra info, the stored state and the outcome: a plugin
  that draws random numbers (a random first state, a random opponent) rarely replays, and its
  percepts stay unknown rather than wrong.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from envwire.arena.aisys.database import OriginalRatings, OriginalRun
from envwire.arena.aisys.plugins import Plugin, run_data
from envwire.jsonio import JsonValue
from envwire.protocols.arena import dumps

__all__ = ["REPLAY_TRIES", "Replayed", "finish_order", "replay"]

log = logging.getLogger("envwire.arena")

#: Replays tried per run (a plugin with a random first state may need more than one).
REPLAY_TRIES = 3


def finish_order(runs: Sequence[OriginalRun], ratings: Sequence[OriginalRatings]) -> list[int]:
    """The ids of the finished runs, in the order they finished (see the module docstring)."""
    last = {(r.env, r.agent): r.recent_runs for r in ratings}
    by_agent: dict[tuple[str, str], list[int]] = {}
    for run in sorted(runs, key=lambda r: r.id):
        if run.finished:
            by_agent.setdefault((run.env, run.agent), []).append(run.id)
    placed: list[tuple[int, int]] = []
    for key, ids in by_agent.items():
        known = {run_id: n for n, run_id in enumerate(last.get(key, ()))}
        ordered = sorted(ids, key=lambda i: (i in known, known.get(i, 0), i))
        placed += zip(ids, ordered, strict=True)  # ids are sorted: the agent's places
    return [run_id for _, run_id in sorted(placed)]


@dataclass(frozen=True, slots=True)
class Replayed:
    """A run played again: the percept (JSON text) each action answered, and whether its last
    action ended it (a finished run whose last action did not was abandoned)."""

    percepts: list[str]
    ended_by_action: bool


def _same(value: object) -> JsonValue:
    """``value`` as that server stored it: through JSON."""
    copy: JsonValue = json.loads(json.dumps(value))
    return copy


def _content(request: object) -> str:
    return dumps(getattr(request, "content", None))


def _once(plugin: Plugin, run: OriginalRun) -> Replayed | None:
    state = _same(plugin.new_run())
    history: list[tuple[JsonValue, JsonValue]] = []
    percepts: list[str] = []
    outcome: object = None
    for action, extra in run.history:
        if outcome is not None:  # it ended before its last recorded action
            return None
        percepts.append(_content(plugin.get_action_request(
            run_data(run.id, run.agent, state, history))))  # fmt: skip
        result = plugin.act(action, run_data(run.id, run.agent, state, history))
        new_state = getattr(result, "new_state", None)
        if new_state is None or _same(getattr(result, "action_extra_info", None)) != extra:
            return None
        state = _same(new_state)
        history.append((action, extra))
        outcome = getattr(result, "outcome", None)
    if state != run.state:
        return None
    if outcome is not None and (not run.finished or _same(outcome) != run.outcome):
        return None
    return Replayed(percepts, outcome is not None)


def replay(plugin: Plugin, run: OriginalRun, tries: int = REPLAY_TRIES) -> Replayed | None:
    """The run played again through ``plugin``, or None when no replay gave back what was
    stored (or the plugin raised)."""
    for _ in range(tries):
        try:
            replayed = _once(plugin, run)
        except Exception as exc:  # a plugin is any code: its failure only loses the percepts
            log.debug("run %d does not replay: %s: %s", run.id, type(exc).__name__, exc)
            return None
        if replayed is not None:
            return replayed
    return None
