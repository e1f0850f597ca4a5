"""The server's side of a Ray cluster: connecting to it, and making Ray workers for sessions.

A :class:`RayRuntime` is the worker factory for envs whose isolation is ``"ray"``. It connects
this process to Ray on first use (or at server start): to ``address`` if given, else to
``RAY_ADDRESS`` if set, else to a local Ray instance it starts. Every ``envwire serve`` process
connected to one cluster is a Ray driver of its own; the actors of its sessions share its fate
(a server that exits takes its actors with it).
"""

from __future__ import annotations

import importlib
import logging
import os
import socket
import threading
import types

from envwire.errors import ConfigError
from envwire.optional import install_line, requires
from envwire.registry import EnvSpec
from envwire.runtime.ray.options import RayOptions
from envwire.runtime.vector import split_sizes
from envwire.session import Worker

__all__ = [
    "CONNECT_TIMEOUT",
    "DEFAULT_PLACE_TIMEOUT",
    "EXTRA_HINT",
    "RayRuntime",
    "require_ray",
]

#: Seconds a session waits for the cluster to place its actors before CAPACITY_REACHED.
DEFAULT_PLACE_TIMEOUT = 30.0

#: Seconds to wait for a cluster's head to accept a connection (Ray itself would wait minutes).
CONNECT_TIMEOUT = 5.0

#: How to get Ray, for error messages.
EXTRA_HINT = install_line("ray")

_CONNECT_LOCK = threading.Lock()


def require_ray() -> types.ModuleType:
    """The ``ray`` module.

    Raises:
        MissingExtraError: Ray is not installed (a ConfigError and an ImportError whose
            message names the extra that installs it).
    """
    with requires("ray", "isolation 'ray'"):
        ray = importlib.import_module("ray")
    return ray


class RayRuntime:
    """Makes Ray workers for sessions, on one Ray cluster.

    Args:
        address: the cluster (``host:port`` of its head, or ``ray://host:10001``); None means
            ``RAY_ADDRESS`` if set, else a local Ray started on first use.
        place_timeout: seconds a session waits for its actors to be placed before it is
            refused with :class:`~envwire.errors.CapacityError`.
    """

    def __init__(
        self, address: str | None = None, place_timeout: float = DEFAULT_PLACE_TIMEOUT
    ) -> None:
        if place_timeout <= 0:
            raise ConfigError(f"place timeout must be positive, got {place_timeout:g}")
        self.address = address
        self.place_timeout = place_timeout

    @property
    def target(self) -> str:
        """Where :meth:`connect` goes: the address, ``RAY_ADDRESS``, or ``local``."""
        return self.address or os.environ.get("RAY_ADDRESS") or "local"

    def connect(self) -> str:
        """Connect this process to the cluster, unless it already is; return the cluster's
        (GCS) address.

        A process already connected to Ray (a Ray driver embedding envwire, or a test) keeps its
        connection, whatever ``address`` says.

        Raises:
            ConfigError: Ray is not installed, or the cluster cannot be reached.
        """
        ray = require_ray()
        with _CONNECT_LOCK:
            if not ray.is_initialized():
                _check_reachable(self.target)
                json_logs = _logs_as_json()
                if json_logs:
                    _adopt_ray_logs()
                try:
                    # JSON logs: actors' stdout and stderr stay in Ray's session log files
                    # rather than being printed here as "(pid=...) ..." lines of plain text.
                    options = {"log_to_driver": False} if json_logs else {}
                    ray.init(address=self.target, namespace="envwire", **options)
                except Exception as exc:  # Ray raises ConnectionError, ValueError, RuntimeError
                    raise ConfigError(
                        f"cannot connect to the Ray cluster at {self.target}: {exc}"
                    ) from exc
                if json_logs:  # ray.init may give its loggers handlers again
                    _adopt_ray_logs()
            return str(ray.get_runtime_context().gcs_address)

    def max_workers(self) -> int:
        """The most actors one vector session may have: the cluster's CPUs (at least 1), so that
        a client cannot ask one server for more actors than the cluster could run."""
        ray = require_ray()
        return max(1, int(ray.cluster_resources().get("CPU", 1)))

    def make_worker(
        self, spec: EnvSpec, num_envs: int = 1, mode: str | None = None, workers: int = 1
    ) -> Worker:
        """Ray worker(s) for one session: one actor for one env, or with an autoreset ``mode``
        ``num_envs`` copies split over ``workers`` actors (a ``RayGroup``; at most
        :meth:`max_workers`), placed together by a placement group when the env's
        ``[env.ray]`` names a strategy.

        Raises:
            CapacityError: the cluster did not place the actors within ``place_timeout``.
            ConfigError: Ray is missing or unreachable, or the env's Ray options are wrong.
            EnvwireError: making the env failed, as for any worker.
        """
        self.connect()
        # The worker module imports Ray itself: only once a session is placed on it.
        from envwire.runtime.ray.worker import RayGroup, RayWorker, release, reserve, unreserve

        options = RayOptions.from_table(spec.id, spec.ray)
        sizes = split_sizes(num_envs, min(workers, self.max_workers())) if mode else [1]
        if len(sizes) == 1:
            return RayWorker(spec, num_envs, mode, options=options).start(self.place_timeout)
        group = reserve(spec, options, len(sizes), self.place_timeout) if options.strategy else None
        started = [
            RayWorker(
                spec,
                size,
                mode,
                options=options,
                placement=(group, index) if group is not None else None,
            )
            for index, size in enumerate(sizes)
        ]
        try:
            for worker in started:
                worker.start(self.place_timeout)
            return RayGroup(started, sizes, group)
        except BaseException:
            release(started, graceful=False)
            unreserve(group)
            raise


def _logs_as_json() -> bool:
    """Whether this process logs JSON lines (``--log-format json``): a root handler's formatter
    says so with a true ``json_lines`` attribute (the runtime does not import the observe
    layer that defines it)."""
    return any(getattr(h.formatter, "json_lines", False) for h in logging.getLogger().handlers)


def _adopt_ray_logs() -> None:
    """Send the records of Ray's loggers to the root's handlers (JSON lines).

    Ray gives its ``ray`` logger (and some of its children) a stderr handler of its own with a
    plain-text format, and stops them from propagating; those handlers are removed and the
    records propagate, so every line on stderr stays one JSON object.
    """
    names = [n for n in logging.root.manager.loggerDict if n == "ray" or n.startswith("ray.")]
    for name in ["ray", *names]:
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.propagate = True


def _check_reachable(target: str) -> None:
    """Fail fast when a ``host:port`` head does not accept connections: ``ray.init`` retries an
    unreachable address for minutes. Other targets (``local``, ``auto``, ``ray://...``) are
    left to Ray.

    Raises:
        ConfigError: nothing accepts connections at ``target`` within :data:`CONNECT_TIMEOUT`.
    """
    host, sep, port = target.rpartition(":")
    if not sep or "://" in target or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as exc:
        raise ConfigError(
            f"cannot connect to the Ray cluster at {target}: {exc} (is `ray start --head` "
            "running there?)"
        ) from None
