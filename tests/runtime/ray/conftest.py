"""One local Ray (2 CPUs) per test module of the Ray runtime."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.ray_helpers import local_ray as start


@pytest.fixture(scope="module")
def local_ray() -> Iterator[str]:
    """The GCS address of a local Ray shared by the module's tests."""
    with start() as address:
        yield address
