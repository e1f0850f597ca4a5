"""Envs on a Ray cluster: each session's env in a Ray actor (isolation ``"ray"``).

Importing this package does not import Ray: :class:`RayOptions` checks a config without it, and
:class:`RayRuntime` imports Ray when it first connects (a clear error names the ``ray`` extra
when it is missing). The actor and worker classes are in :mod:`envwire.runtime.ray.worker`.
"""

from envwire.runtime.ray.cluster import DEFAULT_PLACE_TIMEOUT, RayRuntime, require_ray
from envwire.runtime.ray.options import STRATEGIES, RayOptions

__all__ = ["DEFAULT_PLACE_TIMEOUT", "STRATEGIES", "RayOptions", "RayRuntime", "require_ray"]
