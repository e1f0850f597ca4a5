"""The benchmarks' alternating rounds: every case measured once a round, the baseline first,
the others after it in an order that rotates, so that each follows the baseline in turn."""

from __future__ import annotations

from collections.abc import Callable

from tests.benchmarks.conftest import BENCHMARKS  # noqa: F401 (puts benchmarks/ on the path)


def _recording(order: list[str]) -> Callable[[str], Callable[[], int]]:
    def measure(name: str) -> Callable[[], int]:
        def once() -> int:
            order.append(name)
            return len(order)

        return once

    return measure


def test_each_case_follows_the_baseline_in_turn() -> None:
    from harness import alternate

    order: list[str] = []
    measure = _recording(order)
    values = alternate({name: measure(name) for name in "bxyz"}, 6)
    rounds = ["".join(order[i : i + 4]) for i in range(0, 24, 4)]
    assert rounds == ["bxyz", "byzx", "bzxy", "bxyz", "byzx", "bzxy"]
    after_baseline = [r[1] for r in rounds]
    assert sorted(after_baseline) == ["x", "x", "y", "y", "z", "z"]
    # each case's values are its own measurements, in round order
    assert values["b"] == [1, 5, 9, 13, 17, 21]
    assert values["x"] == [2, 8, 11, 14, 20, 23]


def test_one_case_or_two_keep_their_order() -> None:
    from harness import alternate

    order: list[str] = []
    measure = _recording(order)
    assert alternate({}, 3) == {}
    assert alternate({"only": measure("only")}, 3) == {"only": [1, 2, 3]}
    order.clear()
    values = alternate({"base": measure("base"), "case": measure("case")}, 2)
    assert order == ["base", "case", "base", "case"]
    assert values == {"base": [1, 3], "case": [2, 4]}


def test_rounds_keep_their_order_unrotated() -> None:
    from harness import alternate

    order: list[str] = []
    measure = _recording(order)
    alternate({name: measure(name) for name in "bxy"}, 3, rotate=False)
    assert "".join(order) == "bxy" * 3
