"""The docs hold together: every relative link and anchor resolves, every page is on the map,
every block follows the conventions the example tests rely on, and no internal name leaks."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.docs.blocks import LANGUAGES, NOT_RUN, anchors, blocks, links, slug
from tests.docs.page import ROOT
from tests.docs.test_examples import KNOWN_BUGS, PAGES

INDEX = ROOT / "docs" / "index.md"
README = ROOT / "README.md"


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_relative_links_and_anchors_resolve(page: Path) -> None:
    broken = []
    for link in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", link.target):  # https:, mailto: ...
            continue
        path, _, anchor = link.target.partition("#")
        target = (page.parent / unquote(path)).resolve() if path else page
        if not target.is_relative_to(ROOT):
            broken.append(f"line {link.line}: {link.target} leaves the repository")
        elif not target.exists():
            broken.append(f"line {link.line}: {link.target}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"line {link.line}: {link.target}: no heading #{anchor} there")
    assert not broken, f"{_name(page)}:\n" + "\n".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_blocks_follow_the_conventions(page: Path) -> None:
    problems = []
    for block in blocks(page):
        if block.language not in LANGUAGES:
            problems.append(
                f"{block.where}: the language {block.language!r} is not one of "
                f"{sorted(LANGUAGES)} (text for output and diagrams)"
            )
        if NOT_RUN.strip("# ") in block.text and block.not_run is None:
            problems.append(f"{block.where}: '{NOT_RUN}' must be the block's first line")
        if block.file is not None and (
            Path(block.file).is_absolute() or ".." in Path(block.file).parts
        ):
            problems.append(f"{block.where}: the file {block.file!r} must be inside the page")
    assert not problems, "\n".join(problems)


def test_every_page_is_on_the_map() -> None:
    listed = {
        (INDEX.parent / link.target.partition("#")[0]).resolve()
        for link in links(INDEX)
        if not link.target.startswith("#")
    }
    missing = [_name(page) for page in PAGES if page not in {README, INDEX} and page not in listed]
    assert not missing, f"docs/index.md has no line for {missing}"


def test_protocol_glossary_names_each_origin() -> None:
    glossary = (ROOT / "docs" / "protocols" / "index.md").read_text()
    for origin in (
        "unixpickle/gym-socket-api",
        "HugoTini/GymGodot",
        "meta-pytorch/OpenEnv",
        "openenv-core",
        "jfschaefer/aisysprojserver",
        "google-deepmind/dm_env_rpc",
    ):
        assert origin in glossary, f"docs/protocols/index.md does not name {origin}"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_no_internal_names_of_the_protocol_documents(page: Path) -> None:
    # The protocol documents were numbered internally; readers never saw those names.
    found = re.findall(r"seed 00[0-9N]", page.read_text(), re.IGNORECASE)
    assert not found, f"{_name(page)} says {sorted(set(found))}"


def test_known_bugs_name_pages_that_exist() -> None:
    assert set(KNOWN_BUGS) <= {_name(page) for page in PAGES}


def test_slug_matches_github() -> None:
    assert slug("Exposing a server: tokens, TLS, browsers, limits") == (
        "exposing-a-server-tokens-tls-browsers-limits"
    )
    assert slug("dm_env envs: dm_control's suite and your own simulators") == (
        "dm_env-envs-dm_controls-suite-and-your-own-simulators"
    )
    assert slug("The Python side: `GodotEnv`") == "the-python-side-godotenv"
