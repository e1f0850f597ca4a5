"""dm_env environments (DeepMind's API: dm_control's suite, your own simulators).

envwire serves a ``dm_env.Environment`` made by a class, a factory, or dm_control's suite by
name (``dm_control/cartpole-swingup``). Over dm_env_rpc its own specs, rewards, discounts and
step types travel as they are; every other front end serves its Gymnasium form,
:class:`DmEnvGym`, converted by Shimmy's rules (``docs/protocols/dm_env_rpc.md``).
"""

from envwire.kinds.dm_env.gymenv import DmEnvGym, as_gymnasium, is_dm_env, seed_dm_env
from envwire.kinds.dm_env.specs import DmSpecs, space_of, to_dm, to_gym

__all__ = [
    "DmEnvGym",
    "DmSpecs",
    "as_gymnasium",
    "is_dm_env",
    "seed_dm_env",
    "space_of",
    "to_dm",
    "to_gym",
]
