"""envwire's version (``pyproject.toml`` holds it), in a module of its own so that any layer can
read it without importing the package's public API."""

from importlib.metadata import version

__all__ = ["__version__"]

__version__ = version("envwire")
