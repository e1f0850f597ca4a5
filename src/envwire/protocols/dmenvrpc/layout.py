"""Specs from spaces: :class:`Layout` turns any Gymnasium space into ``TensorSpec`` leaves with
UIDs and "." nesting, writes samples into tensors and reads them back, and validates actions
tensor by tensor with errors that name the UID (each leaf a :class:`~.leaf.Leaf`)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any, Final

import numpy as np
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from gymnasium import spaces

from envwire.errors import ConfigError, InvalidActionError, InvalidArgumentError, ProtocolError
from envwire.protocols.dmenvrpc.dtypes import BY_ENUM
from envwire.protocols.dmenvrpc.leaf import Leaf, Path, space_leaf
from envwire.protocols.dmenvrpc.tensors import TensorMessage, unpack, write

__all__ = [
    "VECTOR_OBSERVATIONS",
    "WORLD_OBSERVATIONS",
    "Layout",
    "named_parts",
]

#: Names of the observations a world adds beside the env's own, in UID order after them (a
#: top-level Dict key with one of these names moves the env's names under ``observation.``).
WORLD_OBSERVATIONS: Final = ("reward", "discount", "envwire.truncated", "envwire.info")
#: The same for a vector world (CreateWorld ``num_envs``); all but ``envwire.info`` are [N].
VECTOR_OBSERVATIONS: Final = ("reward", "terminated", "truncated", "discount", "envwire.info")


#: What a layout reads from: UID -> Tensor (``StepRequest.actions``, ...).
_Tensors = Mapping[int, TensorMessage]


class Layout:
    """A space's tensors: leaves with UIDs and names, and the way between samples and tensors.

    A Dict at the top lays its keys out as names (``image``, ``arm.angle``); any other space is
    one name, ``prefix`` (``observation``, ``action``), with Tuple elements and nested Dict keys
    after dots (``action.0``). ``reserved`` names (``reward``, ...) that a top-level Dict also
    uses push its keys under ``prefix`` too.

    With ``batch`` = N, the layout carries N samples at once, in the form Gymnasium's vector
    envs batch them (``batch_space``, ``concatenate``): every leaf gets a leading dimension N
    (see :meth:`Leaf.batched`), so N copies travel as one tensor per leaf.

    Args:
        space: the space (of one copy, when batched).
        prefix: the name of a non-Dict space, and the parent of colliding Dict keys.
        first_uid: the UID of the first leaf; the others follow in order.
        reserved: names the caller uses beside this layout's.
        batch: 0, or how many samples travel at once.

    Raises:
        ConfigError: a Dict key is not a string, or contains "." (dm_env_rpc's nesting mark).
    """

    def __init__(
        self,
        space: spaces.Space[Any],
        prefix: str,
        *,
        first_uid: int = 1,
        reserved: Iterable[str] = (),
        batch: int = 0,
    ) -> None:
        self.space = space
        self._lay_out(space, prefix, first_uid, reserved, batch)

    def _lay_out(
        self, tree: object, prefix: str, first_uid: int, reserved: Iterable[str], batch: int
    ) -> None:
        """Make the leaves of ``tree`` (a space; in a ``NativeLayout``, a nest of specs)."""
        self.prefix = prefix
        self.batch = batch
        top = "" if self._keyed(tree) else prefix
        self.leaves: list[Leaf] = []
        self._add(tree, top, (), first_uid)
        names = {leaf.name for leaf in self.leaves}
        if top == "" and (names & set(reserved)):
            self.leaves.clear()
            self._add(tree, prefix, (), first_uid)
        if batch:
            self.leaves = [leaf.batched(batch) for leaf in self.leaves]
        self._index()
        self.next_uid = first_uid + len(self.leaves)

    def _index(self) -> None:
        """What follows from the leaves: the lookups by UID and name, and the short reader."""
        self.by_uid = {leaf.uid: leaf for leaf in self.leaves}
        self.by_name = {leaf.name: leaf for leaf in self.leaves}
        self._scalar = _scalar_reader(self.leaves)

    def _add(self, space: object, name: str, path: Path, uid: int) -> int:
        parts = self._parts(space)
        if parts is None:
            self.leaves.append(self._leaf(space, name, path, uid))
            return uid + 1
        for key, sub in parts:
            uid = self._add(sub, f"{name}.{key}" if name else str(key), (*path, key), uid)
        return uid

    # What a subclass changes to lay out another kind of tree (``NativeLayout``: dm_env specs).

    @staticmethod
    def _keyed(space: object) -> bool:
        """True when the top of ``space`` lays its keys out as names (a Dict)."""
        return isinstance(space, spaces.Dict)

    @staticmethod
    def _parts(space: object) -> Iterable[tuple[str | int, object]] | None:
        """A composite space's parts by key or index; None for a leaf."""
        if isinstance(space, spaces.Dict):
            return named_parts(space.spaces, "Dict key")
        if isinstance(space, spaces.Tuple):
            return enumerate(space.spaces)
        return None

    _leaf = staticmethod(space_leaf)  # the leaf of a non-composite space

    def specs(self) -> dict[int, pb.TensorSpec]:
        """``TensorSpec`` by UID, for ``ActionObservationSpecs``."""
        return {leaf.uid: leaf.spec() for leaf in self.leaves}

    def write(self, sample: object, target: _Tensors, uids: Iterable[int] | None = None) -> None:
        """Write the leaves of ``sample`` into ``target`` (a UID -> Tensor protobuf map).

        Args:
            sample: a sample of the space.
            target: ``StepRequest.actions`` or ``StepResponse.observations``.
            uids: the leaves to write (all by default); UIDs not in this layout are skipped.
        """
        chosen = self.leaves if uids is None else [self.by_uid[u] for u in uids if u in self.by_uid]
        for leaf in chosen:
            array = leaf.to_array(leaf.value_of(sample))
            out = target[leaf.uid]
            out.shape.extend(array.shape)
            write(out, array, leaf.row)

    def read(self, tensors: _Tensors, role: str = "action", *, check: bool = True) -> object:
        """The sample whose leaves are ``tensors`` (every leaf must be there).

        Args:
            tensors: UID -> ``Tensor``.
            role: how messages name the tensors ("action", "observation").
            check: check each tensor against its spec (data type, shape, range) and refuse
                UIDs that are not leaves; without it, extra UIDs are ignored and tensors are
                only unpacked (a client trusts its server's observations).

        Raises:
            InvalidActionError: a leaf is missing, an unknown UID came, or a tensor does not fit
                its spec (each message names the UID).
        """
        if check and self._scalar is not None:
            value = self._scalar(tensors)
            if value is not None:
                return value
        unknown = [uid for uid in tensors if uid not in self.by_uid] if check else ()
        if unknown:
            known = ", ".join(f"{leaf.uid} ({leaf.name!r})" for leaf in self.leaves) or "none"
            raise InvalidActionError(
                f"{role} uid {unknown[0]} is not in the {role} specs (known: {known})"
            )
        values: dict[int, object] = {}
        for leaf in self.leaves:
            message = tensors.get(leaf.uid)
            if message is None:
                raise InvalidActionError(
                    f"{role} uid {leaf.uid} ({leaf.name!r}) is missing: this env needs all of "
                    f"its {role}s in every step"
                )
            array = leaf.check(message, role) if check else unpack(message, role)
            try:
                values[leaf.uid] = leaf.from_array(array)
            except InvalidArgumentError as exc:
                raise InvalidActionError(f"{role} uid {leaf.uid} ({leaf.name!r}): {exc}") from None
        return self.compose(values)

    def compose(self, values: Mapping[int, object]) -> object:
        """Assemble leaf values (by UID) into a sample of the space."""
        leaves = iter(self.leaves)
        return _compose(self.space, leaves, values)

    def matched(self, specs: Mapping[int, Any], role: str) -> Layout:
        """This layout with the UIDs and data types of a server's ``specs``, matched by name.

        A client lays out the Gymnasium space it was told and follows the server's specs,
        which may number and type the same leaves otherwise (a dm_env env's own specs: the
        env's key order, ``int32`` discrete values).

        Raises:
            ProtocolError: a leaf has no spec of its name.
        """
        by_name = {spec.name: (uid, spec) for uid, spec in specs.items()}
        leaves = []
        for leaf in self.leaves:
            if leaf.name not in by_name:
                raise ProtocolError(
                    f"the {role} specs have no {leaf.name!r} (specs: {sorted(by_name)})"
                )
            uid, spec = by_name[leaf.name]
            leaves.append(replace(leaf, uid=uid, row=BY_ENUM[spec.dtype]))
        result = copy.copy(self)
        result.leaves = leaves
        result._index()
        return result


def named_parts(mapping: Mapping[Any, Any], what: str) -> Iterable[tuple[str, Any]]:
    """The items of ``mapping``, whose keys become dm_env_rpc names.

    Raises:
        ConfigError: a key that is not a string, or contains "." (the protocol's nesting mark).
    """
    for key in mapping:
        if not isinstance(key, str) or "." in key:
            raise ConfigError(
                f"{what} {key!r} cannot be a dm_env_rpc name: keys must be strings "
                "without '.' (the protocol's nesting mark)"
            )
    return mapping.items()


def _scalar_reader(leaves: list[Leaf]) -> Callable[[_Tensors], np.generic | None] | None:
    """For a layout that is one bounded scalar (a Discrete action, the common case), a reader
    that takes the usual message (the one UID, the spec's data type, no shape, one in-range
    value) straight to the sample and returns None for anything else, which
    :meth:`Layout.read` then checks the long way (with its errors). None for other layouts."""
    if len(leaves) != 1:
        return None
    leaf = leaves[0]
    space_dtype = getattr(leaf.space, "dtype", None)
    if (
        leaf.kind != "scalar"
        or leaf.batch
        or leaf.path
        or leaf.low is None
        or leaf.high is None
        or space_dtype is None
        or space_dtype != leaf.row.numpy
    ):
        return None
    uid, field, cast = leaf.uid, leaf.row.field, space_dtype.type
    low, high = leaf.low.item(), leaf.high.item()

    def read(tensors: _Tensors) -> np.generic | None:
        if len(tensors) != 1:
            return None
        message = tensors.get(uid)
        if message is None or message.shape or message.WhichOneof("payload") != field:
            return None
        items = getattr(message, field).array
        if len(items) != 1 or not low <= items[0] <= high:
            return None
        value: np.generic = cast(items[0])  # the space dtype's scalar type
        return value

    return read


def _compose(
    space: spaces.Space[Any], leaves: Iterator[Leaf], values: Mapping[int, object]
) -> object:
    if isinstance(space, spaces.Dict):
        return {key: _compose(sub, leaves, values) for key, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_compose(sub, leaves, values) for sub in space.spaces)
    return values[next(leaves).uid]
