"""envwire's version, in a module of its own so that any layer can read it without importing the
package's public API. The string lives in the command's entry point (``_envwire_command``), which
answers ``envwire --version`` without importing this package."""

from _envwire_command import __version__

__all__ = ["__version__"]
