"""Helpers for tests on a real Ray: a local instance, and a look at envwire's actors through
Ray's state API (which needs the dashboard process, so the tests start it)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any


def start_local_ray(**kwargs: Any) -> str:
    """``ray.init`` a fresh local instance (never another user's cluster); its GCS address."""
    import ray

    ray.init(address="local", include_dashboard=True, namespace="envwire", **kwargs)
    return str(ray.get_runtime_context().gcs_address)


@contextlib.contextmanager
def local_ray(num_cpus: int = 2) -> Iterator[str]:
    """A local Ray for a block (a test module's fixture); shut down even if the block fails."""
    address = start_local_ray(num_cpus=num_cpus)
    try:
        yield address
    finally:
        import ray

        ray.shutdown()


def env_actors(address: str, state: str = "ALIVE", detail: bool = False) -> list[Any]:
    """The envwire env actors of the cluster in ``state``, from Ray's state API."""
    from ray.util.state import list_actors

    return list_actors(
        address=address,
        filters=[("class_name", "=", "EnvActor"), ("state", "=", state)],
        detail=detail,
        raise_on_missing_output=False,
    )


def live_placement_groups(address: str) -> list[Any]:
    """The cluster's placement groups that hold or wait for resources (not removed)."""
    from ray.util.state import list_placement_groups

    groups = list_placement_groups(address=address, raise_on_missing_output=False)
    return [group for group in groups if group.state != "REMOVED"]


def eventually(predicate: Callable[[], bool], timeout: float = 15.0) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds pass; its last value."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def no_env_actors(address: str, timeout: float = 15.0) -> bool:
    """Whether every env actor of the cluster is gone (within ``timeout``)."""
    return eventually(lambda: not env_actors(address), timeout)
