"""Typed reading of the ``settings`` maps of CreateWorld, JoinWorld, Reset and ResetWorld."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from envwire import jsonio
from envwire.errors import InvalidArgumentError
from envwire.protocols.dmenvrpc.tensors import MAX_SETTING_ELEMENTS, TensorMessage, unpack

__all__ = [
    "SETTINGS",
    "Setting",
    "read_settings",
]

SettingKind = Literal["str", "int", "bool", "seed", "mask", "kwargs"]


@dataclass(frozen=True, slots=True)
class Setting:
    """One key a request's ``settings`` map may hold.

    Kinds: ``str``, ``int`` (at least ``minimum``), ``bool``; ``seed`` (an integer >= 0, or an
    integer vector with one seed per copy of a vector world, -1 = unseeded); ``mask`` (a bool
    vector); ``kwargs`` (constructor arguments: a JSON object, and/or one ``NAME.ARG`` setting
    per argument, see :func:`read_settings`).
    """

    name: str
    kind: SettingKind
    description: str
    required: bool = False
    minimum: int = 0


_SEED = "the seed of the next episode (>= 0; a vector world also takes one seed per copy)"

#: The settings each request understands (all others are errors).
SETTINGS: dict[str, tuple[Setting, ...]] = {
    "create_world": (
        Setting("env", "str", "the env id, from the server's catalog", required=True),
        Setting("seed", "seed", "the seed of the world's first episode (as for reset)"),
        Setting(
            "players",
            "int",
            "how many connections may join the world at once (default 1)",
            minimum=1,
        ),
        Setting(
            "kwargs",
            "kwargs",
            "constructor arguments for the env, as a JSON object or one 'kwargs.NAME' setting "
            "each; only those the server opens to clients (client_kwargs)",
        ),
        Setting(
            "num_envs",
            "int",
            "make a vector world: this many copies of the env, stepped together",
            minimum=1,
        ),
        Setting(
            "autoreset_mode",
            "str",
            "a vector world's autoreset mode: NextStep (default), SameStep or Disabled",
        ),
        Setting(
            "workers",
            "int",
            "split a vector world's copies over this many worker processes (default 1)",
            minimum=1,
        ),
    ),
    "join_world": (
        Setting(
            "player", "int", "the seat to take in a multi-player world (default: the first free)"
        ),
        Setting(
            "discount", "bool", "add a 'discount' observation (see docs/protocols/dm_env_rpc.md)"
        ),
        Setting(
            "envwire.extras", "bool", "add 'envwire.truncated' and 'envwire.info' observations"
        ),
    ),
    "reset": (
        Setting("seed", "seed", _SEED),
        Setting(
            "reset_mask",
            "mask",
            "the copies of a vector world to reset (bool [num_envs]); the others go on",
        ),
    ),
    "reset_world": (Setting("seed", "seed", _SEED),),
}


def read_settings(settings: Mapping[str, TensorMessage], request: str) -> dict[str, Any]:
    """The typed values of a request's ``settings`` map.

    A ``kwargs`` setting collects constructor arguments into one dict: the ``kwargs`` setting
    itself is a JSON object (a STRING tensor), and each ``kwargs.NAME`` setting is one more
    argument, with dots for nesting (``kwargs.arm.length`` sets ``{"arm": {"length": ...}}``).
    Scalar tensors give Python scalars (str, int, float, bool), others nested lists.

    Args:
        settings: the protobuf map (name -> Tensor).
        request: ``create_world``, ``join_world``, ``reset`` or ``reset_world``.

    Raises:
        InvalidArgumentError: an unknown or missing required setting, a value of the wrong
            type, or an argument set twice (the message names the setting and says what was
            expected).
    """
    known = {s.name: s for s in SETTINGS[request]}
    result: dict[str, Any] = {}
    arguments: dict[str, list[tuple[tuple[str, ...], object, str]]] = {}
    for name, message in settings.items():
        setting = known.get(name)
        parent = known.get(name.partition(".")[0])
        if setting is None and parent is not None and parent.kind == "kwargs":
            path = tuple(name.split(".")[1:])
            where = f"{request} setting {name!r}"
            if not all(path):
                raise InvalidArgumentError(f"{where}: every '.' must be followed by a name")
            arguments.setdefault(parent.name, []).append((path, _argument(message, where), name))
        elif setting is None:
            names = ", ".join(known) or "none"
            raise InvalidArgumentError(f"unknown {request} setting {name!r} (known: {names})")
        elif setting.kind == "kwargs":
            found = _setting_value(setting, message, request)
            assert isinstance(found, dict)  # a kwargs setting reads as a JSON object
            items = arguments.setdefault(name, [])
            items += [((key,), value, name) for key, value in found.items()]
        else:
            result[name] = _setting_value(setting, message, request)
    for name, items in arguments.items():
        result[name] = _nest(items, request)
    for setting in known.values():
        if setting.required and setting.name not in result:
            raise InvalidArgumentError(
                f"{request} needs the setting {setting.name!r} ({setting.description})"
            )
    return result


def _argument(message: TensorMessage, where: str) -> object:
    """A ``kwargs.NAME`` tensor as a Python value: a scalar, or nested lists."""
    array = unpack(message, where, MAX_SETTING_ELEMENTS)
    if array.ndim == 0:
        value = array[()]
        return value.item() if isinstance(value, np.generic) else value
    return array.tolist()


def _nest(items: list[tuple[tuple[str, ...], object, str]], request: str) -> dict[str, Any]:
    """Arguments by path as one nested dict; no path may be set twice or inside another."""
    items.sort(key=lambda item: item[0])
    result: dict[str, Any] = {}
    for (path, _, name), (later, _, other) in itertools.pairwise(items):
        if later[: len(path)] == path:
            raise InvalidArgumentError(
                f"{request} settings {name!r} and {other!r} both set the argument "
                f"{'.'.join(path)!r}"
            )
    for path, value, _ in items:
        target = result
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value
    return result


def _setting_value(setting: Setting, message: TensorMessage, request: str) -> object:
    """The value of a setting of a known kind (a kwargs setting's: a dict).

    Raises:
        InvalidArgumentError: the tensor does not hold a value of the setting's kind.
    """
    where = f"{request} setting {setting.name!r}"
    array = unpack(message, where, MAX_SETTING_ELEMENTS)
    match setting.kind:
        case "seed" if array.ndim == 1 and array.dtype.kind in "iu":
            if array.size and int(array.min()) < -1:
                raise InvalidArgumentError(
                    f"{where} must hold seeds >= 0 (or -1 for unseeded), got {array.tolist()}"
                )
            return [None if s < 0 else int(s) for s in array.tolist()]
        case "mask" if array.ndim == 1 and array.dtype == np.bool_:
            return array
        case "mask":
            raise InvalidArgumentError(
                f"{where} must be a bool vector (one per copy), got {array.dtype.name} "
                f"of shape {list(array.shape)}"
            )
    if array.size != 1:
        raise InvalidArgumentError(f"{where} must be a scalar, got shape {list(array.shape)}")
    value = array.reshape(-1)[0]
    match setting.kind:
        case "str" if isinstance(value, str):
            return value
        case "int" | "seed" if array.dtype.kind in "iu":
            if int(value) < setting.minimum:
                raise InvalidArgumentError(
                    f"{where} must be >= {setting.minimum}, got {int(value)}"
                )
            return int(value)
        case "bool" if array.dtype.kind in "biu" and int(value) in (0, 1):
            return bool(value)
        case "kwargs" if isinstance(value, str):
            try:
                found = jsonio.loads(value)
            except ValueError as exc:
                raise InvalidArgumentError(f"{where} is not JSON: {exc}") from None
            if isinstance(found, dict):
                return found
    kinds = {
        "str": "a string",
        "int": "an integer",
        "bool": "a bool",
        "seed": "an integer, or a vector of integers",
        "kwargs": "a JSON object (as a string)",
    }
    shown = repr(value.item() if isinstance(value, np.generic) else value)
    raise InvalidArgumentError(f"{where} must be {kinds[setting.kind]}, got {shown}")
