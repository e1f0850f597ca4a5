"""Where env instances live: in the server process (inline) or in worker processes."""

from envwire.runtime.host import EnvHost
from envwire.runtime.workers import InlineWorker, ProcessWorker, Worker, make_worker

__all__ = ["EnvHost", "InlineWorker", "ProcessWorker", "Worker", "make_worker"]
