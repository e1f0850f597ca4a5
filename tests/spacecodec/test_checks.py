"""envwire.spacecodec.check: ``value in space`` with an error that says what is wrong."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium import spaces

from envwire import spacecodec
from envwire.errors import InvalidActionError
from envwire.spacecodec import check


@pytest.mark.parametrize(
    ("space", "value", "message"),
    [
        (spaces.Discrete(2), 5, "action 5 is not in Discrete(2)"),
        (spaces.Discrete(2), np.int64(-1), "action -1 is not in Discrete(2)"),
        (spaces.Discrete(2), "a", "action 'a' is not in Discrete(2)"),
        (
            spaces.Box(-1.0, 1.0, (2,)),
            np.zeros(3, np.float32),
            "action has shape (3,), expected (2,) for Box(-1.0, 1.0, (2,), float32)",
        ),
        (
            spaces.Box(-1.0, 1.0, (2,)),
            np.array([2.5, 0], np.float32),
            "action 2.5 is outside [-1, 1] at index 0",
        ),
        (
            spaces.Box(-1.0, 1.0, (2,)),
            [0.0, float("nan")],
            "action nan is outside [-1, 1] at index 1",
        ),
        (
            spaces.Box(-1.0, 1.0, (2, 2)),
            np.array([[0, 0], [0, -3]], np.float32),
            "action -3 is outside [-1, 1] at index (1, 1)",
        ),
        (spaces.Box(0, 5, (), np.int32), np.array(7, np.int32), "action 7 is outside [0, 5]"),
        (
            spaces.Box(-1.0, 1.0, (1,)),
            np.array([0.5]),
            "action has dtype float64, which does not cast safely to float32",
        ),
        (
            spaces.Tuple((spaces.Discrete(2), spaces.Box(-1.0, 1.0, (2,)))),
            (1, np.array([0, 7], np.float32)),
            "action[1] 7 is outside [-1, 1] at index 1",
        ),
        (
            spaces.Dict({"a": spaces.Discrete(2)}),
            {"b": 1},
            "action {'b': 1} is not a dict with keys ['a']",
        ),
        (spaces.Dict({"a": spaces.Discrete(2)}), {"a": 4}, "action['a'] 4 is not in Discrete(2)"),
        (spaces.Text(2, charset="ab"), "abc", "action 'abc' is not in Text(1, 2, charset=ab)"),
        (spaces.MultiBinary(2), np.array([0, 2], np.int8), "action [0 2] is not in MultiBinary(2)"),
    ],
)
def test_check_messages(space: spaces.Space[Any], value: Any, message: str) -> None:
    with pytest.raises(InvalidActionError) as info:
        check(space, value)
    assert str(info.value).startswith(message)


def test_check_names_what_and_caps_length() -> None:
    space = spaces.Box(np.arange(500, dtype=np.float32), 1000.0)
    with pytest.raises(InvalidActionError, match=r"^observation has shape"):
        check(space, np.zeros(3, np.float32), what="observation")
    with pytest.raises(InvalidActionError) as info:
        check(spaces.Text(3), "x" * 10_000)
    assert len(str(info.value)) <= 300


@pytest.mark.parametrize(
    ("space", "value"),
    [
        (spaces.Discrete(2), 1),
        (spaces.Discrete(2), np.int64(0)),
        (spaces.Discrete(3, start=5, dtype=np.int32), np.int32(7)),
        (spaces.Box(-1.0, 1.0, (2,)), [0.5, -0.5]),  # no "Casting input x" warning
        (spaces.Box(0, 255, (2,), np.uint8), np.array([0, 255], np.uint8)),
        (spaces.Tuple((spaces.Discrete(2), spaces.Box(0.0, 1.0, (1,)))), [1, [0.5]]),
    ],
)
def test_check_accepts_members(space: spaces.Space[Any], value: Any) -> None:
    check(space, value)


def test_is_uint8_array_space() -> None:
    assert spacecodec.is_uint8_array_space(spaces.Box(0, 255, (2, 2), np.uint8))
    assert not spacecodec.is_uint8_array_space(spaces.Box(0, 255, (2, 2), np.int16))
    assert not spacecodec.is_uint8_array_space(spaces.MultiBinary(3))


_CHECKER_CASES = [
    (spaces.Discrete(3), [0, 2, np.int64(1), 3, -1, True, 1.0, np.int32(1), 2**70, "1", None]),
    (spaces.Discrete(4, start=-2), [-2, 1, 2, -3, np.int64(-1)]),
    (spaces.Discrete(2, dtype=np.int8), [np.int8(1), 1, 300, np.int64(1)]),
    (spaces.Box(-1, 1, (2,)), [np.zeros(2, np.float32), np.full(2, 2.0), [0, 0], "x"]),
    # a vector session's batched Discrete(3): the checker's fast path and its fallbacks
    (
        spaces.MultiDiscrete([3, 3, 3]),
        [
            np.array([0, 1, 2]),
            np.array([0, 3, 1]),
            np.array([-1, 0, 0]),
            np.array([0, 1]),
            np.zeros((3, 1), np.int64),
            np.array([0, 1, 2], np.int32),
            np.array([0.0, 1.0, 2.0]),
            [0, 1, 2],
            np.array([2**40, 0, 0]),
        ],
    ),
    (
        spaces.MultiDiscrete([4, 4], start=[-2, -2], dtype=np.int8),
        [np.array([-2, 1], np.int8), np.array([2, 0], np.int8), np.array([-3, 0], np.int8)],
    ),
    (spaces.MultiDiscrete([2, 5]), [np.array([1, 4]), np.array([2, 0]), np.array([0, 5])]),
    # past the checker's small-batch path: 100 copies, one entry out of range, or none
    (
        spaces.MultiDiscrete([2] * 100),
        [np.zeros(100, np.int64), np.r_[np.zeros(99, np.int64), 2], np.full(100, -1)],
    ),
    (spaces.MultiDiscrete(np.full((2, 3), 3)), [np.zeros((2, 3), np.int64), np.full((2, 3), 3)]),
    # too many allowed values for the checker's set of them: its smallest and largest entry
    (
        spaces.MultiDiscrete([5000] * 4, start=[-10] * 4),
        [
            np.array([-10, 0, 4989, 7]),
            np.array([-11, 0, 0, 0]),
            np.array([0, 4990, 0, 0]),
            np.array([True, False, True, False]),
        ],
    ),
    (
        spaces.MultiDiscrete([2] * 3, dtype=np.int8),
        [np.array([1, 0, 1], np.int8), np.ones(3, bool)],
    ),
]


@pytest.mark.parametrize(("space", "values"), _CHECKER_CASES)
def test_checker_agrees_with_check(space: spaces.Space[Any], values: list[Any]) -> None:
    """The per-space checker a session builds once accepts and refuses exactly what
    ``check`` does, with the same message."""
    one = spacecodec.checker(space, what="thing")
    for value in values:
        try:
            check(space, value, what="thing")
            expected = None
        except InvalidActionError as exc:
            expected = str(exc)
        if expected is None:
            one(value)
        else:
            with pytest.raises(InvalidActionError) as got:
                one(value)
            assert str(got.value) == expected
