"""Ray workers: a session's env host in a Ray actor, on whichever node of the cluster fits.

A :class:`RayWorker` is a worker (``call``/``close``, and ``send``/``finish`` to fan out) whose
host (an ``EnvHost`` or a ``VectorHost``, exactly as in a worker process) lives in an
:class:`EnvActor`. Each call is one actor call; results come back through Ray's object store,
where large arrays (over Ray's 100 KiB inline limit) are read in place, zero-copy, rather than
copied through a pipe.

Faults map onto the same errors as process workers:

- the actor cannot be placed within ``place_timeout`` seconds (the cluster lacks the resources)
  -> :class:`CapacityError`, and nothing is left waiting in the cluster;
- a call overruns its timeout -> the actor is killed, :class:`EnvTimeoutError`;
- the actor's process or its whole node dies -> :class:`EnvCrashedError` naming the node.

A vector session split over K actors is a :class:`RayGroup`: a ``VectorGroup`` of K Ray
workers, optionally placed together by a placement group (``PACK``, ``SPREAD``, ...).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

import ray
from ray.exceptions import (
    ActorDiedError,
    GetTimeoutError,
    RayError,
    RayTaskError,
    RuntimeEnvSetupError,
)
from ray.util.placement_group import (
    PlacementGroup,
    placement_group,
    remove_placement_group,
)
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from envwire.errors import (
    CapacityError,
    ConfigError,
    EnvCrashedError,
    EnvError,
    EnvTimeoutError,
    EnvwireError,
)
from envwire.registry import EnvSpec
from envwire.runtime.hosts import EnvHost, VectorHost, make_host
from envwire.runtime.ray.options import RayOptions
from envwire.runtime.vector import VectorGroup

__all__ = ["CLOSE_TIMEOUT", "EnvActor", "RayGroup", "RayWorker", "release", "reserve", "unreserve"]

#: Seconds a closing env gets to close itself (and whatever it started) before it is killed.
CLOSE_TIMEOUT = 2.0


class EnvActor:
    """The Ray actor that owns one env host. Its constructor is trivial, so that being placed
    and making the env are waited for (and timed out) separately."""

    def __init__(self) -> None:
        self.host: EnvHost | VectorHost | None = None

    def where(self) -> tuple[str, str]:
        """This actor's node: (node id, node IP address)."""
        return ray.get_runtime_context().get_node_id(), _node_ip()

    def make(self, spec: EnvSpec, num_envs: int, mode: str | None) -> None:
        """Make the host (an env, or ``num_envs`` copies with an autoreset ``mode``)."""
        self.host = make_host(spec, num_envs, mode)

    def call(self, method: str, args: tuple[object, ...]) -> object:
        """``host.call(method, args)``: envwire errors travel back as they are."""
        assert self.host is not None, "the worker makes the host before its first call"
        return self.host.call(method, args)


#: Makes the error for a call that timed out, from its timeout and method.
_Late = Callable[[float, str], EnvwireError]

# Ray's cluster queries are untyped; these names give them the types they return.
_node_ip: Callable[[], str] = ray.util.get_node_ip_address
_nodes: Callable[[], list[dict[str, Any]]] = ray.nodes
_available: Callable[[], dict[str, float]] = ray.available_resources


@functools.cache
def _actor_class() -> Any:
    """:class:`EnvActor` as a Ray actor class that is never restarted (made on first use)."""
    return ray.remote(max_restarts=0, max_task_retries=0)(EnvActor)


class RayWorker:
    """One env host in one Ray actor.

    The constructor only asks the cluster for the actor; :meth:`start` waits for it to be
    placed and for the env to be made, so several workers can start at once.

    Args:
        spec: the env.
        num_envs: copies (with an autoreset ``mode``: a vector host).
        mode: Gymnasium's autoreset mode, or None for one env.
        options: the env's ``[env.ray]`` resources.
        placement: a placement group and the bundle this actor takes in it.
    """

    def __init__(
        self,
        spec: EnvSpec,
        num_envs: int = 1,
        mode: str | None = None,
        *,
        options: RayOptions | None = None,
        placement: tuple[PlacementGroup, int] | None = None,
    ) -> None:
        self.spec = spec
        self.options = options or RayOptions()
        # calls time out on their own: nothing to report later
        self.on_hang: Callable[[EnvTimeoutError], None] | None = None
        self.node_id = self.node_ip = "?"
        # Ray's object refs and actor handles: Ray is an optional extra, checked as untyped.
        self._pending: Any = None
        chosen = self.options.actor_options(bundled=placement is not None)
        if placement is not None:
            group, index = placement
            chosen["scheduling_strategy"] = PlacementGroupSchedulingStrategy(group, index)
        self._actor: Any = _actor_class().options(**chosen).remote()
        self._placed = self._actor.where.remote()
        self._made = self._actor.make.remote(spec, num_envs, mode)

    def start(self, place_timeout: float) -> RayWorker:
        """Wait until the actor is placed and its env made.

        Raises:
            CapacityError: the cluster did not place the actor within ``place_timeout``.
            EnvTimeoutError: making the env took longer than the spec's ``make_timeout``.
            EnvCrashedError: the actor died while starting.
            EnvwireError: making the env failed (``ConfigError``, ``EnvError``, ...).
        """
        try:
            self.node_id, self.node_ip = self._get(
                self._placed, place_timeout, "placing", late=self._not_placed
            )
            self._get(self._made, self.spec.make_timeout, "make")
        except BaseException:
            self.close(graceful=False)
            raise
        return self

    @property
    def node(self) -> str:
        """The actor's node, as error messages name it: IP and short node id."""
        return f"{self.node_ip} ({self.node_id[:8]})"

    def call(self, method: str, *args: object, timeout: float | None) -> object:
        """Run ``host.method(*args)`` in the actor.

        Raises:
            EnvwireError: what the host raised.
            EnvTimeoutError: no answer within ``timeout`` (the actor is killed).
            EnvCrashedError: the actor or its node died.
        """
        self.send(method, *args)
        return self.finish(method, timeout)

    def send(self, method: str, *args: object) -> None:
        """Start a call without waiting (pair with :meth:`finish`; used to fan out)."""
        if self._actor is None:
            raise EnvCrashedError(f"{self.spec.id}: the env's Ray actor is gone")
        self._pending = self._actor.call.remote(method, args)

    def finish(self, method: str, timeout: float | None) -> object:
        """The result of the call :meth:`send` started."""
        pending, self._pending = self._pending, None
        return self._get(pending, timeout, method)

    def _get(
        self,
        ref: Any,
        timeout: float | None,
        method: str,
        late: _Late | None = None,
    ) -> Any:
        """What the actor call ``ref`` returned (its type is the called method's), mapping
        Ray's failures onto envwire's errors as the module docstring says."""
        try:
            return ray.get(ref, timeout=timeout)
        except GetTimeoutError:
            assert timeout is not None  # ray.get without a timeout waits
            self.close(graceful=False)
            raise (late or self._late)(timeout, method) from None
        except RayTaskError as exc:  # the host raised: its own error, without Ray's wrapping
            cause = exc.cause
            if isinstance(cause, EnvwireError):
                raise cause from None
            raise EnvError.wrapping(f"{self.spec.id}: {method} raised {cause!r}", cause) from None
        except RuntimeEnvSetupError as exc:
            self.close(graceful=False)
            raise ConfigError(
                f"{self.spec.id}: Ray could not set up the env's runtime_env: {_first(exc)}"
            ) from None
        except RayError as exc:  # the actor, its process or its node is gone
            self.close(graceful=False)
            raise EnvCrashedError(
                f"{self.spec.id}: the env's Ray actor on node {self.node} crashed during "
                f"{method} ({_reason(exc, self.node_id)})"
            ) from None

    def _late(self, timeout: float, method: str) -> EnvwireError:
        return EnvTimeoutError(
            f"{self.spec.id}: {method} did not return within {timeout:g} s; "
            f"its Ray actor on node {self.node} was killed"
        )

    def _not_placed(self, timeout: float, method: str) -> EnvwireError:
        return CapacityError(
            f"{self.spec.id}: the Ray cluster has no capacity for the env: it did not place the "
            f"env's actor within {timeout:g} s (it needs {self.options.describe()}; free now: "
            f"{_free_resources()})"
        )

    def close(self, graceful: bool = True) -> None:
        """Free the actor now: with ``graceful``, the env first gets :data:`CLOSE_TIMEOUT`
        seconds to close itself (and whatever it started); then the actor is killed. Never
        raises."""
        release([self], graceful)

    def take_actor(self) -> Any:
        """The actor handle, which this worker gives up (None if it has none)."""
        actor, self._actor = self._actor, None
        return actor


def release(workers: list[RayWorker], graceful: bool = True) -> None:
    """Close the envs of ``workers`` together (each gets the same :data:`CLOSE_TIMEOUT`), then
    kill their actors. Never raises."""
    actors = [a for a in (worker.take_actor() for worker in workers) if a is not None]
    if graceful and actors:
        with contextlib.suppress(Exception):
            closing = [actor.call.remote("close", ()) for actor in actors]
            ray.wait(closing, num_returns=len(closing), timeout=CLOSE_TIMEOUT)
    for actor in actors:
        with contextlib.suppress(Exception):
            ray.kill(actor, no_restart=True)


def _reason(exc: RayError, node_id: str) -> str:
    """Why Ray says the actor died, in one sentence; and whether its node is gone."""
    said = _first(exc, skip=ActorDiedError.BASE_ERROR_MSG)
    return said if _node_alive(node_id) else f"{said}; the node is gone"


def _first(exc: BaseException, skip: str = "") -> str:
    """The first sentence of Ray's explanation (its messages run to many lines)."""
    lines = str(exc).splitlines()
    said = next((x for x in lines if x and not x.startswith("\t") and x != skip), "")
    return said.split(". ")[0].rstrip(".") or type(exc).__name__


def _node_alive(node_id: str) -> bool:
    with contextlib.suppress(Exception):  # the cluster itself may be unreachable
        return any(node["NodeID"] == node_id and node["Alive"] for node in _nodes())
    return False


def _free_resources() -> str:
    with contextlib.suppress(Exception):
        free = _available()
        shown = {k: v for k, v in free.items() if not k.startswith(("node:", "object_store"))}
        return ", ".join(f"{k}={v:.15g}" for k, v in sorted(shown.items())) or "nothing"
    return "unknown"


def reserve(spec: EnvSpec, options: RayOptions, count: int, timeout: float) -> PlacementGroup:
    """A placement group of ``count`` bundles (one per actor) with ``options.strategy``, once
    the cluster has placed it.

    Raises:
        CapacityError: the cluster did not place it within ``timeout`` (it is removed).
    """
    group: PlacementGroup = placement_group(
        [options.bundle()] * count, strategy=options.strategy or "PACK"
    )
    try:
        ray.get(group.ready(), timeout=timeout)
    except GetTimeoutError:
        unreserve(group)
        raise CapacityError(
            f"{spec.id}: the Ray cluster has no capacity for the session: it did not place "
            f"{count} actors ({options.strategy}, each {options.describe()}) within "
            f"{timeout:g} s (free now: {_free_resources()})"
        ) from None
    return group


class RayGroup(VectorGroup[RayWorker]):
    """A vector session's copies split over several Ray workers (see ``VectorGroup``); frees
    their placement group, if any, when it closes."""

    def __init__(
        self, workers: list[RayWorker], sizes: list[int], group: PlacementGroup | None
    ) -> None:
        self.group = group
        super().__init__(workers, sizes, timeout=workers[0].spec.resolved_step_timeout)

    @property
    def nodes(self) -> list[str]:
        """The node id of each worker's actor, in order."""
        return [worker.node_id for worker in self.workers]

    def close(self) -> None:
        release(self.workers)
        unreserve(self.group)
        self.group = None


def unreserve(group: PlacementGroup | None) -> None:
    """Give a placement group's resources back to the cluster (None: nothing). Never raises."""
    if group is not None:
        with contextlib.suppress(Exception):
            remove_placement_group(group)
