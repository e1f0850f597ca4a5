"""Run one page of the docs as a script, in a fresh folder, with the worktree's ``envwire``.

Blocks run in the page's order (see :mod:`tests.docs.blocks` for what each language does). The
page's folder is new and empty; ``envwire``, ``python`` and ``python3`` on its ``PATH`` are the
worktree's, installed as a reader's ``pip install -e .`` would install them (the ``envwire``
command is a console script, so the folder it runs in is not on its import path unless envwire
puts it there).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from tests.docs.blocks import (
    DATA_LANGUAGES,
    LITERAL_LANGUAGES,
    PYTHON_LANGUAGES,
    SHELL_LANGUAGES,
    Block,
)
from tests.docs.ports import PortMap
from tests.docs.shell import COMMAND_TIME, BlockFailed, Shell, commands

__all__ = [
    "CHECKOUT_FOLDERS",
    "ROOT",
    "Outcome",
    "PageRun",
    "PythonPrompt",
    "missing_modules",
    "page_environment",
]

ROOT = Path(__file__).resolve().parents[2]
#: Folders of the checkout that a page's folder links to, for examples that use them.
CHECKOUT_FOLDERS = ("examples", "godot")
_DRIVER = Path(__file__).with_name("pydriver.py")
#: Variables of the test run's own environment that would change what an example does.
_CLEARED = ("ENVWIRE_TOKEN", "ENVWIRE_CA", "MINARI_DATASETS_PATH", "RAY_ADDRESS", "PYTHONSTARTUP")


def missing_modules(names: tuple[str, ...]) -> list[str]:
    """The names of ``names`` that are neither an importable module nor a program on PATH."""
    missing = []
    for name in names:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ModuleNotFoundError, ValueError):  # a missing parent package; not a module name
            found = False
        if not found and shutil.which(name) is None:
            missing.append(name)
    return missing


def page_environment(bin_dir: Path) -> dict[str, str]:
    """The environment a page runs in: ``bin_dir`` (with ``envwire``, ``python`` and
    ``python3``) first on ``PATH``, the worktree's ``src`` first on ``PYTHONPATH``."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "envwire"
    # What pip writes for a console script: the interpreter, then envwire.__main__.main.
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "from envwire.__main__ import main\n"
        "if __name__ == '__main__':\n"
        "    sys.exit(main())\n"
    )
    for name in ("python", "python3"):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    for path in bin_dir.iterdir():
        path.chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key not in _CLEARED}
    path = [str(bin_dir), str(Path(sys.executable).parent), env.get("PATH", "")]
    env["PATH"] = os.pathsep.join(path)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class Outcome:
    """What became of a page's blocks.

    Attributes:
        failed: (block, message) of every block that failed.
        skipped: (block, missing modules) of every block whose ``requires`` were missing.
        not_run: (block, reason) of every block marked not run.
        passed: the blocks that ran and passed.
        seconds: the page's wall time.
    """

    failed: list[tuple[Block, str]] = field(default_factory=list)
    skipped: list[tuple[Block, list[str]]] = field(default_factory=list)
    not_run: list[tuple[Block, str]] = field(default_factory=list)
    passed: list[Block] = field(default_factory=list)
    seconds: float = 0.0


class PythonPrompt:
    """The page's Python: one process that runs its python blocks in one namespace
    (``pydriver.py``), started by the first python block.

    Args:
        cwd: the page's folder.
        env: the page's environment.
        log: where what the blocks print goes.
    """

    def __init__(self, cwd: Path, env: dict[str, str], log: Path) -> None:
        self.log = log
        self._status, status_write = os.pipe()
        with log.open("ab") as output:
            self.process = subprocess.Popen(
                [sys.executable, str(_DRIVER), str(status_write)],
                stdin=subprocess.PIPE,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                pass_fds=(status_write,),
                start_new_session=True,
            )
        os.close(status_write)

    def run(self, block: Block) -> None:
        """Run one block in the page's namespace.

        Raises:
            BlockFailed: it raised (with the traceback and what the page printed), took longer
                than ``COMMAND_TIME``, or ended the process.
        """
        assert self.process.stdin is not None
        request = {"code": block.text, "file": str(block.page), "line": block.line}
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self._status], [], [], COMMAND_TIME)
        line = b""
        while ready and not line.endswith(b"\n"):
            chunk = os.read(self._status, 65536)
            if not chunk:
                break
            line += chunk
        said = self.log.read_text(errors="replace")[-2000:]
        if not line.endswith(b"\n"):
            raise BlockFailed(
                f"{block.where}: the block did not finish within {COMMAND_TIME:.0f} s "
                f"(or Python ended):\n{said}"
            )
        reply = json.loads(line)
        if not reply["ok"]:
            raise BlockFailed(f"{block.where}:\n{reply['error']}\nOutput:\n{said}")

    def close(self) -> None:
        """End the process (closing its input ends it), then whatever it started and left."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(10)
        with contextlib.suppress(ProcessLookupError):  # its group: servers a block launched
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)
        os.close(self._status)


class PageRun:
    """A page's run: its folder, its shell and its Python, made as blocks need them.

    Args:
        folder: a fresh folder; the page runs in ``folder/page``, logs go to ``folder/logs``.
    """

    def __init__(self, folder: Path) -> None:
        self.cwd = folder / "page"
        self.logs = folder / "logs"
        self.cwd.mkdir(parents=True)
        self.logs.mkdir(parents=True)
        # The pages' examples run from a checkout: they may use its example folders.
        for name in CHECKOUT_FOLDERS:
            (self.cwd / name).symlink_to(ROOT / name, target_is_directory=True)
        self.env = page_environment(folder / "bin")
        #: The page's ports, documented -> real: its servers listen on free ones.
        self.ports = PortMap(self.cwd)
        self.shell: Shell | None = None
        self.python: PythonPrompt | None = None

    def run(self, blocks: list[Block], expected: Collection[int] = ()) -> Outcome:
        """Run ``blocks`` in order. A failure ends the run unless the block is in ``expected``
        (block numbers that a known bug makes fail); the page then goes on.

        Returns:
            What became of each block.
        """
        outcome = Outcome()
        start = time.monotonic()
        try:
            for block in blocks:
                if (reason := block.not_run) is not None:
                    outcome.not_run.append((block, reason))
                    continue
                if missing := missing_modules(block.requires):
                    outcome.skipped.append((block, missing))
                    continue
                try:
                    self.run_block(block)
                except BlockFailed as exc:
                    outcome.failed.append((block, str(exc)))
                    if block.number not in expected:
                        break
                else:
                    outcome.passed.append(block)
        finally:
            try:
                self.close()
            except BlockFailed as exc:
                outcome.failed.append((blocks[-1], f"at the end of the page: {exc}"))
            outcome.seconds = time.monotonic() - start
        return outcome

    def run_block(self, block: Block) -> None:
        """Run, write or parse one block.

        Raises:
            BlockFailed: it failed, with what went wrong.
        """
        if block.file is not None:
            target = self.cwd / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            # A config file keeps its ports: a server command reads them as documented ones.
            configures = block.language in DATA_LANGUAGES
            target.write_text(block.text if configures else self.ports.rewrite(block.text))
        elif block.language in PYTHON_LANGUAGES:
            if self.python is None:
                self.python = PythonPrompt(self.cwd, self.env, self.logs / "python.log")
            self.python.run(dataclasses.replace(block, text=self.ports.rewrite(block.text)))
        elif block.language in SHELL_LANGUAGES:
            if self.shell is None:
                self.shell = Shell(self.cwd, self.env, self.logs, self.ports)
            for command in commands(block.text, block.language):
                try:
                    self.shell.run(command)
                except BlockFailed as exc:
                    raise BlockFailed(f"{block.where}: {exc}") from None
        elif block.language in DATA_LANGUAGES:
            _parse(block)
        elif block.language not in LITERAL_LANGUAGES:
            raise BlockFailed(f"{block.where}: no rule for a {block.language!r} block")

    def close(self) -> None:
        """Stop the page's Python, its servers and its shell.

        Raises:
            BlockFailed: a server's port stays open.
        """
        try:
            if self.python is not None:
                self.python.close()
                self.python = None
        finally:
            if self.shell is not None:
                self.shell.close()
                self.shell = None


def _parse(block: Block) -> None:
    """Check that a data block parses (a ``json`` block may be JSON lines, one per line)."""
    try:
        if block.language == "toml":
            tomllib.loads(block.text)
        elif block.language == "json":
            try:
                json.loads(block.text)
            except json.JSONDecodeError:
                for line in filter(str.strip, block.text.splitlines()):
                    json.loads(line)
        else:
            raise BlockFailed(
                f"{block.where}: a {block.language} block is written to a file "
                "(<!-- file: NAME -->) or marked not run; it is not parsed"
            )
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise BlockFailed(f"{block.where}: the {block.language} does not parse: {exc}") from None
