"""A catalog of Gymnasium spaces that codec tests are parametrized over.

Every Gymnasium space type appears, with varied dtypes, shapes and bounds (infinite, half-open,
integer, uint8 images, scalar and empty boxes), starts, multi-dimensional counts, nesting, custom
charsets, stacked and unstacked sequences, graphs with and without edges, and OneOf. Every space
is seeded, so ``space.sample()`` is reproducible. Import ``SPACES`` (name, space) or ``IDS``, and
:func:`assert_same` to compare a sample with its round trip, bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["IDS", "SPACES", "assert_same"]

_INF = np.inf


def _box(low: Any, high: Any, shape: Any = None, dtype: Any = np.float32) -> spaces.Box[Any]:
    return spaces.Box(low, high, shape, dtype=dtype, seed=1)


SPACES: list[tuple[str, spaces.Space[Any]]] = [
    # Box
    ("box_f32_unit", _box(-1.0, 1.0, (3,))),
    ("box_f32_inf", _box(-_INF, _INF, (4,))),
    (
        "box_f32_half_open",
        _box(np.array([-_INF, 0.0, -1.5], np.float32), np.array([1.0, _INF, 0.1], np.float32)),
    ),
    ("box_f32_2d_varied", _box(np.arange(6, dtype=np.float32).reshape(2, 3) * 0.1, 5.0, (2, 3))),
    ("box_f32_signed_zero", _box(np.array([-0.0, 0.0], np.float32), 1.0, (2,))),
    ("box_f64_wide", _box(np.array([-1e300, -_INF]), np.array([1e300, 1e-300]), dtype=np.float64)),
    ("box_f16", _box(-2.5, 2.5, (2, 2), np.float16)),
    ("box_f32_scalar", _box(0.0, 1.0, ())),
    ("box_f32_empty", _box(0.0, 1.0, (0,))),
    ("box_int32", _box(-5, 5, (3,), np.int32)),
    ("box_int64_inf", _box(-_INF, 10, (2,), np.int64)),
    ("box_int16_mixed_inf", _box(np.array([-_INF, 0.0]), np.array([5.0, _INF]), dtype=np.int16)),
    ("box_int8_varied", _box(np.array([-128, 0, 3]), np.array([0, 1, 127]), dtype=np.int8)),
    ("box_uint8_image", _box(0, 255, (84, 84, 4), np.uint8)),
    ("box_uint64", _box(0, 1000, (2,), np.uint64)),
    ("box_bool", _box(0, 1, (3,), np.bool_)),
    # Discrete
    ("discrete_5", spaces.Discrete(5, seed=2)),
    ("discrete_start_neg", spaces.Discrete(3, start=-1, seed=2)),
    ("discrete_int32_start", spaces.Discrete(10, start=100, dtype=np.int32, seed=2)),
    ("discrete_uint8", spaces.Discrete(4, dtype=np.uint8, seed=2)),
    # MultiBinary
    ("multibinary_5", spaces.MultiBinary(5, seed=3)),
    ("multibinary_list_1", spaces.MultiBinary([5], seed=3)),
    ("multibinary_2d", spaces.MultiBinary([2, 3], seed=3)),
    # MultiDiscrete
    ("multidiscrete_flat", spaces.MultiDiscrete([5, 2, 2], seed=4)),
    (
        "multidiscrete_2d_start",
        spaces.MultiDiscrete(np.array([[2, 3], [4, 5]]), start=np.array([[0, 1], [-1, 2]]), seed=4),
    ),
    ("multidiscrete_int32", spaces.MultiDiscrete([3, 3], dtype=np.int32, seed=4)),
    # Tuple / Dict
    ("tuple_flat", spaces.Tuple((spaces.Discrete(2), _box(-1.0, 1.0, (2,))), seed=5)),
    ("tuple_empty", spaces.Tuple((), seed=5)),
    (
        "tuple_nested",
        spaces.Tuple(
            (
                spaces.Tuple((spaces.MultiBinary(2), spaces.Discrete(3, start=1))),
                spaces.Dict({"x": _box(0.0, 1.0, (1,)), "n": spaces.Discrete(4)}),
            ),
            seed=5,
        ),
    ),
    (
        "dict_unsorted",
        spaces.Dict(
            [("zeta", spaces.Discrete(3)), ("alpha", _box(-_INF, _INF, (2,), np.float64))], seed=6
        ),
    ),
    (
        "dict_nested",
        spaces.Dict(
            {
                "pos": _box(-10.0, 10.0, (3,)),
                "inner": spaces.Dict({"flag": spaces.MultiBinary(1), "t": spaces.Text(4)}),
                "pair": spaces.Tuple((spaces.Discrete(2), spaces.MultiDiscrete([3, 4]))),
            },
            seed=6,
        ),
    ),
    # Text
    ("text_default", spaces.Text(5, seed=7)),
    ("text_charset", spaces.Text(min_length=0, max_length=8, charset="zyx -!é€", seed=7)),
    # Sequence
    ("sequence_box", spaces.Sequence(_box(0.0, 1.0, (2,)), seed=8)),
    ("sequence_stack_box", spaces.Sequence(_box(-1, 1, (2, 2), np.int32), stack=True, seed=8)),
    ("sequence_stack_discrete", spaces.Sequence(spaces.Discrete(3), stack=True, seed=8)),
    (
        "sequence_stack_tuple",
        spaces.Sequence(
            spaces.Tuple((spaces.Discrete(2), _box(0.0, 1.0, (2,)))), stack=True, seed=8
        ),
    ),
    ("sequence_text", spaces.Sequence(spaces.Text(3, charset="ab"), seed=8)),
    # Graph
    ("graph_box_discrete", spaces.Graph(_box(-1.0, 1.0, (3,)), spaces.Discrete(3), seed=9)),
    ("graph_discrete_no_edges", spaces.Graph(spaces.Discrete(4), None, seed=9)),
    ("graph_box_box", spaces.Graph(_box(0, 5, (2,), np.int64), _box(0.0, 1.0, (1,)), seed=9)),
    # OneOf
    ("oneof", spaces.OneOf((spaces.Discrete(3), _box(-1.0, 1.0, (2,)), spaces.Text(2)), seed=10)),
]

IDS: list[str] = [name for name, _ in SPACES]


def assert_same(a: Any, b: Any, where: str = "sample") -> None:
    """Same Python/numpy types, dtypes, shapes and bit-exact values, recursively; object arrays
    element by element (their bytes are pointers)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, np.ndarray) and a.dtype == object:
        assert a.shape == b.shape, where
        assert_same(a.tolist(), b.tolist(), where)
    elif isinstance(a, np.ndarray | np.generic):
        assert (a.dtype, a.shape) == (b.dtype, b.shape), where
        assert a.tobytes() == b.tobytes(), f"{where}: {a!r} != {b!r}"
    elif isinstance(a, tuple | list):  # GraphInstance too
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"
