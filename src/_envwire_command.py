"""The ``envwire`` command's entry point, outside the ``envwire`` package.

Importing any module of the package runs ``envwire/__init__.py``, which imports Gymnasium (0.3-0.4
s) to register ``envwire/Remote-v0``; ``envwire --version`` needs none of that, so the command
starts here, answers ``--version`` from the string below, and imports the package (and the
server, :func:`envwire.cli.main`) only for every other command. This module holds the version:
``pyproject.toml`` and ``envwire.__version__`` read it from here.
"""

import sys
from collections.abc import Sequence

__all__ = ["__version__", "main"]

__version__ = "0.1.0"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        print(f"envwire {__version__}")
        return 0
    from envwire.cli import main as command  # the package and the server, for every other command

    return command(args)
