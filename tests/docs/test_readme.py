"""README.md stays a landing page whose first block is what CI runs."""

from __future__ import annotations

import re
import subprocess

from tests.docs.blocks import blocks
from tests.docs.page import ROOT

README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"
#: The set-up commands, exactly: install and serve, install and run the test suite.
SETUP = (
    "python3 -m pip install -e . && envwire serve\n"
    "python3 -m pip install -e '.[test]' && python3 -m pytest\n"
)
MAX_BYTES = 12 * 1024


def test_readme_is_at_most_12_kb() -> None:
    size = len(README.read_bytes())
    assert size <= MAX_BYTES, f"README.md is {size} bytes, over {MAX_BYTES}: move details to docs/"


def test_the_first_block_is_the_two_setup_commands() -> None:
    first = blocks(README)[0]
    assert first.language == "bash"
    assert first.text == SETUP


def test_the_readme_says_how_long_the_test_command_takes() -> None:
    text = README.read_text()
    assert re.search(r"takes about \d+ minutes on a 2-core machine", text), (
        "the README must say how long the test command takes ('about N minutes')"
    )


def _ci_test_command_expression() -> str:
    """The shell expression with which ``.ci/run`` reads the README's test command."""
    match = re.search(r'^test_command="\$\((?P<expression>.+)\)"$', CI.read_text(), re.M)
    assert match is not None, ".ci/run no longer reads its test command from the README"
    return match["expression"]


def test_ci_runs_the_readme_test_command() -> None:
    read = subprocess.run(
        ["bash", "-c", _ci_test_command_expression()],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert read.stdout == SETUP.splitlines()[1] + "\n"
    assert re.search(r'^eval "\$test_command"$', CI.read_text(), re.M), (
        ".ci/run reads the README's test command but does not run it"
    )
