"""N remote env copies as a Stable-Baselines3 ``VecEnv``, one message each way per step.

:func:`make_vec_env` is the remote twin of SB3's own ``make_vec_env``: it opens one vector
session (gym-socket's ``VECTOR`` path or a dm_env_rpc vector world, whatever the URL's scheme
is) whose copies the server steps as a Gymnasium ``SyncVectorEnv`` in ``SameStep`` autoreset
mode, and gives it SB3's ``VecEnv`` interface:

- copy ``i`` of a seeded reset gets ``seed + i`` (``VecEnv.seed``), as ``DummyVecEnv`` does;
- a copy whose episode ends is reset in the same step; its last observation is
  ``info["terminal_observation"]``, ``info["TimeLimit.truncated"]`` is ``truncated and not
  terminated`` (on every step, as ``DummyVecEnv`` sets it), the step's own info is the copy's
  info and the reset's info goes to ``reset_infos``;
- rewards are ``float32`` and dones ``bool``, the dtypes of ``DummyVecEnv``'s buffers.

So the same seeds and actions give the same batches as a ``DummyVecEnv`` over local copies, and
an SB3 algorithm trained on either with the same seeds ends with the same parameters.

What cannot cross the wire raises :class:`RemoteAttributeError` (an ``UnsupportedError`` that
is also an ``AttributeError``, so ``has_attr`` answers False): ``get_attr`` knows the spaces,
``render_mode`` (None: the batched path carries no frames) and, over dm_env_rpc, the
properties the server publishes (``env.id``, ``episode.seed``, ``world.num_envs``, ...: see
``docs/protocols/dm_env_rpc.md``), one value for the whole world; ``set_attr``, ``env_method`` (but
``get_wrapper_attr``) and ``get_images`` raise. ``env_is_wrapped`` answers False for every
copy: the server's wrappers are not visible from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np

from envwire.adapters.connect import make_vec
from envwire.adapters.vector import RemoteVectorEnv
from envwire.errors import UnsupportedError
from envwire.optional import requires

with requires("sb3", "envwire.adapters.training.sb3"):
    from stable_baselines3.common.vec_env import VecEnv, VecMonitor
    from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs

__all__ = ["RemoteAttributeError", "SB3VecEnv", "make_vec_env", "unbatch_infos"]

#: NumPy's functions of every step as globals: the interpreter specializes a global's load, not
#: a NumPy module attribute's.
_logical_or, _logical_and, _logical_not = np.logical_or, np.logical_and, np.logical_not
_asarray, _F32 = np.asarray, np.dtype(np.float32)

#: Gymnasium's SameStep infos: the ended episode's last observation and its step's info.
_FINAL_OBS, _FINAL_INFO = "final_obs", "final_info"
#: The keys of a SameStep vector info where episodes ended and no copy had any other info.
_ENDED_ONLY = frozenset({_FINAL_OBS, f"_{_FINAL_OBS}", _FINAL_INFO, f"_{_FINAL_INFO}"})


class RemoteAttributeError(UnsupportedError, AttributeError):
    """An env attribute or method that the wire does not carry."""


def unbatch_infos(infos: dict[str, Any], num_envs: int) -> list[dict[str, Any]]:
    """Gymnasium's vector info (arrays with ``_key`` masks, nested dicts) as one dict per copy.

    A key without a mask belongs to every copy; a nested dict is split the same way.
    """
    split: list[dict[str, Any]] = [{} for _ in range(num_envs)]
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        parts = unbatch_infos(value, num_envs) if isinstance(value, dict) else list(value)
        mask = infos.get(f"_{key}")
        if mask is None:
            for i in range(num_envs):
                split[i][key] = parts[i]
            continue
        # the mask's items as Python bools: indexing an array makes a NumPy scalar each time
        flags = mask.tolist() if isinstance(mask, np.ndarray) else mask
        for i in range(num_envs):
            if flags[i]:
                split[i][key] = parts[i]
    return split


def _listed(mask: Any) -> list[Any]:
    """A mask's items as a list (of Python bools, for an array)."""
    items: list[Any] = mask.tolist() if isinstance(mask, np.ndarray) else list(mask)
    return items


class SB3VecEnv(VecEnv):  # type: ignore[misc,unused-ignore]  # Any without the sb3 extra
    """A remote vector env (``envwire.make_vec``, ``SameStep`` mode) as an SB3 ``VecEnv``.

    Args:
        vector: a connected ``RemoteVectorEnv`` whose autoreset mode is ``SameStep``.

    Raises:
        ValueError: ``vector`` resets in another autoreset mode.
    """

    def __init__(self, vector: RemoteVectorEnv) -> None:
        mode = vector.metadata.get("autoreset_mode")
        if mode != gymnasium.vector.AutoresetMode.SAME_STEP:
            raise ValueError(f"SB3 needs a SameStep vector env, not autoreset mode {mode}")
        self.vector = vector
        self.url: str = getattr(vector, "url", "")
        self._local: dict[str, object] = {
            "observation_space": vector.single_observation_space,
            "action_space": vector.single_action_space,
            "render_mode": None,
        }
        self._waiting = False
        super().__init__(
            vector.num_envs, vector.single_observation_space, vector.single_action_space
        )

    def reset(self) -> VecEnvObs:
        """Reset every copy with the seeds and options set since the last reset.

        Raises:
            UnsupportedError: the copies were given different options (the batched path
                passes one options dict to every copy).
        """
        if self._waiting:  # SB3's contract: reset cancels a step in flight
            self.step_wait()
        seeds = None if all(s is None for s in self._seeds) else list(self._seeds)
        observations, infos = self.vector.reset(seed=seeds, options=self._shared_options())
        self.reset_infos = unbatch_infos(infos, self.num_envs)
        self._reset_seeds()
        self._reset_options()
        return observations  # type: ignore[no-any-return,unused-ignore]

    def _shared_options(self) -> dict[str, Any] | None:
        first = self._options[0]
        if any(options != first for options in self._options[1:]):
            raise UnsupportedError(
                "different reset options per copy: the batched path passes one options dict to "
                "every copy (use set_options(dict))"
            )
        return dict(first) if first else None

    def step_async(self, actions: np.ndarray) -> None:
        """Send the batch of actions; the server steps while the caller goes on."""
        self.vector.step_async(actions)
        self._waiting = True

    def step_wait(self) -> tuple[VecEnvObs, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """The step sent by :meth:`step_async`, in SB3's form (see the module docstring)."""
        self._waiting = False
        return self._stepped(self.vector.step_wait_finals())

    def step(
        self, actions: np.ndarray
    ) -> tuple[VecEnvObs, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """SB3's step (:meth:`step_async`, then :meth:`step_wait`), in one call to the vector
        env (``RemoteVectorEnv.step_finals``)."""
        if self._waiting:
            return super().step(actions)  # type: ignore[no-any-return,unused-ignore]
        return self._stepped(self.vector.step_finals(actions))

    def _stepped(
        self,
        step: tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any], np.ndarray | None],
    ) -> tuple[VecEnvObs, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        """A step of the vector env (its final observations kept apart, or None), in SB3's
        form."""
        observations, rewards, terminated, truncated, infos, finals = step
        dones = _logical_or(terminated, truncated)
        # (lists of Python bools: NumPy's any() and flatnonzero() are Python functions that
        # cost more than the few items they look at)
        ended: list[bool] = dones.tolist()
        count = ended.count(True)
        if finals is not None and len(finals) == count:
            # The usual step, read lean: no info, and the final observations of the ended
            # copies (their final infos empty), without Gymnasium's vector info around them.
            if True in truncated.tolist():
                limits = _logical_and(truncated, _logical_not(terminated)).tolist()
                step_infos = [{"TimeLimit.truncated": limit} for limit in limits]
            else:
                step_infos = [{"TimeLimit.truncated": False} for _ in ended]
            if count:
                # each row as Gymnasium's final_obs holds it: a view (a 0-d array for a batch
                # of scalars), by index (iterating an array ends in a formatted IndexError)
                scalars = finals.ndim == 1
                reset_infos = self.reset_infos
                j = 0
                for i, done in enumerate(ended):
                    if done:
                        reset_infos[i] = {}
                        step_infos[i]["terminal_observation"] = (
                            finals[j, ...] if scalars else finals[j]
                        )
                        j += 1
            return observations, rewards.astype(_F32), dones, step_infos
        # DummyVecEnv's flag, on every copy and every step: a time limit cut the episode short
        limits = _logical_and(truncated, _logical_not(terminated)).tolist()
        if not infos and True not in ended:
            # the usual step of a training run: no copy ended and none has info, so there is
            # nothing to split per copy (SameStep infos always carry an ended copy's final_obs)
            step_infos = [{"TimeLimit.truncated": limit} for limit in limits]
        else:
            step_infos = self._ended_only(infos, dones, limits) or self._split_infos(
                infos, dones, limits
            )
        return observations, _asarray(rewards, _F32), dones, step_infos

    def _ended_only(
        self, infos: dict[str, Any], dones: np.ndarray, limits: list[bool]
    ) -> list[dict[str, Any]] | None:
        """:meth:`_split_infos`'s result for the usual step where episodes ended: the infos
        hold only the ended copies' final observations and empty final infos, and every
        other copy has none; None for any other vector info."""
        if infos.keys() != _ENDED_ONLY or infos[_FINAL_INFO]:
            return None
        ended = dones.tolist()
        if _listed(infos[f"_{_FINAL_OBS}"]) != ended or _listed(infos[f"_{_FINAL_INFO}"]) != ended:
            return None
        # every copy's dict first (DummyVecEnv's order of keys), then the ended copies' own
        final_obs = infos[_FINAL_OBS]
        step_infos = [{"TimeLimit.truncated": limit} for limit in limits]
        reset_infos = self.reset_infos
        for i in dones.nonzero()[0].tolist():
            reset_infos[i] = {}
            step_infos[i]["terminal_observation"] = final_obs[i]
        return step_infos

    def _split_infos(
        self, infos: dict[str, Any], dones: np.ndarray, limits: list[bool]
    ) -> list[dict[str, Any]]:
        """The vector info as one dict per copy; an ended copy's own step info becomes its
        step info (with ``terminal_observation``) and the rest its entry of ``reset_infos``."""
        step_infos = unbatch_infos(infos, self.num_envs)
        for i in np.flatnonzero(dones).tolist():
            info = step_infos[i]
            final_obs = info.pop(_FINAL_OBS)
            step_info = dict(info.pop(_FINAL_INFO, {}))
            self.reset_infos[i] = info
            step_info["terminal_observation"] = final_obs
            step_infos[i] = step_info
        for info, limit in zip(step_infos, limits, strict=True):
            info["TimeLimit.truncated"] = limit
        return step_infos

    def close(self) -> None:
        """Close the session (the server frees the copies at once)."""
        self.vector.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """An attribute of each copy: the spaces and ``render_mode``, or a dm_env_rpc property.

        Raises:
            RemoteAttributeError: the attribute does not cross the wire.
        """
        count = len(list(self._get_indices(indices)))
        if attr_name in self._local:
            return [self._local[attr_name]] * count
        read = getattr(self.vector.transport, "read_property", None)
        if read is not None and "." in attr_name:
            return [read(attr_name)] * count
        where = "the dm_env_rpc properties" if read is not None else "the spaces"
        raise RemoteAttributeError(
            f"attribute {attr_name!r} of the remote env {self.url!r} does not cross the wire; "
            f"get_attr knows {sorted(self._local)} and {where}"
        )

    def set_attr(self, attr_name: str, value: object, indices: VecEnvIndices = None) -> None:
        """Raises RemoteAttributeError: a remote env's attributes cannot be set from here (seed
        resets with ``seed()``, pass options with ``set_options()``)."""
        raise RemoteAttributeError(
            f"cannot set {attr_name!r} on the remote env {self.url!r}: its attributes live on "
            "the server (seed resets with seed(), pass reset options with set_options())"
        )

    def env_method(
        self,
        method_name: str,
        *method_args: object,
        indices: VecEnvIndices = None,
        **kwargs: object,
    ) -> list[Any]:
        """Only ``get_wrapper_attr`` (= :meth:`get_attr`); other methods raise
        RemoteAttributeError, since the wire carries no method calls."""
        name = method_args[0] if len(method_args) == 1 else None
        if method_name == "get_wrapper_attr" and isinstance(name, str) and not kwargs:
            return self.get_attr(name, indices)
        raise RemoteAttributeError(
            f"cannot call {method_name!r} on the remote env {self.url!r}: the wire carries "
            "reset and step, not method calls"
        )

    def env_is_wrapped(
        self,
        wrapper_class: type[gymnasium.Wrapper[Any, Any, Any, Any]],
        indices: VecEnvIndices = None,
    ) -> list[bool]:
        """False for every copy: the server's wrappers are not visible from the client."""
        return [False for _ in self._get_indices(indices)]

    def get_images(self) -> Sequence[np.ndarray | None]:
        """Raises RemoteAttributeError: the batched path carries no frames."""
        raise RemoteAttributeError(f"the batched path of {self.url!r} carries no frames")

    def __repr__(self) -> str:
        return f"SB3VecEnv({self.url!r}, num_envs={self.num_envs})"


def make_vec_env(
    url: str,
    n_envs: int = 1,
    *,
    seed: int | None = None,
    monitor: bool = True,
    workers: int = 1,
    **kwargs: object,
) -> VecEnv:
    """Connect to a served env and step ``n_envs`` copies of it as an SB3 ``VecEnv``.

    The remote twin of ``stable_baselines3.common.env_util.make_vec_env``: copy ``i`` gets
    ``seed + i`` at the first reset, and (with ``monitor``) a ``VecMonitor`` adds the
    ``info["episode"]`` statistics that SB3's ``Monitor`` would. ``workers`` and other keyword
    arguments go to :func:`envwire.make_vec` (``timeout``, ...).

    Raises:
        InvalidArgumentError: a scheme without a batched path, or bad options.
        TransportError: the server cannot be reached, or refused the env.
    """
    vector = make_vec(url, n_envs, autoreset_mode="SameStep", workers=workers, **kwargs)
    env = SB3VecEnv(vector)
    if seed is not None:
        env.action_space.seed(seed)
    env.seed(seed)
    return VecMonitor(env) if monitor else env
