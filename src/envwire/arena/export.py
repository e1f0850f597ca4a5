"""``envwire arena export ENV DIR``: an arena env's finished runs as a Minari dataset (needs the
``minari`` extra), in the format ``envwire serve --record`` writes.

The database keeps each run's seed and accepted actions; each run is replayed in a fresh env
(the arena's own replay, which relies on the env being deterministic given its seed) and the
episode written to the dataset ``arena/<env>-v0`` under DIR. Abandoned runs are not whole
episodes and are left out, and so are runs carried over from another server (their seeds are
not known). A progress line goes to the ``envwire.arena.progress`` logger every few seconds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from envwire import messages as m
from envwire import spacecodec
from envwire.arena.admin import resolve_spec
from envwire.arena.errors import NotFoundError
from envwire.arena.progress import EVERY, Progress
from envwire.arena.settings import ArenaEnvSettings
from envwire.arena.store import Store
from envwire.errors import ConfigError
from envwire.observe.episodes import Episode, EpisodeTap
from envwire.optional import requires
from envwire.registry import Catalog
from envwire.session import Session, WorkerFactory

if TYPE_CHECKING:  # imported when exporting: minari is an optional extra
    from envwire.observe.datasets import DatasetWriter

__all__ = ["export_runs"]


def _writer(root: Path) -> DatasetWriter:
    with requires("minari", "exporting runs as datasets"):  # minari is an optional extra
        from envwire.observe.datasets import DatasetWriter
    try:
        return DatasetWriter(root)
    except OSError as exc:
        raise ConfigError(f"cannot write datasets under {root}: {exc}") from exc


def export_runs(
    store: Store,
    env_name: str,
    root: str | Path,
    *,
    worker_factory: WorkerFactory,
    catalog: Catalog | None = None,
    limit: int = 10_000,
    progress_every: float = EVERY,
) -> int:
    """Write the newest ``limit`` finished runs of arena env ``env_name`` as episodes of the
    dataset ``arena/<env_name>-v0`` under ``root``; return how many were written.
    ``progress_every``: seconds between two progress lines.

    Raises:
        NotFoundError: no such arena env.
        ConfigError: the minari extra is missing, ``root`` is not a writable directory, or
            Minari cannot store the env's spaces.
        RecordError: an episode could not be written (the episodes before it are kept).
        EnvwireError: replaying a run failed.
    """
    env = store.env(env_name)
    if env is None:
        raise NotFoundError(f"no arena env {env_name!r}")
    settings = ArenaEnvSettings.build(env.settings)
    spec = resolve_spec(env.env_id, catalog, settings.kwargs)
    writer = _writer(Path(root))
    written: list[Episode] = []
    try:
        carried = {
            int(r[0])
            for r in store.query(
                "SELECT c.run FROM carried_runs c JOIN runs r ON r.id = c.run WHERE r.env = ?",
                (env_name,),
            )
        }
        runs = [
            r
            for r in store.runs(env_name, finished=True, limit=limit)
            if r.how == "done" and r.id not in carried
        ]
        progress = Progress(
            f"export {env_name}", len(runs), "runs replayed", every=progress_every,
            detail=lambda: f"{len(written):,} episodes written",
        )  # fmt: skip
        for run in reversed(runs):  # oldest first
            session = Session(spec, worker_factory=worker_factory)
            try:
                if not writer.supports(session.observation_space, session.action_space):
                    raise ConfigError(f"Minari cannot store the spaces of {env.env_id}")
                finished: list[Episode] = []
                session.tap = EpisodeTap(session, finished.append, lambda env, why: None)
                session.handle(m.Reset(seed=run.seed))
                for text in store.actions(run.id):
                    action = spacecodec.from_json(session.action_space, json.loads(text))
                    session.handle(m.Step(action))
            finally:
                session.close()
            for episode in finished:
                episode.env_id = f"arena/{env_name}"
                writer.write(episode)  # raises on any failure: the command exits non-zero
                written.append(episode)
            progress.advance()
        progress.finish()
    finally:
        writer.close()
    return len(written)
