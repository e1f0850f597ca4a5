"""One client's env: the session state machine every front end drives.

States and the requests each allows are data (:data:`ALLOWED`); :meth:`Session.handle` checks the
table, then dispatches with ``match``. A request the state does not allow raises
:class:`~envwire.errors.StateError` naming the request, the session and the state.

    NEW ──Reset──> RUNNING ──Step(done)──> ENDED ──Reset──> RUNNING
      env crashed or hung (any state) ──> BROKEN ──Reset (makes a fresh env)──> RUNNING
      Close (any state) ──> CLOSED
"""

from envwire.session.contracts import SessionTap, Worker, WorkerFactory
from envwire.session.session import Session, SessionObserver
from envwire.session.states import ALLOWED, ENV_STEPS_ALLOWED, State, confine

__all__ = [
    "ALLOWED",
    "ENV_STEPS_ALLOWED",
    "Session",
    "SessionObserver",
    "SessionTap",
    "State",
    "Worker",
    "WorkerFactory",
    "confine",
]
