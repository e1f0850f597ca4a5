"""Every code block of README.md and docs/ runs as written: one test per page.

A page is a script (see :mod:`tests.docs.blocks` and :mod:`tests.docs.page`): its blocks run in
order in a fresh folder, against the worktree's ``envwire``, its servers on free ports (the
documented ports in its commands and blocks replaced with those: :mod:`tests.docs.ports`), so
that two test runs at once do not collide. A page whose
examples need an optional extra is skipped, naming the missing module, where it is not
installed. A page that a known bug of envwire breaks is ``xfail(strict=True)``: the failure must
come from the blocks the bug is about (any other failure fails the test), and the test fails
the day the bug is fixed, so that the marker goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs.blocks import Block, blocks
from tests.docs.page import ROOT, PageRun

__all__ = ["KNOWN_BUGS", "PAGES", "Bug", "KnownBug"]

PAGES = sorted(
    [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")], key=lambda page: page.relative_to(ROOT)
)


class KnownBug(AssertionError):
    """The blocks a known bug is about failed, and nothing else did."""


@dataclass(frozen=True)
class Bug:
    """A known bug of envwire that makes a page's examples fail.

    Attributes:
        reason: what is wrong (shown as the xfail reason).
        blocks: texts that pick the blocks it makes fail (a block whose text holds one).
    """

    reason: str
    blocks: tuple[str, ...]

    def expected(self, page_blocks: list[Block]) -> set[int]:
        """The numbers of the blocks this bug is about (at least one, or a ValueError)."""
        numbers = {
            block.number
            for block in page_blocks
            if block.file is None and any(text in block.text for text in self.blocks)
        }
        if not numbers:
            raise ValueError(f"no block holds any of {self.blocks}: update KNOWN_BUGS")
        return numbers


#: Pages whose examples fail today because of a bug in envwire, not in the page.
KNOWN_BUGS: dict[str, Bug] = {}


def _params() -> list[object]:
    params: list[object] = []
    for page in PAGES:
        name = str(page.relative_to(ROOT))
        marks = []
        if (bug := KNOWN_BUGS.get(name)) is not None:
            marks.append(pytest.mark.xfail(strict=True, raises=KnownBug, reason=bug.reason))
        params.append(pytest.param(page, id=name, marks=marks))
    return params


def _runnable(page: Path, page_blocks: list[Block]) -> list[Block]:
    """The page's blocks without README.md's first one: the install and test-suite commands,
    which CI itself runs (``.ci/run``) and ``test_readme.py`` checks; running them here would
    install packages and run the whole suite inside the suite."""
    if page == ROOT / "README.md" and page_blocks:
        return page_blocks[1:]
    return page_blocks


@pytest.mark.timeout(900)
@pytest.mark.parametrize("page", _params())
def test_page_examples_run(page: Path, tmp_path: Path) -> None:
    name = str(page.relative_to(ROOT))
    page_blocks = _runnable(page, blocks(page))
    if not any(block.not_run is None for block in page_blocks):
        pytest.skip(f"{name} has no block to run")
    bug = KNOWN_BUGS.get(name)
    expected = bug.expected(page_blocks) if bug is not None else set()
    outcome = PageRun(tmp_path).run(page_blocks, expected)
    unexpected = [(block, why) for block, why in outcome.failed if block.number not in expected]
    if unexpected:
        pytest.fail("\n\n".join(why for _block, why in unexpected), pytrace=False)
    if outcome.failed:
        raise KnownBug("\n\n".join(why for _block, why in outcome.failed))
    if outcome.skipped:
        missing = sorted({module for _block, modules in outcome.skipped for module in modules})
        numbers = ", ".join(str(block.number) for block, _ in outcome.skipped)
        pytest.skip(
            f"{name}: blocks {numbers} need {', '.join(missing)}, missing here (an optional "
            f"extra or program); the page's other {len(outcome.passed)} blocks passed"
        )
