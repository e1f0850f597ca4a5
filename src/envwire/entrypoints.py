"""Loading ``package.module:attr`` strings (the catalog's entry points, OpenEnv's app and model
names), with the same errors wherever they are named."""

from __future__ import annotations

import importlib

from envwire.errors import ConfigError

__all__ = ["import_attr"]


def import_attr(entry: str, label: str) -> object:
    """Import ``module:attr`` (``attr`` may be dotted); ``label`` names it in errors.

    Returns:
        The attribute, whatever it is: the caller checks that it is what it needs.

    Raises:
        ConfigError: ``entry`` is malformed, its module cannot be imported (ImportError), or
            the module has no such attribute. Anything else the module's own top-level code
            raises propagates.
    """
    module_name, sep, attr = entry.partition(":")
    if not sep or not module_name or not attr:
        module, dot, name = entry.rpartition(".")
        fixed = f" ({module}:{name}?)" if not sep and dot and module and name else ""
        raise ConfigError(f"{label} must look like 'package.module:Name'{fixed}")
    try:
        target: object = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{label}: cannot import {module_name}: {exc}") from exc
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ConfigError(f"{label}: {module_name} has no {attr}") from None
    return target
