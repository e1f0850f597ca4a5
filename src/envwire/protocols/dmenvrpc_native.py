"""A dm_env env's own specs as dm_env_rpc tensors, with no Gymnasium space in between.

:class:`NativeLayout` lays out a nested structure of ``dm_env.specs`` (what an env's
``observation_spec()`` or ``action_spec()`` returns) the way dm_env_rpc's own
``dm_env_utils.dm_env_spec_to_tensor_spec`` would, so that a ``DmEnvAdaptor`` gives back the
env's specs:

| dm_env spec | TensorSpec |
|---|---|
| ``Array`` | its dtype and shape, no bounds |
| ``BoundedArray`` | its dtype and shape; ``min`` / ``max`` as the spec holds them |
| ``DiscreteArray(n)`` | its dtype, shape ``[]``, ``min`` 0, ``max`` n - 1 |

Bounds keep the spec's form (a scalar, or one per element) and infinite values. A mapping lays
its keys out as names, "."-joined when nested (``arm.angle``), in the env's own
order; a tuple or list its indices (``action.0``); a lone spec is named ``prefix``
(``observation`` or ``action``). float16, int16 and uint16 travel as the next wider type and are
narrowed back on arrival, as for Gymnasium spaces.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from dm_env import specs

from envwire.errors import ConfigError, InvalidActionError
from envwire.protocols.dmenvrpc import Leaf, data_type_of, write

__all__ = ["NativeLayout", "native_leaf"]


def _bound(value: Any, dtype: Any, shape: tuple[int, ...]) -> Any:
    array = np.asarray(value, dtype)
    return array if array.ndim == 0 else np.broadcast_to(array, shape).copy()


def native_leaf(spec: Any, name: str, path: tuple[str | int, ...], uid: int) -> Leaf:
    """The leaf of one dm_env spec.

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


class NativeLayout:
    """A nested dm_env spec's tensors (see the module docstring).

    Args:
        spec: the spec (a mapping, tuple or list of specs, or one spec).
        prefix: the name of a lone spec, and the parent of mapping keys that collide with
            ``reserved`` names.
        first_uid: the UID of the first leaf; the others follow in order.
        reserved: names the caller uses beside this layout's (``reward``, ...).

    Raises:
        ConfigError: a key that is not a string or contains ".", or a spec with no tensor form.
    """

    def __init__(
        self, spec: Any, prefix: str, *, first_uid: int = 1, reserved: Iterable[str] = ()
    ) -> None:
        self.spec = spec
        self.prefix = prefix
        top = "" if isinstance(spec, Mapping) else prefix
        self.leaves: list[Leaf] = []
        self._add(spec, top, (), first_uid)
        if top == "" and {leaf.name for leaf in self.leaves} & set(reserved):
            self.leaves.clear()
            self._add(spec, prefix, (), first_uid)
        self.by_uid = {leaf.uid: leaf for leaf in self.leaves}
        self.next_uid = first_uid + len(self.leaves)

    def _add(self, spec: Any, name: str, path: tuple[str | int, ...], uid: int) -> int:
        if isinstance(spec, Mapping):
            for key, sub in spec.items():
                if not isinstance(key, str) or not key or "." in key:
                    raise ConfigError(
                        f"spec key {key!r} cannot be a dm_env_rpc name: keys must be non-empty "
                        "strings without '.' (the protocol's nesting mark)"
                    )
                uid = self._add(sub, f"{name}.{key}" if name else key, (*path, key), uid)
            return uid
        if isinstance(spec, tuple | list):
            for index, sub in enumerate(spec):
                uid = self._add(sub, f"{name}.{index}" if name else str(index), (*path, index), uid)
            return uid
        self.leaves.append(native_leaf(spec, name, path, uid))
        return uid + 1

    def specs(self) -> dict[int, Any]:
        """``TensorSpec`` by UID."""
        return {leaf.uid: leaf.spec() for leaf in self.leaves}

    def write(self, value: Any, target: Any, uids: Iterable[int] | None = None) -> None:
        """Write the leaves of ``value`` into ``target`` (a UID -> Tensor map), each in its
        spec's dtype and shape; ``uids`` picks leaves (all by default; others are skipped)."""
        chosen = self.leaves if uids is None else [self.by_uid[u] for u in uids if u in self.by_uid]
        for leaf in chosen:
            array = np.broadcast_to(np.asarray(leaf.value_of(value), leaf.row.numpy), leaf.shape)
            out = target[leaf.uid]
            out.shape.extend(leaf.shape)
            write(out, array, leaf.row)

    def read(self, tensors: Mapping[int, Any], role: str = "action") -> Any:
        """The value whose leaves are ``tensors``, in the structure and dtypes of the spec.

        Raises:
            InvalidActionError: a leaf is missing, an unknown UID came, or a tensor does not fit
                its spec (wrong data type, shape, or out of range; each message names the UID).
        """
        unknown = [uid for uid in tensors if uid not in self.by_uid]
        if unknown:
            known = ", ".join(f"{leaf.uid} ({leaf.name!r})" for leaf in self.leaves)
            raise InvalidActionError(
                f"{role} uid {unknown[0]} is not in the {role} specs (known: {known})"
            )
        values: dict[int, Any] = {}
        for leaf in self.leaves:
            message = tensors.get(leaf.uid)
            if message is None:
                raise InvalidActionError(
                    f"{role} uid {leaf.uid} ({leaf.name!r}) is missing: this env needs all of "
                    f"its {role}s in every step"
                )
            values[leaf.uid] = leaf.check(message, role).astype(leaf.space.dtype, copy=False)
        return _compose(self.spec, iter(self.leaves), values)


def _compose(spec: Any, leaves: Any, values: Mapping[int, Any]) -> Any:
    if isinstance(spec, Mapping):
        mapping = OrderedDict if isinstance(spec, OrderedDict) else dict
        return mapping((key, _compose(sub, leaves, values)) for key, sub in spec.items())
    if isinstance(spec, tuple | list):
        return type(spec)(_compose(sub, leaves, values) for sub in spec)
    return values[next(leaves).uid]
