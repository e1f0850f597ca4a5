"""The session table: every live session of one server, whatever front end opened it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping
from typing import Any

from envwire.errors import CapacityError, EnvCapacityError, EnvwireError
from envwire.registry import Catalog
from envwire.runtime import make_worker
from envwire.server.tally import SESSIONS, Tally
from envwire.session import Session, SessionObserver, WorkerFactory

__all__ = ["SessionTable", "summary"]


class SessionTable:
    """Opens sessions for catalog ids, enforces capacity, frees them, reaps idle ones.

    Args:
        catalog: the envs served.
        capacity: most sessions open at once (None = no limit).
        monitor_root: directory under which Monitor requests may write (None disables Monitor).
        worker_factory: where envs live (default :func:`envwire.runtime.make_worker`: inline or
            in worker processes, as each spec's isolation says).
        max_workers: most workers one vector session may use (default: what the runtime allows:
            the cores for worker processes, the cluster's CPUs for Ray actors).
        observer: told of every session opened, refused, stepped and closed (metrics, logs,
            recording); None for none.
        tally: the counts of the server's other workers (``--workers``): ``capacity`` bounds
            the sessions of every worker together.
    """

    def __init__(
        self,
        catalog: Catalog,
        *,
        capacity: int | None = None,
        monitor_root: str | None = None,
        worker_factory: WorkerFactory = make_worker,
        max_workers: int | None = None,
        observer: SessionObserver | None = None,
        tally: Tally | None = None,
    ) -> None:
        self.observer = observer
        self.tally = tally
        self.catalog = catalog
        self.max_workers = max_workers
        self.capacity = capacity
        self.monitor_root = monitor_root
        self.worker_factory = worker_factory
        self._sessions: dict[str, Session] = {}
        self._opening = 0
        self._per_env: dict[str, int] = {}  # sessions held to their env's own limit
        self._counted: set[str] = set()
        self._lock = threading.Lock()

    def open(
        self,
        env_id: str,
        *,
        num_envs: int = 1,
        autoreset_mode: str | None = None,
        workers: int = 1,
        kwargs: Mapping[str, Any] | None = None,
        front_end: str = "",
        peer: str = "",
        limit: int | None = None,
        transient: bool = False,
    ) -> Session:
        """A new session for ``env_id`` ('' opens a session with no env).

        With an ``autoreset_mode`` the session steps ``num_envs`` copies at once (a vector
        session), split over up to ``workers`` workers (capped by ``max_workers``).
        ``kwargs`` are constructor arguments the client asks for: only those the env's spec
        opens to clients (``EnvSpec.client_kwargs``) are accepted. ``front_end`` and ``peer``
        (who opened it, from where) label the session for observers.

        The env's own limit (``EnvSpec.max_sessions``, or ``limit`` when the spec sets none)
        bounds its sessions; a ``transient`` session (one request's worth, which openenv-core
        would serve with a throwaway env outside its count) is not held to it.

        Raises:
            UnknownEnvError: not served here (with did-you-mean).
            EnvCapacityError: the env holds as many sessions as it may.
            CapacityError: the table is full.
            EnvwireError: making the env failed.
        """
        try:
            spec = self.catalog.lookup(env_id) if env_id else None
            if spec is not None and kwargs:
                spec = spec.with_client_kwargs(kwargs)
            own = None if spec is None or transient else spec.max_sessions or limit
            with self._lock, self._everyone():
                open_now = len(self._sessions) + self._opening
                if self.tally is not None:
                    open_now += self.tally.others(SESSIONS)
                if self.capacity is not None and open_now >= self.capacity:
                    raise CapacityError(
                        f"server is at capacity ({self.capacity} sessions); try again later"
                    )
                if own is not None:
                    active = self._per_env.get(env_id, 0)
                    if active >= own:
                        raise EnvCapacityError(env_id, active, own)
                    self._per_env[env_id] = active + 1
                self._opening += 1
                self._publish()
        except EnvwireError as exc:
            if self.observer is not None:
                self.observer.refused(front_end, env_id, exc)
            raise
        counted = own is not None
        try:
            session = Session(
                spec,
                num_envs=num_envs,
                autoreset_mode=autoreset_mode,
                workers=min(workers, self.max_workers or workers),
                worker_factory=self.worker_factory,
                monitor_root=self.monitor_root,
                observer=self.observer,
                front_end=front_end,
                peer=peer,
            )
        except BaseException as exc:
            with self._lock:
                self._opening -= 1
                self._publish()
                if counted:
                    self._uncount(env_id)
            if isinstance(exc, EnvwireError) and self.observer is not None:
                self.observer.refused(front_end, env_id, exc)
            raise
        with self._lock:
            self._opening -= 1
            self._sessions[session.id] = session
            if counted:
                self._counted.add(session.id)
        return session

    def _everyone(self) -> contextlib.AbstractContextManager[None]:
        """The lock that makes a capacity check and its place one step for every worker."""
        if self.tally is None or self.capacity is None:
            return contextlib.nullcontext()
        return self.tally.locked()

    def _publish(self) -> None:
        """Tell the other workers how many sessions this one holds (under ``_lock``)."""
        if self.tally is not None:
            self.tally.set(SESSIONS, len(self._sessions) + self._opening)

    def _uncount(self, env_id: str) -> None:
        left = self._per_env.get(env_id, 0) - 1
        if left > 0:
            self._per_env[env_id] = left
        else:
            self._per_env.pop(env_id, None)

    def count(self, env_id: str) -> int:
        """How many sessions of ``env_id`` count against its own limit now."""
        return self._per_env.get(env_id, 0)

    def get(self, session_id: str) -> Session | None:
        """The live session with that id, if any."""
        return self._sessions.get(session_id)

    def close(self, session: Session) -> None:
        """Free the session now (idempotent)."""
        with self._lock:
            if self._sessions.pop(session.id, None) is not None and session.id in self._counted:
                self._counted.discard(session.id)
                self._uncount(session.env_id)
            self._publish()
        session.close()

    def close_all(self) -> None:
        """Free every session (server shutdown)."""
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
            self._per_env.clear()
            self._counted.clear()
            self._publish()
        for session in sessions:
            session.close()

    def __len__(self) -> int:
        return len(self._sessions)

    def snapshot(self) -> list[dict[str, Any]]:
        """A summary of every live session."""
        with self._lock:
            sessions = list(self._sessions.values())
        return [summary(s) for s in sessions]


def summary(session: Session) -> dict[str, Any]:
    """A session as JSON (for logs and status pages)."""
    return {
        "id": session.id,
        "env": session.env_id,
        "state": session.state.value,
        "episode": session.episode,
        "step_count": session.step_count,
        "episode_return": session.episode_return,
        "total_steps": session.total_steps,
    }
