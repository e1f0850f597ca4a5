"""``SimpleViewEnv`` and ``SimpleViewAgent``: default pages for plugin envs.

Plugin envs list these as base classes so the server can show an env's leaderboard and an
agent's page. envwire shows its own pages for arena envs (``/env/<env>``, ``/agent/<env>/<a>``);
these methods exist so that such envs import and work, and render a plain page if called.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any

from envwire.arena.aisys.interface.env_interface import AgentDataSummary, EnvData
from envwire.arena.aisys.interface.env_settings import EnvSettings

__all__ = ["SimpleViewAgent", "SimpleViewEnv"]


def _page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title></head><body><h1>{html.escape(title)}</h1>"
        f"{body}</body></html>"
    )


def _table(header: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class SimpleViewEnv:
    """A leaderboard: fully evaluated agents by best rating, then the others by name."""

    settings: EnvSettings

    def view_env(self, env_data: EnvData) -> str:
        """The env's page as HTML."""
        done = [a for a in env_data.agents if a.fully_evaluated]
        done.sort(key=lambda a: a.agent_rating, reverse=self.settings.RATING_OBJECTIVE != "min")
        others = sorted(
            (a for a in env_data.agents if not a.fully_evaluated), key=lambda a: a.agent_name
        )
        info = getattr(self, "env_info", None)
        title = getattr(info, "display_name", "") or "Leaderboard"
        return _page(
            title,
            _table(
                ("Agent", "Best rating", "Current rating"),
                ((a.agent_name, a.agent_rating, a.current_agent_rating) for a in done),
            )
            + _table(
                ("Agent", "Number of runs", "Estimated rating"),
                ((a.agent_name, a.total_number_of_runs, a.current_agent_rating) for a in others),
            ),
        )


class SimpleViewAgent:
    """An agent's ratings and recent runs."""

    settings: EnvSettings

    def view_agent(self, agent_data: AgentDataSummary) -> str:
        """The agent's page as HTML."""
        return _page(
            agent_data.agent_name,
            _table(
                ("Best rating", "Current rating", "Runs", "Fully evaluated"),
                [
                    (
                        agent_data.agent_rating,
                        agent_data.current_agent_rating,
                        agent_data.total_number_of_runs,
                        agent_data.fully_evaluated,
                    )
                ],
            )
            + _table(
                ("Run", "Outcome"),
                ((r.run_id, r.outcome) for r in agent_data.recent_runs),
            ),
        )
