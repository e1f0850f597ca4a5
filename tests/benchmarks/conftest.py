"""The benchmarks' own modules (``benchmarks/``, which import each other by their bare names)
on the import path, for the tests of their baselines."""

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))
