"""What one env asks of a Ray cluster: the ``[env.ray]`` table of the server's config.

Pure data, checked when the config is read (no Ray import), so that a typo is a
:class:`~envwire.errors.ConfigError` at start-up rather than an actor that never gets placed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from envwire.errors import ConfigError

__all__ = ["STRATEGIES", "RayOptions"]

#: Ray's placement-group strategies; one names how a vector session's actors are spread.
STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")

_NUMBERS = ("num_cpus", "num_gpus", "memory")


@dataclass(frozen=True, slots=True)
class RayOptions:
    """The resources each of an env's actors asks for, and how a session's actors are placed.

    Attributes:
        num_cpus: CPUs each actor holds while it lives. None keeps Ray's default for actors:
            one that asks for nothing else needs a free CPU to be placed and holds none
            afterwards (so many share a node); one that asks for other resources holds a CPU.
        num_gpus: GPUs (or fractions of one) each actor holds.
        memory: bytes of memory each actor reserves (a scheduling hint; Ray does not cap it).
        resources: custom resources each actor needs, such as ``{"godot": 1}``; only nodes
            started with them (``ray start --resources='{"godot": 4}'``) can take the env.
        runtime_env: Ray's runtime environment for the actors (``pip``, ``env_vars``,
            ``working_dir``, ...).
        strategy: a placement group strategy (``PACK``, ``SPREAD``, ``STRICT_PACK``,
            ``STRICT_SPREAD``) for the actors of one session: they are placed together, all or
            none, one bundle per actor. None places each actor on its own.
    """

    num_cpus: float | None = None
    num_gpus: float | None = None
    memory: int | None = None
    resources: Mapping[str, float] = field(default_factory=dict)
    runtime_env: Mapping[str, Any] = field(default_factory=dict)
    strategy: str | None = None

    @classmethod
    def from_table(cls, env_id: str, table: Mapping[str, Any] | None) -> RayOptions:
        """The options an ``[env.ray]`` table gives (no table: Ray's defaults).

        Raises:
            ConfigError: an unknown key, a value of the wrong kind, or a negative amount; the
                message names the env and the key.
        """
        if not table:
            return cls()
        if not isinstance(table, Mapping):
            raise ConfigError(f"{env_id}: [env.ray] must be a table, got {table!r}")
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(table) - known)
        if unknown:
            raise ConfigError(
                f"{env_id}: unknown [env.ray] keys {unknown} (known: {', '.join(sorted(known))})"
            )
        for key in _NUMBERS:
            if key in table:
                _amount(env_id, key, table[key])
        resources = table.get("resources", {})
        if not isinstance(resources, Mapping):
            raise ConfigError(f"{env_id}: [env.ray] resources must be a table, got {resources!r}")
        for name, amount in resources.items():
            _amount(env_id, f"resources.{name}", amount)
        runtime_env = table.get("runtime_env", {})
        if not isinstance(runtime_env, Mapping):
            raise ConfigError(f"{env_id}: [env.ray] runtime_env must be a table")
        strategy = table.get("strategy")
        if strategy is not None and strategy not in STRATEGIES:
            raise ConfigError(
                f"{env_id}: [env.ray] strategy must be one of {', '.join(STRATEGIES)}, "
                f"got {strategy!r}"
            )
        options = cls(**{key: table[key] for key in table})
        if strategy is not None and not options.bundle():
            raise ConfigError(
                f"{env_id}: a placement strategy needs each actor to reserve something "
                "(num_cpus, num_gpus, memory or resources above 0)"
            )
        return options

    def bundle(self) -> dict[str, float]:
        """What one actor reserves in a placement group: its resources, with one CPU when
        ``num_cpus`` is not given (a bundle cannot be empty, and a vector worker is busy)."""
        wanted = {
            "CPU": 1.0 if self.num_cpus is None else float(self.num_cpus),
            "GPU": float(self.num_gpus or 0),
            "memory": float(self.memory or 0),
            **{name: float(amount) for name, amount in self.resources.items()},
        }
        return {name: amount for name, amount in wanted.items() if amount > 0}

    def actor_options(self, bundled: bool = False) -> dict[str, Any]:
        """Keyword arguments for ``ActorClass.options()``: what the table sets, or with
        ``bundled`` exactly one :meth:`bundle` (an actor in a placement group must fit its
        bundle)."""
        if bundled:
            bundle = self.bundle()
            chosen: dict[str, Any] = {
                "num_cpus": bundle.pop("CPU", 0.0),
                "num_gpus": bundle.pop("GPU", 0.0),
            }
            if "memory" in bundle:
                chosen["memory"] = bundle.pop("memory")
            if bundle:
                chosen["resources"] = bundle
        else:
            chosen = {key: getattr(self, key) for key in _NUMBERS if getattr(self, key) is not None}
            if self.resources:
                chosen["resources"] = dict(self.resources)
        if self.runtime_env:
            chosen["runtime_env"] = dict(self.runtime_env)
        return chosen

    def describe(self) -> str:
        """What one actor needs to be placed, for error messages (Ray places an actor without
        ``num_cpus`` on a node with a CPU free, as its bundle asks)."""
        return ", ".join(f"{name}={amount:.15g}" for name, amount in self.bundle().items())


def _amount(env_id: str, key: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(f"{env_id}: [env.ray] {key} must be a non-negative number, got {value!r}")
