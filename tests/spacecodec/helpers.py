"""What the spacecodec tests share: the catalog as a parametrization, hypothesis settings, JSON
round trips, and a strict space comparison."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import HealthCheck, settings

from tests.budget import examples
from tests.spaces_catalog import IDS, SPACES, assert_same

__all__ = ["CATALOG", "FAST", "GARBAGE", "assert_same_space", "compact", "wire"]

CATALOG = pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
FAST = settings(
    max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
GARBAGE = settings(max_examples=examples(60), deadline=None)


def wire(value: Any, *, allow_nan: bool = True) -> Any:
    """What the peer sees: real JSON text, parsed back."""
    return json.loads(json.dumps(value, allow_nan=allow_nan))


def compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False)


def assert_same_space(a: spaces.Space[Any], b: spaces.Space[Any]) -> None:
    """Gymnasium's == plus what it does not compare (Box uses allclose, ignores bound flags)."""
    assert a == b
    assert type(a) is type(b)
    if isinstance(a, spaces.Box):
        assert isinstance(b, spaces.Box)
        for field in ("low", "high", "bounded_below", "bounded_above"):
            # np.asarray: Gymnasium keeps a 0-d Box's flags as np.bool_ or a 0-d array,
            # depending on whether it was built from scalars or from arrays.
            assert_same(np.asarray(getattr(a, field)), np.asarray(getattr(b, field)), field)
    if isinstance(a, spaces.Text):
        assert isinstance(b, spaces.Text)
        assert a.character_list == b.character_list
    children = {
        spaces.Tuple: lambda s: list(s.spaces),
        spaces.OneOf: lambda s: list(s.spaces),
        spaces.Dict: lambda s: list(s.spaces.values()),
        spaces.Sequence: lambda s: [s.feature_space],
        spaces.Graph: lambda s: [s.node_space] + ([s.edge_space] if s.edge_space else []),
    }.get(type(a), lambda s: [])
    if isinstance(a, spaces.Dict):
        assert list(a.spaces) == list(b.spaces)
    for x, y in zip(children(a), children(b), strict=True):
        assert_same_space(x, y)
