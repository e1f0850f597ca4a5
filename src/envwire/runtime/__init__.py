"""Where env instances live: in the server process (inline) or in worker processes.

:func:`make_worker` is the :class:`~envwire.session.WorkerFactory` the server gives its
sessions; each worker implements :class:`~envwire.session.Worker`.
"""

from envwire.runtime.hosts import EnvHost
from envwire.runtime.workers import InlineWorker, ProcessWorker, make_worker

__all__ = ["EnvHost", "InlineWorker", "ProcessWorker", "make_worker"]
