"""The arena's web pages, rendered on the server as plain HTML with inline SVG charts (no
scripts, no CDN; :mod:`envwire.arena.web.charts`).

Pure functions from store rows to HTML text; every value from the database or from agents is
escaped. Pages: the arena envs; a leaderboard per env with the top agents' ratings over time; an
agent with its rating over its runs, the outcomes of its recent runs and the runs; a run with a
step-by-step timeline and its full history of percepts, actions, rewards and messages.
"""

from __future__ import annotations

import html
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from urllib.parse import quote

from envwire.arena.groups import Group
from envwire.arena.store import AgentRow, EnvRow, MessageRow, RunRow, StepRow
from envwire.arena.web import charts

__all__ = [
    "TOP_AGENTS",
    "agent_page",
    "env_page",
    "error_page",
    "group_page",
    "index_page",
    "ranked",
    "run_page",
]

_MAX_JSON = 2000
#: Steps a run's timeline draws (the history table lists them all).
_TIMELINE_STEPS = 500
_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:70rem;padding:0 1rem;color:#222}
h1{font-size:1.6rem}table{border-collapse:collapse;width:100%;margin:1rem 0}
th,td{border-bottom:1px solid #ddd;padding:.35rem .6rem;text-align:left;vertical-align:top}
th{background:#f4f4f4}code{font-size:.9em;white-space:pre-wrap;word-break:break-all}
.error{color:#a00}.warning{color:#a60}.muted{color:#777}nav a{margin-right:1rem}
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _u(*parts: object) -> str:
    return "/arena/" + "/".join(quote(str(p), safe="") for p in parts)


def _link(text: object, *parts: object) -> str:
    return f'<a href="{_e(_u(*parts))}">{_e(text)}</a>'


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(stamp))


def _json(text: str) -> str:
    shown = text if len(text) <= _MAX_JSON else text[:_MAX_JSON] + " ..."
    return f"<code>{_e(shown)}</code>"


def _rating(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head>"
        f'<body><nav><a href="/arena/">Arena envs</a></nav><h1>{_e(title)}</h1>{body}'
        "</body></html>\n"
    )


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], css_id: str) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table id="{css_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _status(run: RunRow) -> str:
    if not run.finished:
        return "active"
    return "abandoned" if run.how == "abandoned" else "finished"


def _runs_table(runs: Sequence[RunRow], *, show_agent: bool) -> str:
    headers = ["run", *(["agent"] if show_agent else []), "status", "actions", "outcome", "ended"]
    rows = [
        [
            _link(r.id, "run", r.env, r.id),
            *([_link(r.agent, "agent", r.env, r.agent)] if show_agent else []),
            _e(_status(r)),
            _e(r.act_no),
            _json(r.outcome) if r.outcome is not None else "-",
            _e(_when(r.ended)),
        ]
        for r in runs
    ]
    return _table(headers, rows, "runs") if rows else '<p class="muted">No runs yet.</p>'


def group_page(group: Group, envs: Sequence[EnvRow], subgroups: Sequence[Group]) -> str:
    """A group: its description (shown as text, like every value), envs and subgroups."""
    parts = [f"<p>{_e(group.description_html)}</p>"] if group.description_html else []
    if envs:
        items = "".join(f"<li>{_link(e.display_name, 'env', e.name)}</li>" for e in envs)
        parts.append(f"<h2>Environments</h2><ul>{items}</ul>")
    if subgroups:
        items = "".join(
            f'<li><a href="/group/{_e(quote(g.name, safe=""))}">{_e(g.title)}</a></li>'
            for g in subgroups
        )
        parts.append(f"<h2>Groups</h2><ul>{items}</ul>")
    if not envs and not subgroups:
        parts.append('<p class="muted">No environments or groups here yet.</p>')
    return _page(group.title, "".join(parts))


def index_page(envs: Sequence[tuple[EnvRow, int, int, int]]) -> str:
    """The arena envs: (env, agents, runs, finished runs) each."""
    rows = [
        [_link(env.display_name, "env", env.name), _e(env.name), f"<code>{_e(env.env_id)}</code>",
         _e(agents), _e(runs), _e(finished)]
        for env, agents, runs, finished in envs
    ]  # fmt: skip
    body = (
        _table(["arena env", "name", "catalog id", "agents", "runs", "finished"], rows, "envs")
        if rows
        else '<p class="muted">No arena envs yet: <code>envwire arena create-env</code>.</p>'
    )
    return _page("Arena envs", body)


def ranked(agents: Sequence[AgentRow], objective: str, initial: float = 0.0) -> list[AgentRow]:
    """Fully evaluated agents first by best rating, then the others by current rating (best
    first for the objective; ``initial`` for agents without a rating)."""
    sign = -1.0 if objective == "max" else 1.0

    def key(a: AgentRow) -> tuple[bool, float, str]:
        score = a.best_rating if a.fully_evaluated else a.rating
        return (not a.fully_evaluated, sign * (score if score is not None else initial), a.name)

    return sorted(agents, key=key)


#: Agents whose rating history an env's page draws.
TOP_AGENTS = 5


def env_page(
    env: EnvRow,
    agents: Sequence[AgentRow],
    recent: Sequence[RunRow],
    outcomes: Sequence[tuple[str, float, float]] = (),
) -> str:
    """The leaderboard of an arena env, the top agents' ratings over time (from ``outcomes``:
    (agent, end time, outcome value) of finished runs, oldest first), and its recent runs."""
    settings = env.settings
    rating_runs = settings.get("rating_runs", 50)
    objective = str(settings.get("rating_objective", "max"))
    initial = float(settings.get("initial_rating", 0.0))
    rows = [
        [
            _e(rank),
            _link(a.name, "agent", env.name, a.name),
            _e(_rating(a.rating)),
            _e(_rating(a.best_rating)),
            "yes" if a.fully_evaluated else _e(f"no ({a.total_runs}/{rating_runs})"),
            _e(a.total_runs),
            '<span class="error">blocked</span>' if a.blocked else "active",
        ]
        for rank, a in enumerate(ranked(agents, objective, initial), 1)
    ]
    about = (f"<p>{_e(env.description)}</p>" if env.description else "") + (
        f"<p>Catalog env <code>{_e(env.env_id)}</code>. An agent's rating is the average "
        f"outcome of its last {_e(rating_runs)} finished runs; it is fully evaluated after "
        f"{_e(rating_runs)} runs, and from then on its best rating is kept.</p>"
    )
    board = (
        _table(
            ["rank", "agent", "rating", "best rating", "fully evaluated", "runs", "status"],
            rows,
            "leaderboard",
        )
        if rows
        else '<p class="muted">No agents yet.</p>'
    )
    top = [a.name for a in ranked(agents, objective, initial)[:TOP_AGENTS]]
    history = charts.rating_history(outcomes, int(rating_runs), initial)
    start = min((t for points in history.values() for t, _ in points), default=0.0)
    series = [
        (name, [((t - start) / 60, r) for t, r in history[name]]) for name in top if name in history
    ]
    chart = charts.line_chart(series, css_id="ratings", x_label="minutes since the first run shown",
                              title="ratings of the top agents over time")  # fmt: skip
    body = f"{about}<h2>Leaderboard</h2>{board}<h2>Ratings over time (top agents)</h2>{chart}"
    return _page(
        env.display_name, body + "<h2>Recent runs</h2>" + _runs_table(recent, show_agent=True)
    )


def agent_page(
    env: EnvRow,
    agent: AgentRow,
    runs: Sequence[RunRow],
    outcomes: Sequence[tuple[str, float, float]] = (),
) -> str:
    """An agent: its rating, its rating over its runs and the outcomes of its recent runs (from
    ``outcomes``, its finished runs oldest first), and its recent runs."""
    facts = [
        ("arena env", _link(env.display_name, "env", env.name)),
        ("rating", _e(_rating(agent.rating))),
        ("best rating", _e(_rating(agent.best_rating))),
        ("fully evaluated", "yes" if agent.fully_evaluated else "no"),
        ("finished runs", _e(agent.total_runs)),
        ("status", "blocked" if agent.blocked else "active"),
    ]
    table = _table(["", ""], ([_e(k), v] for k, v in facts), "agent")
    settings = env.settings
    initial = float(settings.get("initial_rating", 0.0))
    history = charts.rating_history(outcomes, int(settings.get("rating_runs", 50)), initial)
    points = [(i + 1, r) for i, (_, r) in enumerate(history.get(agent.name, []))]
    rating = charts.line_chart([(agent.name, points)], css_id="rating", x_label="finished run",
                               title=f"rating of {agent.name} over its runs")  # fmt: skip
    recent = [value for _, _, value in outcomes[-50:]]
    spread = charts.bar_chart(recent, css_id="outcomes",
                              title="outcomes of the last 50 finished runs")  # fmt: skip
    body = (
        f"{table}<h2>Rating over its runs</h2>{rating}"
        f"<h2>Outcomes of its last {len(recent)} finished runs</h2>{spread}"
    )
    return _page(
        f"Agent {agent.name}", f"{body}<h2>Recent runs</h2>" + _runs_table(runs, show_agent=False)
    )


def run_page(
    env: EnvRow, run: RunRow, steps: Sequence[StepRow], messages: Sequence[MessageRow]
) -> str:
    """A run with its full history."""
    by_act: dict[int, list[MessageRow]] = defaultdict(list)
    for message in messages:
        by_act[message.act_no].append(message)

    def said(act_no: int) -> str:
        return "<br>".join(
            f'<span class="{_e(m.type)}">{_e(m.type)}: {_e(m.content)}</span>'
            for m in by_act.get(act_no, [])
        )

    rows = [
        [_e(s.act_no), _json(s.percept), _json(s.action), _e(f"{s.reward:g}"), said(s.act_no)]
        for s in steps
    ]
    last = "final" if run.finished else f"waiting for action {run.act_no}"
    rows.append([_e(run.act_no), _json(run.percept), f'<span class="muted">{_e(last)}</span>', "",
                 said(run.act_no)])  # fmt: skip
    facts = [
        ("arena env", _link(env.display_name, "env", env.name)),
        ("agent", _link(run.agent, "agent", env.name, run.agent)),
        ("status", _e(_status(run))),
        ("outcome", _json(run.outcome) if run.outcome is not None else "-"),
        ("actions", _e(run.act_no)),
        ("return", _e(f"{run.episode_return:g}")),
        ("started", _e(_when(run.created))),
        ("ended", _e(_when(run.ended))),
    ]
    body = _table(["", ""], ([_e(k), v] for k, v in facts), "run")
    shown = steps[:_TIMELINE_STEPS]
    line = charts.timeline(
        [s.reward for s in shown],
        [[m.type for m in by_act.get(i, [])] for i in range(len(shown) + 1)],
        css_id="timeline",
    )
    body += f"<h2>Step by step</h2>{line}<h2>History</h2>"
    body += _table(["#", "percept", "action", "reward", "messages"], rows, "history")
    return _page(f"Run {run.id}", body)


def error_page(status: int, title: str, description: str) -> str:
    """An error as a page."""
    return _page(f"{status} {title}", f'<p class="error">{_e(description)}</p>')
