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
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import quote

from envwire.arena.groups import Group
from envwire.arena.history import CarriedRun, OutcomeRow
from envwire.arena.rows import AgentRow, EnvRow, MessageRow, RunRow, StepRow
from envwire.arena.web import charts
from envwire.protocols.arena import RawJSON

__all__ = [
    "CHART_RUNS",
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
.chart{max-width:100%;height:auto}table.facts{width:auto}table.facts th{font-weight:normal}
"""

#: Rated runs a chart of ratings draws per agent (the last ones).
CHART_RUNS = 500
#: A time or percept the server a run was carried over from did not keep.
_NOT_KEPT = '<span class="muted">not kept by the original server</span>'


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


def _facts(rows: Iterable[tuple[str, str]], css_id: str) -> str:
    """A table of named facts: a name (a row header) and its value (HTML) per row."""
    body = "".join(f'<tr><th scope="row">{_e(k)}</th><td>{v}</td></tr>' for k, v in rows)
    return f'<table id="{css_id}" class="facts"><tbody>{body}</tbody></table>'


def _ended(run: RunRow) -> str:
    if run.finished and run.ended is None:  # carried over from a server that kept no times
        return "not known (carried over)"
    return _when(run.ended)


def _status(run: RunRow) -> str:
    if not run.finished:
        # a run the server started for a reply the agent never answered (a client that
        # stopped at its run limit): the agent's next client plays it first
        return "active" if run.act_no else "waiting for its first action"
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
            _e(_ended(r)),
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


def _ratings_chart(
    top: Sequence[str],
    ratings: Mapping[str, Sequence[tuple[OutcomeRow, float]]],
    order: Mapping[int, int],
) -> str:
    """The top agents' ratings: over time, or over the env's finished runs (numbered as in
    ``order``) when some runs have no time (carried over from a server that kept none)."""
    shown = [(name, ratings.get(name, ())) for name in top]
    timed = all(row.ended is not None for _, points in shown for row, _ in points)
    series: list[tuple[str, list[tuple[float, float]]]] = []
    for name, points in shown:
        if timed:
            line = [(float(row.ended or 0.0), r) for row, r in points]
        else:
            line = [(float(order[row.run]), r) for row, r in points if row.run in order]
        if line:
            series.append((name, line))
    if timed:
        return charts.line_chart(series, css_id="ratings", x_axis="time", x_label="time (UTC)",
                                 title="ratings of the top agents over time")  # fmt: skip
    return charts.line_chart(
        series, css_id="ratings", title="ratings of the top agents over the env's runs",
        x_label="finished runs of the env, in the order they finished (carried-over runs "
        "kept no times)",
    )  # fmt: skip


def env_page(
    env: EnvRow,
    agents: Sequence[AgentRow],
    recent: Sequence[RunRow],
    ratings: Mapping[str, Sequence[tuple[OutcomeRow, float]]] | None = None,
    order: Mapping[int, int] | None = None,
) -> str:
    """The leaderboard of an arena env, the top agents' ratings (``ratings``: per agent, its
    last rated runs with its rating after each, oldest first; ``order``: run id -> its number
    among the env's finished runs), and its recent runs."""
    settings = env.settings
    rating_runs = settings.get("rating_runs", 50)
    objective = str(settings.get("rating_objective", "max"))
    initial = float(settings.get("initial_rating", 0.0))
    board_order = ranked(agents, objective, initial)
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
        for rank, a in enumerate(board_order, 1)
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
    top = [a.name for a in board_order[:TOP_AGENTS]]
    chart = _ratings_chart(top, ratings or {}, order or {})
    body = f"{about}<h2>Leaderboard</h2>{board}<h2>Ratings of the top agents</h2>{chart}"
    return _page(
        env.display_name, body + "<h2>Recent runs</h2>" + _runs_table(recent, show_agent=True)
    )


def agent_page(
    env: EnvRow,
    agent: AgentRow,
    runs: Sequence[RunRow],
    points: Sequence[tuple[OutcomeRow, float]] = (),
) -> str:
    """An agent: its rating, its rating after each of its last rated runs and the outcomes of
    the last 50 (``points``: its last rated runs with its rating after each, oldest first), and
    its recent runs."""
    facts = [
        ("arena env", _link(env.display_name, "env", env.name)),
        ("rating", _e(_rating(agent.rating))),
        ("best rating", _e(_rating(agent.best_rating))),
        ("fully evaluated", "yes" if agent.fully_evaluated else "no"),
        ("finished runs", _e(agent.total_runs)),
        ("status", "blocked" if agent.blocked else "active"),
    ]
    table = _facts(facts, "agent")
    first = max(agent.total_runs - len(points), 0)  # its runs are numbered as it finished them
    line = [(float(first + i + 1), r) for i, (_, r) in enumerate(points)]
    rating = charts.line_chart([(agent.name, line)], css_id="rating",
                               x_label="its finished runs (the rating after each)",
                               title=f"rating of {agent.name} over its runs")  # fmt: skip
    recent = [row.value for row, _ in points[-50:]]
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
    env: EnvRow,
    run: RunRow,
    steps: Sequence[StepRow],
    messages: Sequence[MessageRow],
    *,
    extras: Mapping[int, RawJSON] | None = None,
    carried: CarriedRun | None = None,
    migrated_at: float | None = None,
) -> str:
    """A run with its full history: each action with the percept it answered, its reward, the
    env's extra information about it (a plugin env's ``action_extra_info``: the opponent's
    answer, say), and the messages about it. ``carried``: the run came from another server
    (``migrated_at``), which kept no times and perhaps no percepts."""
    extras = extras or {}
    by_act: dict[int, list[MessageRow]] = defaultdict(list)
    for message in messages:
        by_act[message.act_no].append(message)

    def said(act_no: int) -> str:
        return "<br>".join(
            f'<span class="{_e(m.type)}">{_e(m.type)}: {_e(m.content)}</span>'
            for m in by_act.get(act_no, [])
        )

    unknown = carried is not None and not carried.percepts

    def percept(text: RawJSON) -> str:
        return _NOT_KEPT if unknown else _json(text)

    def extra(act_no: int) -> list[str]:
        if not extras:
            return []
        text = extras.get(act_no)
        return [_json(text) if text is not None else ""]

    rows = [
        [_e(s.act_no), percept(s.percept), _json(s.action), *extra(s.act_no),
         _e(f"{s.reward:g}"), said(s.act_no)]
        for s in steps
    ]  # fmt: skip
    last = "final" if run.finished else f"waiting for action {run.act_no}"
    final = _json(run.percept) if not (unknown and run.finished) else _NOT_KEPT
    rows.append([_e(run.act_no), final, f'<span class="muted">{_e(last)}</span>',
                 *([""] if extras else []), "", said(run.act_no)])  # fmt: skip
    started, ended = _e(_when(run.created)), _e(_when(run.ended))
    if carried is not None:
        moved = f" on {_when(migrated_at)}" if migrated_at is not None else ""
        started = f'{_NOT_KEPT} <span class="muted">(carried over{_e(moved)})</span>'
        ended = _NOT_KEPT if run.finished else ended
    facts = [
        ("arena env", _link(env.display_name, "env", env.name)),
        ("agent", _link(run.agent, "agent", env.name, run.agent)),
        ("status", _e(_status(run))),
        ("outcome", _json(run.outcome) if run.outcome is not None else "-"),
        ("actions", _e(run.act_no)),
        ("return", _e(f"{run.episode_return:g}")),
        ("started", started),
        ("ended", ended),
    ]
    body = _facts(facts, "run")
    shown = steps[:_TIMELINE_STEPS]
    line = charts.timeline(
        [s.reward for s in shown],
        [[m.type for m in by_act.get(i, [])] for i in range(len(shown) + 1)],
        css_id="timeline",
    )
    body += f"<h2>Step by step</h2>{line}<h2>History</h2>"
    headers = ["#", "percept", "action", *(["extra info"] if extras else []), "reward",
               "messages"]  # fmt: skip
    body += _table(headers, rows, "history")
    return _page(f"Run {run.id}", body)


def error_page(status: int, title: str, description: str) -> str:
    """An error as a page."""
    return _page(f"{status} {title}", f'<p class="error">{_e(description)}</p>')
