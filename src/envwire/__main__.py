"""``python -m envwire`` and the ``envwire`` command: :func:`envwire.cli.main`, but
``envwire --version`` is answered here, without importing the server (seconds of imports for
one line)."""

import sys
from collections.abc import Sequence

from envwire._version import __version__

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        print(f"envwire {__version__}")
        return 0
    from envwire.cli import main as command  # the server's imports, for every other command

    return command(args)


if __name__ == "__main__":  # worker processes import this module again: do nothing then
    sys.exit(main())
