"""``python -m envwire``: the ``envwire`` command (``_envwire_command.main``)."""

import sys

from _envwire_command import main

__all__ = ["main"]

if __name__ == "__main__":  # worker processes import this module again: do nothing then
    sys.exit(main())
