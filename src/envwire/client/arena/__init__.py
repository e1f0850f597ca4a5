"""Our Python client of the arena protocol (v1), over ``httpx``.

Two ways to play::

    from envwire.client import arena

    arena.run("alice.json", lambda percept: 1, run_limit=100)   # a function

    class Player(arena.Agent):                                   # an object per run
        def get_action(self, percept, info):
            return 1
        def on_finish(self, outcome):
            print(self.run_id, outcome)

    Player.run("alice.json", parallel_runs=True, run_limit=100)

The loop sends the actions for the server's requests, gets the next requests, and goes on until
the run limit is reached. Every ``progress_every`` seconds (10) it logs a progress line at INFO
on the ``envwire.client.arena`` logger (runs finished out of the limit, their mean outcome, runs
per minute), and one when it stops: a program that logs INFO sees long runs move.

Replies with 503 (and lost connections, such as a server restart) are
retried with exponential backoff for up to ``retry_for`` seconds, resending the same actions;
any other error raises :class:`ArenaRequestError` with the server's ``errorname`` and
``description``.

httpx's exceptions stop at :meth:`Connection.act`, the one place that sends: anything of
``httpx.HTTPError`` (no connection, a timeout, a connection lost mid-reply, a broken reply) is
retried as "no answer" and ends as :class:`~envwire.errors.TransportError`; a 200 reply that is
not a JSON object is a :class:`~envwire.errors.ProtocolError`; actions that are not JSON data are
an :class:`~envwire.errors.InvalidArgumentError`, raised before anything is sent.
"""

from envwire.client.arena.connection import (
    AgentConfig,
    ArenaRequestError,
    Connection,
    load_config,
)
from envwire.client.arena.play import Agent, RequestInfo, RunSummary, run

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
