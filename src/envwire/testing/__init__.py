"""The conformance kit and test helpers, shipped so any envwire front end can be checked.

- :class:`ConformanceTests`: black-box checks every front end passes;
- :class:`ServerProcess`: a real ``envwire serve`` on free ports (:func:`wait_until` waits for
  what it does in its own time);
- :mod:`envwire.testing.envs`: envs with rich spaces, crashes, hangs and exceptions.
"""

from envwire.testing.conformance import (
    CAPACITY,
    SERVER_ARGS,
    STEP_TIMEOUT,
    ConformanceTests,
    assert_same_sample,
)
from envwire.testing.serving import CONFORMANCE_ENVS, ServerProcess, wait_until

__all__ = [
    "CAPACITY",
    "CONFORMANCE_ENVS",
    "SERVER_ARGS",
    "STEP_TIMEOUT",
    "ConformanceTests",
    "ServerProcess",
    "assert_same_sample",
    "wait_until",
]
