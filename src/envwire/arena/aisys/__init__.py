"""The AISysProj course server, as a source for envwire's arena: what a course needs to switch.

- :mod:`.plugins` and :mod:`.game`: env plugins written for that server's plugin interface
  (:mod:`.interface`) played as arena games;
- :mod:`.database` and :mod:`.migrate`: the reader of that server's SQLite database and the
  migration of its envs, accounts, ratings, runs and groups into an arena database;
- :mod:`.configs`: the course's agent config files ``{agent, pwd, env, url}``, imported with
  their passwords;
- :mod:`.admin`: that server's admin operations over the arena's store (the HTTP routes are
  :mod:`envwire.arena.web.aisys`).

See ``docs/arena/aisys.md``.
"""

__all__: list[str] = []
