"""Remote envs for RLlib: an env creator that RLlib's env runners call on every worker.

RLlib's single-agent env runners build their envs with ``gymnasium.make_vec`` from a registered
creator. :func:`env_creator` answers both of its calls: ``config["url"]`` names the served env;
called with ``num_envs`` (RLlib's ``gym_env_vectorize_mode="vector_entry_point"``) it opens one
vector session of that many copies, stepped with one message each way whatever their number,
in Gymnasium's ``NextStep`` autoreset mode, which RLlib's runners expect; called without, it
opens one remote env (RLlib then vectorizes locally, one connection per copy).

    from ray.rllib.algorithms.ppo import PPOConfig
    from envwire.adapters.training.rllib import register

    register()                                   # as "envwire", on the driver
    config = (PPOConfig()
              .environment("envwire", env_config={"url": "gym-socket://127.0.0.1:5001/CartPole-v1"})
              .env_runners(num_envs_per_env_runner=8, gym_env_vectorize_mode="vector_entry_point"))

Every other key of ``env_config`` goes to :func:`envwire.make` / :func:`envwire.make_vec`
(``timeout``, ``workers``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import gymnasium

from envwire.adapters.connect import make, make_vec
from envwire.adapters.vector import RemoteVectorEnv
from envwire.errors import InvalidArgumentError
from envwire.optional import requires

if TYPE_CHECKING:
    from envwire.client.openenv import TypedClient

__all__ = ["env_creator", "register"]

#: Keys of RLlib's EnvContext that are not arguments for envwire.
_RLLIB_KEYS = frozenset({"url", "num_envs"})


def env_creator(
    config: Mapping[str, Any],
) -> gymnasium.Env[Any, Any] | TypedClient | RemoteVectorEnv:
    """A remote env (``num_envs`` absent) or vector env (``num_envs`` given) for RLlib.

    Raises:
        InvalidArgumentError: no ``url`` in the config, or a URL envwire cannot use.
        TransportError: the server cannot be reached, or refused the env.
    """
    if "url" not in config:
        raise InvalidArgumentError(
            "env_config needs 'url' (e.g. gym-socket://127.0.0.1:5001/CartPole-v1)"
        )
    url = str(config["url"])
    kwargs = {key: value for key, value in config.items() if key not in _RLLIB_KEYS}
    if config.get("num_envs") is None:
        return make(url, **kwargs)
    kwargs.setdefault("autoreset_mode", "NextStep")
    return make_vec(url, int(config["num_envs"]), **kwargs)


def register(name: str = "envwire") -> str:
    """Register :func:`env_creator` with Ray Tune's registry under ``name`` (returns it).

    Raises:
        MissingExtraError: Ray is not installed (an ImportError that names the rllib extra).
    """
    with requires("rllib", "envwire.adapters.training.rllib.register"):
        from ray.tune.registry import register_env

    register_env(name, env_creator)
    return name
