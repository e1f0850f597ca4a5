"""Which worker a session's env gets: :func:`make_worker`, the
:class:`~envwire.session.WorkerFactory` the server gives its sessions.

- ``inline`` (:mod:`.inline`): in the server process, in the caller's thread;
- ``process`` (:mod:`.process`): a worker process per session;
- ``pool`` (:mod:`.pool`): a slot in one of a few worker processes shared by many sessions;
- ``ray`` (:mod:`.ray`): a Ray actor per session, anywhere on a Ray cluster;
- a vector session with ``workers`` > 1: its copies split over that many process workers
  (:class:`~envwire.runtime.vector.VectorGroup`; for an ``inline`` env, one slice fewer in a
  process and the last stepped by the caller's thread meanwhile), or Ray actors. Pooled envs
  too: such a session asks for cores of its own, so that its slices step at the same time,
  which slots queued behind other sessions' calls in shared processes would not give it.
"""

from __future__ import annotations

import functools
import os
from typing import cast

from envwire.registry import EnvSpec
from envwire.runtime.inline import InlineSlice, InlineWorker
from envwire.runtime.pool import WorkerPool
from envwire.runtime.process import ProcessWorker
from envwire.runtime.ray.cluster import RayRuntime
from envwire.runtime.vector import VectorGroup, split_sizes
from envwire.session import Worker

__all__ = ["make_worker"]


def make_worker(
    spec: EnvSpec,
    num_envs: int = 1,
    mode: str | None = None,
    workers: int = 1,
    *,
    ray: RayRuntime | None = None,
    pool: WorkerPool | None = None,
) -> Worker:
    """The worker ``spec.resolved_isolation`` asks for.

    With an autoreset ``mode``, the worker hosts ``num_envs`` copies as a vector env; with
    ``workers`` > 1 they are split over that many worker processes stepped concurrently (at
    most one per core). Envs with ``ray`` isolation go to Ray actors made by ``ray`` (the
    server's :class:`RayRuntime`; None: one on ``RAY_ADDRESS``, else a local Ray); envs with
    ``pool`` isolation to a slot of ``pool`` (the server's :class:`WorkerPool`; None: one pool
    per process, of one worker process per core).
    """
    if spec.resolved_isolation == "ray":
        return (ray or _default_ray()).make_worker(spec, num_envs, mode, workers)
    workers = min(workers, os.cpu_count() or 1)
    if mode is not None and workers > 1 and num_envs > 1:
        sizes = split_sizes(num_envs, workers)
        # An inline env's last slice is stepped by the caller's own thread (it would be in
        # this process anyway): one process and one hand-off fewer for the same cores.
        here = spec.resolved_isolation == "inline"
        started: list[ProcessWorker | InlineSlice] = []
        try:
            for size in sizes[:-1] if here else sizes:
                started.append(ProcessWorker(spec, size, mode))
            if here:
                started.append(InlineSlice(spec, sizes[-1], mode))
        except BaseException:
            for worker in started:
                worker.close()
            raise
        group = VectorGroup(started, sizes)
        if here:
            cast(InlineSlice, started[-1]).worker.on_hang = group.hung
        return group
    if spec.resolved_isolation == "process":
        return ProcessWorker(spec, num_envs, mode)
    if spec.resolved_isolation == "pool":
        return (pool or _default_pool()).worker(spec, num_envs, mode)
    return InlineWorker(spec, num_envs, mode)


@functools.cache
def _default_pool() -> WorkerPool:
    """The worker pool of sessions made without a server's (one per process)."""
    return WorkerPool()


@functools.cache
def _default_ray() -> RayRuntime:
    """The Ray runtime of sessions made without a server's (one per process)."""
    return RayRuntime()
