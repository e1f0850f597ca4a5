"""Remote envs as TorchRL environments.

TorchRL's ``GymWrapper`` takes any ``gymnasium.Env``, and Gymnasium vector envs as batched
envs, so envwire's clients plug in unchanged; these two functions only pick the settings:

- :func:`make_env` wraps ``envwire.make(url)``: batch size ``[]``, one message per step;
- :func:`make_vec_env` wraps ``envwire.make_vec(url, num_envs)``: batch size ``[num_envs]``,
  one message per step for all copies. Its default autoreset mode is Gymnasium's
  ``Disabled``, the one TorchRL prefers: TorchRL resets the copies that are done with a
  ``reset_mask``, which the batched paths of gym-socket and dm_env_rpc carry.

``GymEnv("envwire/Remote-v0", url=...)`` works too (envwire registers that id with Gymnasium).
Both pass TorchRL's ``check_env_specs``, and with the same seeds and actions their rollouts equal
those of ``GymWrapper`` over the same env in-process.
"""

from __future__ import annotations

from envwire.adapters.connect import make, make_vec
from envwire.optional import requires

with requires("torchrl", "envwire.adapters.training.torchrl"):
    from torchrl.envs import EnvBase, GymWrapper

__all__ = ["make_env", "make_vec_env"]


def make_env(url: str, **kwargs: object) -> EnvBase:
    """``envwire.make(url, **kwargs)`` as a TorchRL env.

    Raises:
        InvalidArgumentError: unknown scheme or malformed URL.
        TransportError: the server cannot be reached, or refused the env.
    """
    return GymWrapper(make(url, **kwargs))


def make_vec_env(
    url: str,
    num_envs: int,
    *,
    autoreset_mode: str = "Disabled",
    workers: int = 1,
    **kwargs: object,
) -> EnvBase:
    """``num_envs`` copies stepped together (``envwire.make_vec``) as one batched TorchRL env.

    ``autoreset_mode`` is ``Disabled`` (TorchRL resets done copies itself) or ``SameStep``
    (TorchRL reads the last observation from the infos); ``workers`` and other keyword
    arguments go to :func:`envwire.make_vec` (``timeout``, ...).

    Raises:
        InvalidArgumentError: a scheme without a batched path, or bad options.
        RuntimeError: TorchRL refused the autoreset mode (``NextStep``).
        TransportError: the server cannot be reached, or refused the env.
    """
    vector = make_vec(url, num_envs, autoreset_mode=autoreset_mode, workers=workers, **kwargs)
    try:
        return GymWrapper(vector)
    except Exception:
        vector.close()
        raise
