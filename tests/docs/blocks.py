"""The pages of the docs as the tests read them: fenced code blocks, their markers, headings and
relative links.

The conventions (written out for authors in ``docs/index.md``, "Examples are tests"):

- Every fenced block has a language. ``python`` blocks of one page run in one namespace, in
  order, like a Python prompt opened in the page's folder; ``bash``/``sh``/``console`` blocks run
  command by command in one shell per page; ``toml``/``json`` blocks are parsed (a ``yaml`` block
  must be written to a file or marked); ``text`` blocks are output or diagrams and are not run.
- ``<!-- file: PATH -->`` on the line above a block writes the block, whatever its language, to
  PATH in the page's folder instead of running it (a module an ``envwire serve`` line imports, a
  config file ``--config`` reads).
- ``<!-- requires: NAME ... -->`` above a block: the block runs only where each name is a module
  that imports (an optional extra) or a program on ``PATH`` (``godot3-server``); elsewhere it is
  skipped, and so is the page's test, naming what is missing.
- A block whose first line is ``# not run by the tests: REASON`` is neither run nor parsed; the
  reason is visible to readers, who see the same line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DATA_LANGUAGES",
    "LANGUAGES",
    "LITERAL_LANGUAGES",
    "NOT_RUN",
    "PYTHON_LANGUAGES",
    "SHELL_LANGUAGES",
    "Block",
    "Link",
    "MarkerError",
    "anchors",
    "blocks",
    "links",
    "slug",
]

PYTHON_LANGUAGES = frozenset({"python"})
SHELL_LANGUAGES = frozenset({"bash", "sh", "console"})
DATA_LANGUAGES = frozenset({"toml", "json", "yaml"})
LITERAL_LANGUAGES = frozenset({"text"})
#: Every language a block may have; any other is an error (so that nothing slips past unrun).
LANGUAGES = PYTHON_LANGUAGES | SHELL_LANGUAGES | DATA_LANGUAGES | LITERAL_LANGUAGES

#: The first line of a block that the tests do not run; the reason follows the colon.
NOT_RUN = "# not run by the tests:"

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_MARKER = re.compile(r"^\s*<!--\s*(?P<key>[a-z-]+):\s*(?P<value>.*?)\s*-->\s*$")
_MARKER_KEYS = frozenset({"file", "requires"})
_HEADING = re.compile(r"^(?P<level>#{1,6})\s+(?P<text>.+?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_LINK = re.compile(r"!?\[(?P<text>[^\]]*)\]\((?P<target><[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\)")


class MarkerError(ValueError):
    """A page's markers or fences are malformed; the message names the page and line."""


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page.

    Attributes:
        page: the page's path.
        number: the block's position in the page, from 1.
        line: the line of its opening fence, from 1.
        language: the info string's first word, lower case ("" when there is none).
        text: the block's lines, without the fence's indentation, each ending in a newline.
        file: the path a ``file`` marker names, else None.
        requires: the modules a ``requires`` marker names.
    """

    page: Path
    number: int
    line: int
    language: str
    text: str
    file: str | None = None
    requires: tuple[str, ...] = ()

    @property
    def not_run(self) -> str | None:
        """The reason the tests do not run this block, from its first line, else None."""
        first = self.text.split("\n", 1)[0].strip()
        if first.startswith(NOT_RUN):
            return first[len(NOT_RUN) :].strip() or "no reason given"
        return None

    @property
    def where(self) -> str:
        """``page:line``, for messages."""
        return f"{self.page}:{self.line}"


@dataclass(frozen=True)
class Link:
    """A link of a page: its target as written and the line it is on."""

    target: str
    line: int


def _fenced(lines: list[str]) -> Iterator[tuple[int, int, str, str, list[str]]]:
    """(opening line index, closing line index, indent, info, content lines) of every fenced
    block; an unclosed fence raises MarkerError (as ``(page, index)`` is unknown here, the
    caller names the page)."""
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        closing = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = index + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        if end == len(lines):
            raise MarkerError(f"line {index + 1}: the fence {fence} is never closed")
        content = [
            line[len(indent) :] if line.startswith(indent) else line.lstrip()
            for line in lines[index + 1 : end]
        ]
        yield index, end, indent, opening["info"].strip(), content
        index = end + 1


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, with the markers on the lines right above it.

    Raises:
        MarkerError: an unclosed fence, an unknown marker, or a marker given twice.
    """
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    try:
        fenced = list(_fenced(lines))
    except MarkerError as exc:
        raise MarkerError(f"{page}: {exc}") from None
    for start, _end, _indent, info, content in fenced:
        markers: dict[str, str] = {}
        above = start - 1
        while above >= 0 and (marker := _MARKER.match(lines[above])):
            key = marker["key"]
            if key not in _MARKER_KEYS:
                raise MarkerError(
                    f"{page}:{above + 1}: unknown marker {key!r} above a block "
                    f"(known: {', '.join(sorted(_MARKER_KEYS))})"
                )
            if key in markers:
                raise MarkerError(f"{page}:{above + 1}: the marker {key!r} is given twice")
            markers[key] = marker["value"]
            above -= 1
        found.append(
            Block(
                page=page,
                number=len(found) + 1,
                line=start + 1,
                language=info.split()[0].lower() if info else "",
                text="".join(line + "\n" for line in content),
                file=markers.get("file"),
                requires=tuple(markers.get("requires", "").split()),
            )
        )
    return found


def _outside_blocks(page: Path) -> Iterator[tuple[int, str]]:
    """(line number from 1, line) of every line of ``page`` outside fenced blocks (the pages
    use no indented code blocks: literal text goes in a fenced ``text`` block)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    inside: set[int] = set()
    for start, end, *_ in _fenced(lines):
        inside.update(range(start, end + 1))
    for index, line in enumerate(lines):
        if index not in inside:
            yield index + 1, line


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text lower-cased, code and link markup dropped,
    punctuation but ``-`` and ``_`` removed, spaces made ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every ``#anchor`` a link may point at in ``page`` (repeated headings get ``-1``,
    ``-2``, ... as on GitHub)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _number, line in _outside_blocks(page):
        heading = _HEADING.match(line)
        if heading is None:
            continue
        base = slug(heading["text"])
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[Link]:
    """Every inline link and image of ``page`` outside code blocks and code spans."""
    found = []
    for number, line in _outside_blocks(page):
        for match in _LINK.finditer(_CODE_SPAN.sub("", line)):
            found.append(Link(match["target"].strip("<>"), number))
    return found
