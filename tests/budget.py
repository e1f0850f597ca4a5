"""Hypothesis example counts that follow the loaded profile.

A test that asks for ``examples(N)`` gets N in the suite's profile (``envwire``, Hypothesis'
100 examples a test) and a tenth in the fast lane's (``fast``, 10: docs/development.md), so that
the fast lane runs every property test, each with fewer examples.
"""

from __future__ import annotations

from hypothesis import settings

__all__ = ["examples"]

#: The example count of the suite's profile, against which the loaded one is scaled.
_FULL = 100


def examples(count: int) -> int:
    """``count`` scaled by the loaded profile's example count (at least 1)."""
    return max(1, count * settings.default.max_examples // _FULL)
