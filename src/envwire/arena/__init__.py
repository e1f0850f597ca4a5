"""The arena app: an organizer hosts envs, participants' agents play many runs of them over
HTTP, and the server records every run and rates every agent.

This package is the server side. Agents play with the client, :mod:`envwire.client.arena`::

    from envwire.client import arena

    summary = arena.run("alice.json", lambda percept: 1, run_limit=50)

The submodules: :mod:`~envwire.arena.rules` (scheduling and ratings), :mod:`~envwire.arena.core`
(requests over the store and the games), :mod:`~envwire.arena.store` (SQLite),
:mod:`~envwire.arena.games` (any env as run-based game), :mod:`~envwire.arena.admin` and
:mod:`~envwire.arena.accounts` (envs, agents, passwords), :mod:`~envwire.arena.settings` and
:mod:`~envwire.arena.opening` (per-env settings, the arena a server opens),
:mod:`~envwire.arena.cli` (``envwire arena ...``). The act protocol's codec is
:mod:`envwire.protocols.arena`; the HTTP endpoints, pages and ASGI app are
:mod:`envwire.arena.web`. See ``docs/arena/index.md``.
"""

__all__: list[str] = []
