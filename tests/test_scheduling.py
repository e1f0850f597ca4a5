"""The suite's own scheduling over test processes (``tests/conftest.py``): the long files and
the docs' pages are handed out first, longest first, whatever their number of tests."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tests.conftest import LONG_FILES, SPREAD_FILES, pytest_xdist_make_scheduler


class _Node:
    """A test process as the scheduler sees it: what it was sent, in order."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.shutdown_called = False
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent += indices

    def shutdown(self) -> None:
        self.shutdown_called = True


class _Config:
    def __init__(self) -> None:
        self.option = SimpleNamespace(loadscopereorder=True, dist="loadfile")

    def getoption(self, name: str) -> Any:
        return getattr(self.option, name)

    def getvalue(self, name: str) -> Any:
        assert name == "tx"
        return ["4*popen"]


def test_the_long_units_start_first_and_the_pages_are_not_left_for_last() -> None:
    # as collected after pytest_collection_modifyitems: the long files first, then the rest
    pages = [f"{SPREAD_FILES[0]}::test_page_examples_run[p{n}.md]" for n in range(6)]
    ray = [f"{LONG_FILES[0]}::test_{n}" for n in range(3)]
    # ten short files of many tests each: xdist's own order would hand these out first
    many = [f"tests/test_many{f}.py::test_{n}" for f in range(10) for n in range(30)]
    few = ["tests/test_few.py::test_0"]
    collection = ray + pages + many + few
    scheduler: Any = pytest_xdist_make_scheduler(_Config(), None)  # type: ignore[arg-type]
    nodes = [_Node(f"gw{n}") for n in range(4)]
    for node in nodes:
        scheduler.add_node(node)
    for node in nodes:
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    first = [collection[node.sent[0]].partition("::")[0] for node in nodes]
    # the ray file and three pages start at once, each in a process of its own
    assert first == [LONG_FILES[0], SPREAD_FILES[0], SPREAD_FILES[0], SPREAD_FILES[0]]
    started = {collection[i] for node in nodes for i in node.sent}
    assert set(pages) <= started  # every page is handed out at the start, none kept for last
    assert not any(node.sent.count(i) > 1 for node in nodes for i in node.sent)
