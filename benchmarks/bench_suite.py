"""The whole speed suite, as ``envwire bench`` runs it (``--quick`` for a smoke run)."""

from __future__ import annotations

import argparse

from envwire import bench


def main() -> int:
    parser = argparse.ArgumentParser(description=bench.__doc__)
    bench.add_arguments(parser)
    return bench.run_from_args(parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
