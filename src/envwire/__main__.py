"""``python -m envwire``: the same as the ``envwire`` command."""

import sys

from envwire.cli import main

if __name__ == "__main__":  # worker processes import this module again: do nothing then
    sys.exit(main())
