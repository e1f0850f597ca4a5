"""The docs harness reads pages and shell blocks as the conventions say (docs/index.md)."""

from __future__ import annotations

import contextlib
import errno
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.blocks import MarkerError, anchors, blocks, links
from tests.docs.page import PageRun
from tests.docs.ports import PortMap
from tests.docs.shell import BlockFailed, commands, is_server, listeners

PAGE = """# Title

<!-- file: pkg/mod.py -->
<!-- requires: minari -->
```python
x = 1
```

- a list item with a block:

  ```toml
  [a]
  b = 1
  ```

```bash
# not run by the tests: needs a cluster
ray up cluster.yaml
```

## Title

See [the title](#title-1), [a file](other.md#x) and `[not a link](nowhere.md)`.
"""


def test_blocks_carry_their_markers_and_lose_their_indentation(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    first, second, third = blocks(page)
    assert (first.language, first.file, first.requires, first.text) == (
        "python",
        "pkg/mod.py",
        ("minari",),
        "x = 1\n",
    )
    assert (second.language, second.line, second.text) == ("toml", 11, "[a]\nb = 1\n")
    assert second.file is None and second.not_run is None
    assert third.not_run == "needs a cluster"


def test_links_skip_code_and_anchors_count_repeated_headings(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    assert [link.target for link in links(page)] == ["#title-1", "other.md#x"]
    assert anchors(page) == {"title", "title-1"}


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("<!-- flie: x -->\n```python\n```\n", "unknown marker 'flie'"),
        ("<!-- file: a -->\n<!-- file: b -->\n```python\n```\n", "given twice"),
        ("```python\nx = 1\n", "never closed"),
    ],
)
def test_malformed_pages_are_refused(tmp_path: Path, text: str, problem: str) -> None:
    page = tmp_path / "page.md"
    page.write_text(text)
    with pytest.raises(MarkerError, match=problem):
        blocks(page)


def test_shell_blocks_split_into_whole_commands() -> None:
    text = (
        "# a comment\n"
        "echo one \\\n"
        "    two\n"
        "for i in 1 2; do\n"
        "  echo $i\n"
        "done\n"
        "\n"
        "envwire serve  # the default catalog\n"
    )
    assert list(commands(text, "bash")) == [
        "echo one \\\n    two",
        "for i in 1 2; do\n  echo $i\ndone",
        "envwire serve  # the default catalog",
    ]
    assert list(commands("$ echo hi\nhi\n", "console")) == ["echo hi"]
    with pytest.raises(BlockFailed, match="ends inside"):
        list(commands("for i in 1; do\n", "bash"))


def test_server_commands_and_the_listeners_they_ask_for() -> None:
    assert is_server("envwire serve CartPole-v1")
    assert is_server("FOO=1 python3 -m envwire serve")
    assert not is_server("envwire list")
    assert not is_server("echo envwire serve")
    assert listeners("envwire serve --http off --grpc=off") == {"gym-socket"}
    assert listeners("envwire serve --metrics 9100") == {"gym-socket", "http", "grpc", "metrics"}


def test_a_page_runs_as_one_script_and_stops_at_its_first_failure(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- file: data.txt -->\n```text\nhello\n```\n\n"
        "```bash\nmkdir sub\nWORD=$(cat data.txt)\necho $WORD > sub/w\n```\n\n"
        "```python\nword = open('sub/w').read().strip()\n```\n\n"
        "```python\nassert word == 'hello'\nraise SystemExit(3)\n```\n\n"
        "```python\nnever = 1\n```\n"
    )
    outcome = PageRun(tmp_path / "run").run(blocks(page))
    assert [block.number for block in outcome.passed] == [1, 2, 3]
    [(failed, why)] = outcome.failed
    assert failed.number == 4
    assert "SystemExit: 3" in why


def test_server_commands_get_port_zero_and_say_their_documented_ports(tmp_path: Path) -> None:
    ports = PortMap(tmp_path)
    command, documented = ports.server_command("envwire serve CartPole-v1 --http 8080 --grpc off")
    assert command == "envwire serve CartPole-v1 --http 0 --grpc off --gym-socket 0"
    assert documented == {"http": 8080, "gym-socket": 5001}
    (tmp_path / "envwire.toml").write_text('[server]\ngym_socket = 6001\nhttp = "off"\n')
    command, documented = ports.server_command("envwire serve --config envwire.toml --metrics=9100")
    assert command == "envwire serve --config envwire.toml --metrics=0 --gym-socket 0 --grpc 0"
    assert documented == {"metrics": 9100, "gym-socket": 6001, "grpc": 50051}
    ports.learn(documented, {"gym-socket": ("127.0.0.1", 41234), "grpc": ("127.0.0.1", 41235)})
    assert ports.rewrite("gym-socket://127.0.0.1:6001/x grpc://127.0.0.1:50051/x") == (
        "gym-socket://127.0.0.1:41234/x grpc://127.0.0.1:41235/x"
    )
    # A documented port no server announced gets a free port, the same one each time; numbers
    # that merely contain a port's digits stay.
    first = ports.rewrite("port=8000")
    assert (
        first != "port=8000" and ports.rewrite("--serverPort=8000") == f"--serverPort={first[5:]}"
    )
    assert ports.rewrite("80001 1.8000 v8000") == "80001 1.8000 v8000"
    # A server started after a command that used its port (an agent's config names the
    # server's URL) binds that port.
    assert ports.server_command("envwire serve --grpc off --gym-socket off") == (
        f"envwire serve --grpc off --gym-socket off --http {first[5:]}",
        {"http": 8000},
    )


@contextlib.contextmanager
def _held(port: int) -> Iterator[None]:
    """``port`` taken on 127.0.0.1 for the block: by this test, or already by someone else
    (another test run's server, which is the case the harness must survive)."""
    with socket.socket() as holder:
        try:
            holder.bind(("127.0.0.1", port))
            holder.listen()
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
        yield


def test_a_page_runs_while_its_documented_ports_are_taken(tmp_path: Path) -> None:
    # What a second test run at once does to the first: the default ports are taken. The page
    # still runs, its server and its client on the same free port.
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\nenvwire serve CartPole-v1 --http off --grpc off\n```\n\n"
        "```python\nimport envwire\n\n"
        'with envwire.make("gym-socket://127.0.0.1:5001/CartPole-v1") as env:\n'
        "    obs, info = env.reset(seed=0)\n```\n\n"
        "```bash\npython -c 'import socket; socket.create_connection((\"127.0.0.1\", 5001))'\n```\n"
    )
    with _held(5001):
        outcome = PageRun(tmp_path / "run").run(blocks(page))
    assert not outcome.failed, outcome.failed
    assert [block.number for block in outcome.passed] == [1, 2, 3]
