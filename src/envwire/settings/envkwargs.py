"""The ``kwargs`` of the served envs, checked at start against what each env's constructor (or
factory) takes, so that a typo stops ``envwire serve`` before it listens instead of reaching the
first client as a ``TypeError``."""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping

import dm_env

from envwire.registry import DM_CONTROL, EnvSpec

__all__ = ["kwargs_errors"]

#: What ``gymnasium.make`` takes itself, beside the env's constructor arguments.
_GYMNASIUM_MAKE = ("max_episode_steps", "disable_env_checker")
#: What a ``dm_env`` env's Gymnasium form takes (``EnvSpec.make`` hands them to it).
_DM_VIEW = ("render_mode", "render_kwargs")


def kwargs_errors(catalog: Mapping[str, EnvSpec]) -> dict[str, str]:
    """Each env of ``catalog`` whose ``kwargs`` its constructor (or factory) does not take, with
    one line naming the key (and the nearest parameter): the keys are bound to the signature,
    nothing is made. Envs whose entry point cannot be loaded, takes ``**kwargs`` or has no
    signature to read are left out, as are OpenEnv's own envs and dm_control's suite.
    """
    errors: dict[str, str] = {}
    for env_id, spec in catalog.items():
        if not spec.kwargs or spec.openenv is not None or spec.entry_point.startswith(DM_CONTROL):
            continue
        try:
            target = spec.target()
            signature = inspect.signature(target) if target is not None else None
        except Exception:  # load_errors reports it; a signature that cannot be read says nothing
            continue
        if target is None or signature is None:
            continue
        params = signature.parameters.values()
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            continue
        named = [p.name for p in params if p.kind is not inspect.Parameter.POSITIONAL_ONLY]
        own = _GYMNASIUM_MAKE if spec.entry_point.startswith("gym:") else ()
        if isinstance(target, type) and issubclass(target, dm_env.Environment):
            own = _DM_VIEW
        unknown = [key for key in spec.kwargs if key not in named and key not in own]
        if unknown:
            errors[env_id] = _line(unknown[0], getattr(target, "__qualname__", ""), named)
    return errors


def _line(key: str, name: str, named: list[str]) -> str:
    close = difflib.get_close_matches(key, named, n=1, cutoff=0.6)
    hint = f": did you mean {close[0]!r}?" if close else ""
    takes = ", ".join(named) or "no keyword arguments"
    return f"kwargs has {key!r}, which {name or 'the env'} does not take{hint} (it takes {takes})"
