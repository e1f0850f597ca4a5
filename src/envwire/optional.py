"""The optional extras, and the error that names the one to install.

Features that need a library envwire does not depend on (a training library, Ray, Minari,
dm_control) import it inside :func:`requires`: when the import fails, the user reads which
extra installs it, and, for the extras that need PyTorch, how to get its CPU build first (a bare
``torch`` requirement resolves to a CUDA build of several gigabytes)::

    with requires("sb3", "envwire.adapters.training.sb3"):
        from stable_baselines3.common.vec_env import VecEnv

:class:`MissingExtraError` is an :class:`ImportError`, so code that tries an optional import
keeps working, and a :class:`~envwire.errors.ConfigError`, so ``envwire serve`` reports it in
one line as it does other settings it cannot honour.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from envwire.errors import ConfigError

__all__ = ["EXTRAS", "TORCH_CPU", "MissingExtraError", "install_line", "requires"]

#: Each extra, and what it installs (in words, for messages).
EXTRAS = {
    "sb3": "Stable-Baselines3",
    "torchrl": "TorchRL",
    "rllib": "Ray RLlib",
    "ray": "Ray",
    "minari": "Minari",
    "dm-control": "dm_control",
}
#: The extras whose libraries need PyTorch.
_NEED_TORCH = frozenset({"sb3", "torchrl", "rllib"})
#: How to install PyTorch's CPU build (before the extra, so that pip keeps it).
TORCH_CPU = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def install_line(extra: str) -> str:
    """The commands that install ``extra``: ``pip install 'envwire[extra]'``, after PyTorch's
    CPU build for the extras that need PyTorch.

    Raises:
        KeyError: no such extra.
    """
    if extra not in EXTRAS:
        raise KeyError(f"no extra named {extra!r}; the extras are {', '.join(EXTRAS)}")
    line = f"pip install 'envwire[{extra}]'"
    if extra in _NEED_TORCH:
        line += f" (PyTorch's CPU build first, where no GPU is wanted: {TORCH_CPU})"
    return line


class MissingExtraError(ConfigError, ImportError):
    """A feature needs an optional extra that is not installed (or does not import).

    Attributes:
        extra: the extra's name, as in ``pip install 'envwire[extra]'``.
        feature: what needs it (a module, a setting).
    """

    code = "missing_extra"

    def __init__(self, extra: str, feature: str, reason: str) -> None:
        super().__init__(
            f"{feature} needs {EXTRAS[extra]}, which is not installed: {install_line(extra)} "
            f"({reason})"
        )
        self.extra = extra
        self.feature = feature


@contextmanager
def requires(extra: str, feature: str) -> Iterator[None]:
    """Run the ``with`` block's imports; an ImportError among them becomes a
    :class:`MissingExtraError` that names ``extra``.

    Raises:
        MissingExtraError: an import of the block failed.
        KeyError: ``extra`` is not an extra (a mistake in envwire).
    """
    install_line(extra)  # a wrong name fails here, also when the imports succeed
    try:
        yield
    except ImportError as exc:
        if isinstance(exc, MissingExtraError):
            raise
        raise MissingExtraError(extra, feature, str(exc)) from exc
