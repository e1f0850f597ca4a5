"""dm_env specs and values in their Gymnasium form, by Shimmy's rules.

The rules are those of Shimmy's dm_control compatibility (``shimmy.dm_control_compatibility``),
so that an env served by envwire looks to a Gymnasium agent as it would through Shimmy:

| dm_env spec | Gymnasium space |
|---|---|
| a mapping of specs | ``Dict`` (Gymnasium's key order, sorted, as Shimmy gets it) |
| ``DiscreteArray(n)`` | ``Discrete(n)`` |
| ``BoundedArray`` | ``Box(minimum, maximum)`` broadcast to the shape, in the spec's dtype |
| ``Array`` of integers | ``Box`` from the dtype's least to its greatest value |
| ``Array`` of floats | ``Box(-inf, inf)`` |
| ``Array`` of bools | ``Box(0, 1)`` of bool |

Beyond Shimmy: tuples and lists of specs are ``Tuple`` spaces. ``StringArray`` specs (and
anything else) have no Gymnasium space: :func:`space_of` refuses them with :class:`ConfigError`.

Values follow the specs: a Gymnasium observation is the env's with every leaf an array of the
leaf spec's dtype (a ``Discrete`` leaf an ``int64`` scalar, as Gymnasium samples are); an action
goes back to the env in the structure of its action spec, every leaf cast to the spec's dtype.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import dm_env
import numpy as np
from dm_env import specs
from gymnasium import spaces

from envwire.errors import ConfigError

__all__ = ["DmSpecs", "GymValue", "SpecTree", "one_number", "space_of", "to_dm", "to_gym"]

#: A dm_env spec structure: an ``Array`` spec (``BoundedArray``, ``DiscreteArray``, ...), or
#: a mapping, tuple or list of such structures.
SpecTree: TypeAlias = "specs.Array | Mapping[str, SpecTree] | tuple[SpecTree, ...] | list[SpecTree]"
#: A value in Gymnasium's form of a spec structure: arrays (an ``int64`` scalar for a
#: ``DiscreteArray``), in dicts and tuples.
GymValue: TypeAlias = "np.ndarray[Any, Any] | np.int64 | dict[str, GymValue] | tuple[GymValue, ...]"


@dataclass(frozen=True, slots=True)
class DmSpecs:
    """An env's own specs, exactly as its ``*_spec()`` methods give them.

    Attributes:
        observation, action: nested structures (mappings, tuples) of ``dm_env.specs.Array``.
        reward, discount: the same for rewards and discounts.
    """

    observation: SpecTree
    action: SpecTree
    reward: SpecTree
    discount: SpecTree

    @classmethod
    def of(cls, env: dm_env.Environment) -> DmSpecs:
        """The specs of ``env`` (a ``dm_env.Environment``)."""
        return cls(
            env.observation_spec(), env.action_spec(), env.reward_spec(), env.discount_spec()
        )


def space_of(spec: SpecTree, where: str = "spec") -> spaces.Space[Any]:
    """The Gymnasium space of a dm_env spec (see the module docstring).

    Args:
        spec: a spec, or a mapping, tuple or list of them.
        where: how errors name the spec ("observation spec", ...).

    Raises:
        ConfigError: a spec with no Gymnasium space (``StringArray``, an unknown class, a
            mapping with a key that is not a string).
    """
    if isinstance(spec, Mapping):
        subspaces = {}
        for key, sub in spec.items():
            if not isinstance(key, str):
                raise ConfigError(f"{where}: key {key!r} is not a string")
            subspaces[key] = space_of(sub, f"{where}[{key!r}]")
        return spaces.Dict(subspaces)
    if isinstance(spec, tuple | list):
        return spaces.Tuple([space_of(sub, f"{where}[{i}]") for i, sub in enumerate(spec)])
    if isinstance(spec, specs.DiscreteArray):
        return spaces.Discrete(int(spec.num_values))
    if isinstance(spec, specs.BoundedArray):
        low = np.broadcast_to(spec.minimum, spec.shape)
        high = np.broadcast_to(spec.maximum, spec.shape)
        return spaces.Box(low, high, spec.shape, spec.dtype)
    if type(spec) is specs.Array:
        dtype = np.dtype(spec.dtype)
        if dtype.kind in "iu":
            limits = np.iinfo(dtype)
            return spaces.Box(limits.min, limits.max, spec.shape, dtype)
        if dtype.kind == "f":
            return spaces.Box(-np.inf, np.inf, spec.shape, dtype)
        if dtype.kind == "b":
            return spaces.Box(0, 1, spec.shape, dtype)
    raise ConfigError(f"{where}: {spec!r} has no Gymnasium space")


def one_number(spec: object, where: str, what: str) -> None:
    """Check that values of ``spec`` (a reward or discount spec) are one number each.

    Raises:
        ConfigError: a nested spec, or one whose shape holds more than one element.
    """
    if not isinstance(spec, specs.Array) or int(np.prod(spec.shape)) != 1:
        raise ConfigError(
            f"{where} {spec!r} is not one number: envwire serves dm_env envs whose {what} "
            "are scalars (a Gymnasium reward is one number, and one discount decides between "
            "terminated and truncated)"
        )


def to_gym(value: Any, spec: SpecTree) -> GymValue:
    """An env's observation in the Gymnasium form of ``spec``.

    ``value`` is nested as ``spec`` is (its structure is only known at run time).
    """
    if isinstance(spec, Mapping):
        return {key: to_gym(value[key], spec[key]) for key in value}
    if isinstance(spec, tuple | list):
        return tuple(to_gym(item, sub) for item, sub in zip(value, spec, strict=True))
    if isinstance(spec, specs.DiscreteArray):
        return np.int64(value)
    return np.asarray(value, spec.dtype)


def to_dm(value: Any, spec: SpecTree) -> object:
    """A Gymnasium action in the structure and dtypes of the env's action ``spec``.

    ``value`` is nested as the Gymnasium form of ``spec`` is (checked against the action
    space before it comes here).
    """
    if isinstance(spec, Mapping):
        mapping = collections.OrderedDict if isinstance(spec, collections.OrderedDict) else dict
        return mapping((key, to_dm(value[key], sub)) for key, sub in spec.items())
    if isinstance(spec, tuple | list):
        return type(spec)(to_dm(item, sub) for item, sub in zip(value, spec, strict=True))
    return np.asarray(value, spec.dtype)
