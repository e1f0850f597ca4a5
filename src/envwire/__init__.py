"""envwire: serve any environment to any agent over the protocols agents already speak.

The public API: :func:`make` connects to a served env by URL and returns a ``gymnasium.Env``
(:func:`make_vec`: a ``gymnasium.vector.VectorEnv``), both from :mod:`envwire.adapters.connect`;
:class:`EnvwireError` is the root of every error envwire raises. Importing envwire also
registers ``envwire/Remote-v0`` and the built-in envs with Gymnasium, so
``gymnasium.make("envwire/Remote-v0", url="gym-socket://127.0.0.1:5001/CartPole-v1")`` works.
"""

import os

import gymnasium

import envwire.envs  # noqa: F401  (registers the built-in envs with Gymnasium)
from envwire._version import __version__ as __version__
from envwire.adapters.connect import make, make_vec
from envwire.errors import EnvwireError

__all__ = ["EnvwireError", "make", "make_vec"]

if "envwire/Remote-v0" not in gymnasium.registry:
    gymnasium.register(
        "envwire/Remote-v0", entry_point="envwire.adapters.connect:make", disable_env_checker=True
    )

# gRPC's C core logs at INFO to stderr unless told otherwise (a line for each failed TLS
# handshake, on the client and on the server); its documented default is ERROR. It reads the
# setting once, when grpc is first imported, which nothing above does: envwire imports grpc only
# with the dm_env_rpc front end and client. A value the user set stays.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
