"""Where env instances live: in the server process (:mod:`.inline`), in a worker process per
session (:mod:`.process`), in a pool of worker processes shared by many sessions
(:mod:`.pool`), or in Ray actors (:mod:`.ray`), each holding an env host (:mod:`.hosts`).

:func:`make_worker` (:mod:`.workers`) is the :class:`~envwire.session.WorkerFactory` the server
gives its sessions; each worker implements :class:`~envwire.session.Worker`.
"""

from envwire.runtime.hosts import EnvHost
from envwire.runtime.inline import InlineWorker
from envwire.runtime.pool import PooledWorker, WorkerPool
from envwire.runtime.process import ProcessWorker
from envwire.runtime.workers import make_worker

__all__ = [
    "EnvHost",
    "InlineWorker",
    "PooledWorker",
    "ProcessWorker",
    "WorkerPool",
    "make_worker",
]
