"""The arena client's loop: it sends the actions for the server's requests, gets the next
requests, and goes on until the run limit is reached; the player is a function (:func:`run`) or
an :class:`Agent` per run.

Every ``progress_every`` seconds the loop logs a progress line at INFO on the
``envwire.client.arena`` logger (runs finished out of the limit, their mean outcome, runs per
minute), and one when it stops.
"""

from __future__ import annotations

import inspect
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, Unpack

import httpx

from envwire.client.arena.connection import AgentConfig, Connection, load_config, run_url
from envwire.jsonio import JsonValue

__all__ = ["Agent", "RequestInfo", "RunSummary", "run"]

# the package's logger (not this module's): one name to turn the client's lines on or off
log = logging.getLogger("envwire.client.arena")


class _Options(TypedDict, total=False):  # the options of _Loop (see run())
    parallel_runs: bool
    run_limit: int | None
    abandon_old_runs: bool
    workers: int
    retry_for: float
    idle_wait: float
    client: httpx.Client | None
    progress_every: float


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What the server asked: action ``action_number`` of run ``run_id``."""

    run_id: str
    action_number: int
    run_url: str


@dataclass
class RunSummary:
    """What a :func:`run` did: requests sent, actions sent, the runs that finished, and the
    runs it was asked about last but did not play (``unplayed``: the server starts runs for a
    reply before it knows the client stops at its run limit; the agent's next client plays
    them first)."""

    requests: int = 0
    actions: int = 0
    finished: dict[str, Any] = field(default_factory=dict)
    abandoned: list[str] = field(default_factory=list)
    unplayed: list[str] = field(default_factory=list)


class _Progress:
    """The progress line of a loop: runs finished (out of the limit), their mean numeric
    outcome (the rating so far, as far as this client saw), runs per minute."""

    def __init__(self, config: AgentConfig, limit: int | None, every: float) -> None:
        self.name = f"arena {config['env']}/{config['agent']}"
        self.limit, self.every = limit, every
        self.started = self.last = time.monotonic()
        self.finished = 0
        self.outcomes: list[float] = []

    def add(self, outcome: object) -> None:
        self.finished += 1
        if isinstance(outcome, int | float) and not isinstance(outcome, bool):
            self.outcomes.append(float(outcome))

    def line(self) -> str:
        share = f"/{self.limit} ({100 * self.finished / self.limit:.0f}%)" if self.limit else ""
        mean = sum(self.outcomes) / len(self.outcomes) if self.outcomes else None
        rating = "" if mean is None else f", mean outcome {mean:.3f}"
        minutes = max(time.monotonic() - self.started, 1e-9) / 60
        return (f"{self.name}: {self.finished}{share} runs finished{rating}, "
                f"{self.finished / minutes:.1f} runs/min")  # fmt: skip

    def tick(self) -> None:
        now = time.monotonic()
        if now - self.last >= self.every and log.isEnabledFor(logging.INFO):
            self.last = now
            log.info("%s", self.line())


def _log_message(message: Mapping[str, Any]) -> None:
    kinds = {"error": logging.ERROR, "warning": logging.WARNING}
    level = kinds.get(str(message.get("type", "")), logging.INFO)
    run_id = message.get("run")
    prefix = f"run {run_id}: " if run_id is not None else ""
    log.log(level, "%s%s", prefix, message.get("content", ""))


class Agent(ABC):
    """Plays one run: :meth:`Agent.run` makes an instance per run the server starts.

    Args:
        run_id: the run this instance plays.
        config: the agent config.
    """

    def __init__(self, run_id: str, config: AgentConfig) -> None:
        self.run_id = run_id
        self.config = config

    # percept, outcome: JSON typed Any on purpose, so that subclasses may annotate them narrowly
    @abstractmethod
    def get_action(self, percept: Any, info: RequestInfo) -> object:
        """The action (JSON data) for ``percept`` (JSON data), the server's request ``info``."""

    def on_finish(self, outcome: Any) -> None:
        """The run ended with ``outcome`` (logged by default)."""
        log.info("run %s finished with outcome %s: %s", self.run_id, outcome, self.run_url)

    def on_message(self, content: str, type: str) -> None:
        """The server said something about this run (logged by default)."""
        _log_message({"type": type, "content": content, "run": self.run_id})

    @property
    def run_url(self) -> str:
        """The run's web page."""
        return run_url(self.config, self.run_id)

    @classmethod
    def run(cls, config: str | Path | Mapping[str, Any], **options: Unpack[_Options]) -> RunSummary:
        """Play with an instance of this class per run; see :func:`run` for ``options``."""
        loaded = load_config(config)
        return _Loop(loaded, _PerRun(cls, loaded), **options).play()


class _Processor(ABC):
    @abstractmethod
    def action(self, percept: JsonValue, info: RequestInfo) -> object: ...

    def finished(self, run_id: str, outcome: JsonValue) -> None:
        log.info("run %s finished with outcome %s", run_id, outcome)

    def message(self, message: Mapping[str, Any]) -> None:
        _log_message(message)

    def active(self, run_ids: set[str]) -> None:
        """The runs still active after a reply (nothing to do by default)."""
        return


class _Function(_Processor):
    def __init__(
        self,
        policy: Callable[..., object],
        on_finish: Callable[[str, Any], None] | None,
        on_message: Callable[[Mapping[str, Any]], None] | None,
    ) -> None:
        self.policy = policy
        self.takes_info = _positional_count(policy) >= 2
        self.on_finish, self.on_message = on_finish, on_message

    def action(self, percept: JsonValue, info: RequestInfo) -> object:
        return self.policy(percept, info) if self.takes_info else self.policy(percept)

    def finished(self, run_id: str, outcome: JsonValue) -> None:
        (self.on_finish or super().finished)(run_id, outcome)

    def message(self, message: Mapping[str, Any]) -> None:
        (self.on_message or super().message)(message)


def _positional_count(function: Callable[..., object]) -> int:
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return 2
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return 2
    return sum(1 for p in parameters if p.kind in kinds)


class _PerRun(_Processor):
    def __init__(self, cls: type[Agent], config: AgentConfig) -> None:
        self.cls, self.config = cls, config
        self.agents: dict[str, Agent] = {}

    def action(self, percept: JsonValue, info: RequestInfo) -> object:
        agent = self.agents.get(info.run_id)
        if agent is None:
            agent = self.agents[info.run_id] = self.cls(info.run_id, self.config)
        return agent.get_action(percept, info)

    def finished(self, run_id: str, outcome: JsonValue) -> None:
        agent = self.agents.pop(run_id, None)
        if agent is None:
            super().finished(run_id, outcome)
        else:
            agent.on_finish(outcome)

    def message(self, message: Mapping[str, Any]) -> None:
        agent = self.agents.get(str(message.get("run")))
        if agent is None:
            super().message(message)
        else:
            agent.on_message(str(message.get("content", "")), str(message.get("type", "info")))

    def active(self, run_ids: set[str]) -> None:
        for run_id in [r for r in self.agents if r not in run_ids]:
            del self.agents[run_id]  # abandoned, or finished in a reply that was lost


class _Loop:
    def __init__(
        self,
        config: AgentConfig,
        processor: _Processor,
        *,
        parallel_runs: bool = True,
        run_limit: int | None = None,
        abandon_old_runs: bool = False,
        workers: int = 1,
        retry_for: float = 300.0,
        idle_wait: float = 1.0,
        client: httpx.Client | None = None,
        progress_every: float = 10.0,
    ) -> None:
        self.config, self.processor = config, processor
        self.progress = _Progress(config, run_limit, progress_every)
        self.parallel_runs = parallel_runs
        self.run_limit = run_limit
        self.abandon_old_runs = abandon_old_runs
        self.workers = max(1, workers)
        self.idle_wait = idle_wait
        self.connection = Connection(config, retry_for=retry_for, client=client)

    def _actions(self, requests_: list[dict[str, Any]]) -> list[dict[str, Any]]:
        infos = [
            RequestInfo(str(r["run"]), int(r["act_no"]), run_url(self.config, str(r["run"])))
            for r in requests_
        ]
        percepts = [r["percept"] for r in requests_]
        if self.workers > 1 and len(requests_) > 1:
            with ThreadPoolExecutor(min(self.workers, len(requests_))) as pool:
                chosen = list(pool.map(self.processor.action, percepts, infos))
        else:
            chosen = [self.processor.action(p, i) for p, i in zip(percepts, infos, strict=True)]
        return [
            {"run": i.run_id, "act_no": i.action_number, "action": a}
            for i, a in zip(infos, chosen, strict=True)
        ]

    def play(self) -> RunSummary:
        with self.connection:
            try:
                return self._play()
            finally:
                log.info("%s (stopped)", self.progress.line())

    def _play(self) -> RunSummary:
        summary = RunSummary()
        actions: list[dict[str, Any]] = []
        to_abandon: list[str] = []
        old: set[str] | None = None
        while True:
            reply = self.connection.act(
                actions, to_abandon=to_abandon, parallel_runs=self.parallel_runs
            )
            summary.requests += 1
            summary.actions += len(actions)
            summary.abandoned += to_abandon
            abandoned, to_abandon = set(to_abandon), []
            requests_ = list(reply.get("action_requests", []))
            if old is None:  # runs left over from an earlier client
                old = {str(r) for r in reply.get("active_runs", [])}
                old -= {str(r["run"]) for r in requests_ if r.get("act_no") == 0}
            for message in reply.get("messages", []):
                self.processor.message(message)
            for run_id, outcome in reply.get("finished_runs", {}).items():
                if run_id not in abandoned:
                    summary.finished[run_id] = outcome
                    self.progress.add(outcome)
                    self.processor.finished(run_id, outcome)
            self.progress.tick()
            self.processor.active({str(r) for r in reply.get("active_runs", [])})
            if self.run_limit is not None and len(summary.finished) >= self.run_limit:
                summary.unplayed = [str(r["run"]) for r in requests_]
                if summary.unplayed:
                    log.info(
                        "run limit reached; runs %s were started and wait for this agent's "
                        "next client",
                        ", ".join(summary.unplayed),
                    )
                break
            if self.abandon_old_runs:
                to_abandon = [str(r["run"]) for r in requests_ if str(r["run"]) in old]
                requests_ = [r for r in requests_ if str(r["run"]) not in old]
                old -= set(to_abandon)
            if not requests_ and not to_abandon:
                log.info("no action requests; waiting %.2g s", self.idle_wait)
                time.sleep(self.idle_wait)
            actions = self._actions(requests_)
        return summary


def run(
    config: str | Path | Mapping[str, Any],
    policy: Callable[..., object],
    *,
    parallel_runs: bool = True,
    run_limit: int | None = None,
    abandon_old_runs: bool = False,
    workers: int = 1,
    on_finish: Callable[[str, Any], None] | None = None,
    on_message: Callable[[Mapping[str, Any]], None] | None = None,
    retry_for: float = 300.0,
    client: httpx.Client | None = None,
    progress_every: float = 10.0,
) -> RunSummary:
    """Play the arena env of ``config`` with ``policy`` until ``run_limit`` runs finished.

    Args:
        config: the agent config file (a path) or its contents.
        policy: ``policy(percept)`` or ``policy(percept, info)`` -> action (JSON data).
        parallel_runs: let the server ask for several runs per request (False: one).
        run_limit: stop after this many runs finished (None: play until interrupted).
        abandon_old_runs: abandon runs left unfinished by an earlier client (the env must
            allow abandoning).
        workers: threads computing the actions of one reply in parallel.
        on_finish: ``on_finish(run_id, outcome)`` for each finished run (default: logged).
        on_message: ``on_message(message)`` for each server message (default: logged).
        retry_for: seconds to keep retrying a request that gets 503 or no answer.
        client: the ``httpx.Client`` to send with (default: one of its own, closed at the
            end); each request still gets a timeout of 120 s.
        progress_every: seconds between two progress lines (INFO, logger
            ``envwire.client.arena``); a last one is logged when the loop stops.

    Raises:
        ArenaRequestError: the server refused a request (wrong password, blocked agent, ...).
        ProtocolError: the server's reply is not a JSON object.
        TransportError: the server did not answer for ``retry_for`` seconds.
        InvalidArgumentError: the config is incomplete, or ``policy`` returned something that
            is not JSON data.
    """
    loaded = load_config(config)
    processor = _Function(policy, on_finish, on_message)
    return _Loop(
        loaded,
        processor,
        parallel_runs=parallel_runs,
        run_limit=run_limit,
        abandon_old_runs=abandon_old_runs,
        workers=workers,
        retry_for=retry_for,
        client=client,
        progress_every=progress_every,
    ).play()
