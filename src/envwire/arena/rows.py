"""The rows of the arena database, as the store reads and writes them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envwire.protocols.arena import RawJSON

__all__ = [
    "AgentRow",
    "Batch",
    "EnvRow",
    "Finish",
    "MessageRow",
    "NewRun",
    "RunRow",
    "StepRow",
]


@dataclass(frozen=True, slots=True)
class EnvRow:
    """An arena env: a catalog env id plus settings (a JSON object)."""

    name: str
    env_id: str
    settings: dict[str, Any]
    display_name: str
    description: str
    created: float


@dataclass(frozen=True, slots=True)
class AgentRow:
    """An agent account and its rating."""

    env: str
    name: str
    pwd_hash: str
    blocked: bool
    created: float
    total_runs: int
    rating: float | None
    best_rating: float | None
    fully_evaluated: bool


@dataclass(frozen=True, slots=True)
class RunRow:
    """A run: ``act_no`` actions accepted so far; ``percept`` is what the agent faces now."""

    id: int
    env: str
    agent: str
    seed: int
    act_no: int
    percept: RawJSON
    outstanding: bool
    finished: bool
    episode_return: float
    outcome: RawJSON | None
    how: str | None  # "done" or "abandoned" once finished
    created: float
    ended: float | None


@dataclass(frozen=True, slots=True)
class StepRow:
    """Accepted action ``act_no`` of a run: what the agent saw, what it did, what it got."""

    run: int
    act_no: int
    percept: RawJSON
    action: RawJSON
    reward: float
    at: float


@dataclass(frozen=True, slots=True)
class MessageRow:
    """A message about a run, at the action number it was about."""

    run: int
    act_no: int
    type: str
    content: str
    at: float


@dataclass(frozen=True, slots=True)
class NewRun:
    """A run started by a request."""

    id: int
    seed: int
    percept: RawJSON
    created: float


@dataclass(frozen=True, slots=True)
class Finish:
    """A run that ended, how, and with what outcome (``value``: the outcome as a number)."""

    run: int
    outcome: RawJSON
    value: float | None
    how: str
    at: float


@dataclass
class Batch:
    """Everything one act request changes, written by :meth:`Store.apply` in one transaction."""

    env: str
    agent: str
    new_runs: list[NewRun] = field(default_factory=list)
    steps: list[StepRow] = field(default_factory=list)
    messages: list[MessageRow] = field(default_factory=list)
    progress: dict[int, tuple[int, RawJSON, float]] = field(default_factory=dict)  # act_no, ...
    finished: list[Finish] = field(default_factory=list)
    asked: set[int] = field(default_factory=set)  # runs the reply asks about
    states: dict[int, RawJSON] = field(default_factory=dict)  # plugin envs: a run's state
    extras: list[tuple[int, int, RawJSON]] = field(default_factory=list)  # run, act_no, extra
