"""A dm_env env's own specs as tensors, with no Gymnasium space in between.

:class:`NativeLayout` is a :class:`~envwire.protocols.dmenvrpc.layout.Layout` of a nested
structure of ``dm_env.specs`` (what an env's ``observation_spec()`` or ``action_spec()``
returns), laid out as dm_env_rpc's own ``dm_env_utils.dm_env_spec_to_tensor_spec`` would, so
that ``DmEnvAdaptor`` gives the env's specs back:

| dm_env spec | TensorSpec |
|---|---|
| ``Array`` | its dtype and shape, no bounds |
| ``BoundedArray`` | its dtype and shape; ``min`` / ``max`` as the spec holds them |
| ``DiscreteArray(n)`` | its dtype, shape ``[]``, ``min`` 0, ``max`` n - 1 |

Bounds keep the spec's form (one value, or one per element) and infinite values. A mapping lays
its keys out as names, "."-joined when nested (``arm.angle``), in the env's own order; a tuple
or list its indices (``action.0``); a lone spec is named ``prefix`` (``observation`` or
``action``). float16, int16 and uint16 travel as the next wider type and are narrowed back on
arrival. Values read back have the structure of the spec and each leaf the spec's dtype.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
from dm_env import specs

from envwire.errors import ConfigError
from envwire.protocols.dmenvrpc.dtypes import data_type_of
from envwire.protocols.dmenvrpc.layout import Layout, named_parts
from envwire.protocols.dmenvrpc.leaf import Leaf
from envwire.protocols.dmenvrpc.tensors import Array

__all__ = ["NativeLayout", "native_leaf"]


def _bound(value: npt.ArrayLike, dtype: np.dtype[Any] | None, shape: tuple[int, ...]) -> Array:
    array = np.asarray(value, dtype)
    return array if array.ndim == 0 else np.broadcast_to(array, shape).copy()


def native_leaf(spec: object, name: str, path: tuple[str | int, ...], uid: int) -> Leaf:
    """The leaf of one dm_env spec (its ``space`` is the spec itself).

    Raises:
        ConfigError: a spec of no kind the table knows (``StringArray``, ...).
    """
    if not isinstance(spec, specs.Array) or isinstance(spec, specs.StringArray):
        raise ConfigError(f"{name}: {spec!r} has no dm_env_rpc tensor form here")
    row = data_type_of(spec.dtype)
    shape = tuple(spec.shape)
    low = high = None
    if isinstance(spec, specs.DiscreteArray):
        low, high = np.asarray(0, row.numpy), np.asarray(spec.num_values - 1, row.numpy)
    elif isinstance(spec, specs.BoundedArray):
        low, high = _bound(spec.minimum, row.numpy, shape), _bound(spec.maximum, row.numpy, shape)
    return Leaf(uid, name, path, spec, "array", row, shape, low, high)


class NativeLayout(Layout):
    """A nested dm_env spec's tensors (see the module docstring).

    Args:
        spec: the spec (a mapping, tuple or list of specs, or one spec).
        prefix: the name of a lone spec, and the parent of mapping keys that collide with
            ``reserved`` names.
        first_uid: the UID of the first leaf; the others follow in order.
        reserved: names the caller uses beside this layout's (``reward``, ...).

    Raises:
        ConfigError: a key that is not a string or contains ".", or a spec with no tensor form.

    Attributes:
        spec: the spec laid out. A native layout has no ``space`` (it lays out no Gymnasium
            space), so it does not run :class:`Layout`'s constructor, only its leaf making.
    """

    def __init__(
        self, spec: object, prefix: str, *, first_uid: int = 1, reserved: Iterable[str] = ()
    ) -> None:
        self.spec = spec
        self._lay_out(spec, prefix, first_uid, reserved, 0)

    @staticmethod
    def _keyed(space: object) -> bool:
        return isinstance(space, Mapping)

    @staticmethod
    def _parts(space: object) -> Iterable[tuple[str | int, object]] | None:
        if isinstance(space, Mapping):
            return named_parts(space, "spec key")
        if isinstance(space, tuple | list):
            return enumerate(space)
        return None

    @staticmethod
    def _leaf(space: object, name: str, path: tuple[str | int, ...], uid: int) -> Leaf:
        return native_leaf(space, name, path, uid)

    def compose(self, values: Mapping[int, object]) -> object:
        """Assemble leaf values (by UID) in the structure of the spec."""
        return _compose(self.spec, iter(self.leaves), values)


def _compose(spec: object, leaves: Iterator[Leaf], values: Mapping[int, object]) -> object:
    if isinstance(spec, Mapping):
        mapping = OrderedDict if isinstance(spec, OrderedDict) else dict
        return mapping((key, _compose(sub, leaves, values)) for key, sub in spec.items())
    if isinstance(spec, tuple | list):
        return type(spec)(_compose(sub, leaves, values) for sub in spec)
    return values[next(leaves).uid]
