"""The classes a plugin env of the AISysProj server works with.

A plugin env subclasses :class:`GenericEnvironment`. The server makes one instance per arena env
(``Env(EnvInfo(display_name, identifier), config)``, ``config`` being the JSON value the admin
gave) and calls, for every run:

- ``new_run()`` once: the run's first state (any JSON value);
- ``get_action_request(run_data)`` whenever the agent is asked for an action: an
  :class:`ActionRequest` whose ``content`` is the percept (JSON);
- ``act(action, run_data)`` for each action the agent sends: an :class:`ActionResult`. A
  result without ``new_state`` rejects the action (``message`` says why; the run stays where
  it was); otherwise the run moves to ``new_state``, ``message`` is passed to the agent,
  ``action_extra_info`` is kept in the run's history beside the action, and an ``outcome``
  other than None ends the run;
- ``get_abandon_outcome(run_data)`` when a client abandons a run (envs that allow it).

:class:`RunData` is what a run is: its history of accepted actions, its current state, its
outcome (None while it goes on), its id and its agent's name. States, actions, extra infos and
outcomes are JSON values: they are stored as JSON between calls. What a plugin returns is only
encoded as JSON, so it is typed ``object`` (a plugin's own, narrower types override it cleanly).
What a plugin is given (its config, actions, states, histories, outcomes) is JSON decoded for it,
typed ``Any`` on purpose: the plugin knows their shape and indexes into them, which a type
checker would refuse on a JSON union, and an ``act`` typed for its own actions stays a valid
override.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

from envwire.arena.aisys.interface.env_settings import EnvSettings

__all__ = [
    "AbbreviatedRunData",
    "ActionHistoryEntry",
    "ActionRequest",
    "ActionResult",
    "AgentDataSummary",
    "EnvData",
    "EnvInfo",
    "GenericEnvironment",
    "RunData",
]


@dataclass(frozen=True)
class ActionResult:
    """What an action did. ``new_state`` None means the action was refused (``message``: why)."""

    new_state: object = None
    message: str | None = None
    action_extra_info: object = None
    outcome: object = None

    @classmethod
    def error(cls, message: str) -> ActionResult:
        """A refused action, with the reason for the agent."""
        return cls(new_state=None, message=message)


@dataclass(frozen=True)
class ActionRequest:
    """What the agent is shown when asked for an action (any JSON value)."""

    content: object


@dataclass(frozen=True)
class ActionHistoryEntry:
    """An accepted action and the extra information its result kept."""

    action: Any
    extra_info: Any


@dataclass(frozen=True)
class RunData:
    """A run as the env sees it."""

    action_history: list[ActionHistoryEntry]
    state: Any
    outcome: Any
    run_id: int
    agent_name: str


@dataclass(frozen=True)
class AbbreviatedRunData:
    """A run in a list: id, outcome (None while it goes on), agent."""

    run_id: int
    outcome: Any
    agent_name: str


@dataclass(frozen=True)
class AgentDataSummary:
    """An agent as its page shows it (``agent_rating`` is the best rating)."""

    agent_name: str
    agent_rating: float
    current_agent_rating: float
    recent_runs: list[AbbreviatedRunData]
    total_number_of_runs: int
    fully_evaluated: bool


@dataclass(frozen=True)
class EnvData:
    """An env as its page shows it: its agents and its recent runs."""

    agents: list[AgentDataSummary]
    recent_runs: list[AbbreviatedRunData]


@dataclass(frozen=True)
class EnvInfo:
    """The arena env an instance serves: its display name and identifier."""

    display_name: str
    identifier: str


class GenericEnvironment(abc.ABC):
    """The base class of plugin envs (see the module docstring for the calls)."""

    settings: EnvSettings = EnvSettings()

    def __init__(self, env_info: EnvInfo, config_json: Any) -> None:
        self.env_info = env_info
        self.config_json = config_json

    @abc.abstractmethod
    def act(self, action: Any, run_data: RunData) -> ActionResult:
        """Apply an action to a run (refusals are results, not exceptions)."""

    @abc.abstractmethod
    def new_run(self) -> object:
        """The first state of a new run."""

    @abc.abstractmethod
    def get_action_request(self, run_data: RunData) -> ActionRequest:
        """What the agent is shown for the run's next action."""

    def get_abandon_outcome(self, run_data: RunData) -> object:
        """The outcome of a run the client abandons (envs that allow abandoning override it)."""
        raise NotImplementedError(f"{type(self).__name__} does not define an abandon outcome")

    def view_run(self, run_data: RunData) -> str:
        """An HTML page of a run; envwire shows its own run page when an env has none."""
        raise NotImplementedError(f"{type(self).__name__} has no run page")

    def view_agent(self, agent_data: AgentDataSummary) -> str:
        """An HTML page of an agent (envwire shows its own)."""
        raise NotImplementedError(f"{type(self).__name__} has no agent page")

    def view_env(self, env_data: EnvData) -> str:
        """An HTML page of the env (envwire shows its own leaderboard)."""
        raise NotImplementedError(f"{type(self).__name__} has no env page")
