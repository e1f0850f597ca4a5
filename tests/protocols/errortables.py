"""Every error class envwire defines, for the tests of the protocols' error tables.

Each protocol's test writes out the value every class had before the tables existed (when each
class carried its protocol codes as attributes) and checks its table with :func:`check_table`.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Mapping

from envwire.errors import EnvwireError

__all__ = ["OPTIONAL", "check_table", "error_classes"]

#: Every module of envwire that defines an error class (imported so that all of them exist).
_ERROR_MODULES = (
    "envwire.errors",
    "envwire.optional",
    "envwire.protocols.arena",
    "envwire.protocols.dmenvrpc.status",
    "envwire.frontends.openenv.bindings",
    "envwire.frontends.openenv.mcp",
    "envwire.frontends.openenv.routes",
    "envwire.arena.errors",
    "envwire.arena.web.routes",
    "envwire.client.arena",
)

#: Classes of optional extras' modules (name -> module), checked only when the extra is there.
OPTIONAL = {
    "adapters.training.sb3.RemoteAttributeError": "envwire.adapters.training.sb3",
    "observe.datasets.RecordError": "envwire.observe.datasets",  # the minari extra
}


def error_classes() -> dict[str, type[EnvwireError]]:
    """``module.qualname`` (without the leading ``envwire.``) -> class, for every subclass of
    :class:`EnvwireError` envwire defines (those that tests define are left out)."""
    for module in _ERROR_MODULES:
        importlib.import_module(module)
    for module in OPTIONAL.values():
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    found: dict[str, type[EnvwireError]] = {}
    todo: list[type[EnvwireError]] = [EnvwireError]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("envwire."):
            found[f"{cls.__module__.removeprefix('envwire.')}.{cls.__qualname__}"] = cls
    return found


def check_table(
    expected: Mapping[str, object], value_of: Callable[[type[EnvwireError]], object]
) -> None:
    """Assert that ``value_of`` gives every error class its ``expected`` value, and that the
    expected table and envwire's classes name the same classes."""
    classes = error_classes()
    missing = set(expected) - set(classes) - set(OPTIONAL)
    assert not missing, f"expected classes that envwire no longer defines: {sorted(missing)}"
    unlisted = set(classes) - set(expected)
    assert not unlisted, f"error classes without an expected value: {sorted(unlisted)}"
    got = {name: value_of(cls) for name, cls in classes.items()}
    assert got == {name: expected[name] for name in classes}
