"""The arena (seed 003): an organizer hosts envs, participants' agents play many runs of them
over HTTP, and the server records every run and rates every agent.

This package's top level is the client (it needs only ``requests``)::

    import envwire.arena

    summary = envwire.arena.run("alice.json", lambda percept: 1, run_limit=50)

The server side lives in the submodules: :mod:`~envwire.arena.protocol` (the act protocol,
sans-IO), :mod:`~envwire.arena.rules` (scheduling and ratings), :mod:`~envwire.arena.core`
(requests over the store and the games), :mod:`~envwire.arena.store` (SQLite),
:mod:`~envwire.arena.games` (any env as run-based game), :mod:`~envwire.arena.web` (the HTTP
endpoints and pages), :mod:`~envwire.arena.cli` (``envwire arena ...``). See ``docs/arena.md``.
"""

from envwire.arena.client import (
    Agent,
    AgentConfig,
    ArenaRequestError,
    Connection,
    RequestInfo,
    RunSummary,
    load_config,
    run,
)

__all__ = [
    "Agent",
    "AgentConfig",
    "ArenaRequestError",
    "Connection",
    "RequestInfo",
    "RunSummary",
    "load_config",
    "run",
]
