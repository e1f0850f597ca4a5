"""Splitting a vector group's batches into slices and joining them back, over every space."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from envwire.errors import EnvError, EnvwireError
from envwire.runtime.vector import VectorGroup, _batch, _join, _slices, split_sizes
from tests.spaces_catalog import IDS, SPACES, assert_same

SIZES = split_sizes(5, 2)
BOUNDS = [(0, 3), (3, 5)]


def _items(space: spaces.Space[Any], count: int) -> list[object]:
    space.seed(3)
    return [space.sample() for _ in range(count)]


@pytest.mark.parametrize("space", [s for _, s in SPACES], ids=IDS)
def test_slices_joined_give_gymnasiums_own_batch(space: spaces.Space[Any]) -> None:
    """A joined batch is what Gymnasium's item-by-item batching gives for the same copies,
    type for type and bit for bit (the join's own ways for arrays, dicts and tuples
    included), and each slice is Gymnasium's batch of its own copies."""
    items = _items(space, 5)
    try:
        whole = _batch(space, items, 5)
    except (TypeError, NotImplementedError, ValueError) as exc:
        pytest.skip(f"Gymnasium does not batch {space}: {exc}")
    parts = _slices(space, whole, SIZES, BOUNDS)
    for part, (start, stop) in zip(parts, BOUNDS, strict=True):
        expected = _batch(space, items[start:stop], stop - start)
        assert_same(part, expected, "slice")
    assert_same(_join(space, parts, SIZES), whole, "joined")


def test_nested_dicts_and_tuples_join_key_by_key() -> None:
    """A Dict of a Tuple of a Box and a Text: the arrays concatenate, the texts batch as
    Gymnasium batches them, and the structure is Gymnasium's (a dict of a tuple)."""
    space = spaces.Dict(
        {"a": spaces.Tuple((spaces.Box(0, 1, (2,)), spaces.Text(3))), "b": spaces.Discrete(4)}
    )
    items = _items(space, 5)
    whole = _batch(space, items, 5)
    joined = _join(space, _slices(space, whole, SIZES, BOUNDS), SIZES)
    assert isinstance(joined, dict) and isinstance(joined["a"], tuple)
    assert_same(joined, whole)


class _FakeSlice:
    """A slice whose step replies with its own copies' indices, or raises its own error."""

    def __init__(self, offset: int, size: int, error: EnvwireError | None = None) -> None:
        self.offset, self.size, self.error = offset, size, error
        self.finished = 0

    def send(self, method: str, *args: object) -> None:
        pass

    def finish(self, method: str, timeout: float | None) -> Any:
        if method == "spaces":
            return spaces.Discrete(2), spaces.Box(0, 9, (1,), np.float32)
        self.finished += 1
        if self.error is not None:
            raise self.error
        obs = np.arange(self.offset, self.offset + self.size, dtype=np.float32)[:, None]
        flags = np.zeros(self.size, bool)
        return obs, np.ones(self.size), flags, flags.copy(), {}

    def close(self) -> None:
        pass


def test_a_group_step_joins_slices_in_order() -> None:
    group = VectorGroup([_FakeSlice(0, 3), _FakeSlice(3, 2)], [3, 2])
    obs, rewards, *_ = group.call("step", np.zeros(5, np.int64), timeout=5)  # type: ignore[misc]
    assert obs[:, 0].tolist() == [0, 1, 2, 3, 4] and rewards.tolist() == [1] * 5


def test_a_group_step_raises_the_first_slices_error_after_finishing_every_slice() -> None:
    slices = [
        _FakeSlice(0, 2, EnvError("slice 0")),
        _FakeSlice(2, 2),
        _FakeSlice(4, 1, EnvError("slice 2")),
    ]
    group = VectorGroup(slices, [2, 2, 1])
    with pytest.raises(EnvError, match="slice 0"):
        group.call("step", np.zeros(5, np.int64), timeout=5)
    assert [s.finished for s in slices] == [1, 1, 1]
