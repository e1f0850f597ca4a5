"""envwire: serve any environment to any agent over the protocols agents already speak.

The public API: :func:`make` connects to a served env by URL and returns a ``gymnasium.Env``;
:class:`EnvwireError` is the root of every error envwire raises. Importing envwire also
registers ``envwire/Remote-v0`` and the built-in envs with Gymnasium, so
``gymnasium.make("envwire/Remote-v0", url="gym-socket://127.0.0.1:5001/CartPole-v1")`` works.
"""

import gymnasium

import envwire.envs  # noqa: F401  (registers the built-in envs with Gymnasium)
from envwire.client import make, make_vec
from envwire.errors import EnvwireError

__all__ = ["EnvwireError", "make", "make_vec"]
__version__ = "0.1.0"

if "envwire/Remote-v0" not in gymnasium.registry:
    gymnasium.register(
        "envwire/Remote-v0", entry_point="envwire.client:make", disable_env_checker=True
    )
