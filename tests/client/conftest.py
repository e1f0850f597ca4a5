"""The client tests run against the servers of the front-end tests."""

from tests.frontends.openenv.conftest import base, server  # noqa: F401
