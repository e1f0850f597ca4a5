"""The protocol-neutral vocabulary every front end speaks.

A front end's codec turns bytes into one of the request messages below; the session answers with
the matching reply (or raises an :class:`~envwire.errors.EnvwireError`); the codec turns the reply
back into bytes. Values inside messages are native: actions and observations are the samples of
the env's spaces (numpy arrays, ints, tuples, dicts), never wire encodings.

Samples are typed ``object``: the messages only carry them, and whoever reads one knows the
space it belongs to (and narrows it, or hands it to the env or a codec that takes any sample).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np
import numpy.typing as npt
from gymnasium.spaces import Space
from gymnasium.vector import AutoresetMode

from envwire.errors import InvalidArgumentError

__all__ = [
    "AUTORESET_MODES",
    "AutoresetMode",
    "Close",
    "FinalsInfo",
    "GetSpace",
    "Monitor",
    "MonitorReply",
    "Ok",
    "Render",
    "RenderReply",
    "Request",
    "Reply",
    "Reset",
    "ResetReply",
    "SampleAction",
    "SampleReply",
    "SpaceReply",
    "SpaceKind",
    "Step",
    "StepReply",
    "VectorStepReply",
    "autoreset_mode",
    "slot_setters",
]


class SpaceKind(IntEnum):
    """Which of the env's spaces a :class:`GetSpace` asks for."""

    ACTION = 0
    OBSERVATION = 1


@dataclass(frozen=True, slots=True)
class Reset:
    """Start a new episode. ``seed`` 0 is a seed like any other; None means unseeded.

    ``seed`` is what the peer asked for, unchecked: the session takes None, an integer >= 0
    or (a vector session) a list of one such per copy, and refuses anything else with an
    :class:`~envwire.errors.InvalidArgumentError`.
    """

    seed: object = None
    options: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """Take one step with ``action`` (a sample of the action space)."""

    action: object


@dataclass(frozen=True, slots=True)
class GetSpace:
    """Ask for the action or observation space."""

    which: SpaceKind


@dataclass(frozen=True, slots=True)
class SampleAction:
    """Ask the server to sample an action from the env's action space."""


@dataclass(frozen=True, slots=True)
class Render:
    """Render the env server-side (frames go to the monitor, when one records)."""


@dataclass(frozen=True, slots=True)
class Monitor:
    """Record episode statistics (and videos where the env renders frames) into ``directory``.

    ``force`` clears earlier monitor files from the directory; ``resume`` keeps them and adds to
    them; with neither, a directory holding monitor files is an error (Gym's meaning).
    """

    directory: str
    resume: bool = False
    force: bool = False
    video: bool = True


@dataclass(frozen=True, slots=True)
class Close:
    """End the session and free its env."""


Request = Reset | Step | GetSpace | SampleAction | Render | Monitor | Close


@dataclass(frozen=True, slots=True)
class ResetReply:
    """The first observation of an episode."""

    observation: object
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StepReply:
    """The outcome of one step. ``done`` is ``terminated or truncated``."""

    observation: object
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        """True when the episode ended, either way."""
        return self.terminated or self.truncated


@dataclass(frozen=True, slots=True)
class VectorStepReply:
    """The outcome of one step of N copies: batches, in Gymnasium's vector form."""

    observations: object
    rewards: npt.NDArray[np.float64]  # [N]
    terminations: npt.NDArray[np.bool_]  # [N]
    truncations: npt.NDArray[np.bool_]  # [N]
    infos: dict[str, Any] = field(default_factory=dict)


class FinalsInfo(dict[str, Any]):
    """Gymnasium's ``SameStep`` vector info of a batch in which the copies that ``mask`` marks
    ended, each with an empty final info, and no copy has other info: ``final_obs`` (the
    object array ``final``), ``_final_obs``, ``final_info`` (``{}``) and ``_final_info``, as
    ``SyncVectorEnv`` makes them. It also holds the ended copies' final observations as a
    list in copy order (``rows``), for a codec that sends them apart from the info, as a
    field of their own, without reading the object array back.

    A dict like any other to everyone else. Whoever replaces one of its values, puts an item
    in its ``final_info`` or adds a key makes it so for the codec too (:meth:`kept` is then
    None).
    """

    __slots__ = ("final", "info", "info_mask", "mask", "rows")

    final: npt.NDArray[np.object_]
    mask: npt.NDArray[np.bool_]
    info: dict[str, Any]
    info_mask: npt.NDArray[np.bool_]
    rows: list[Any]

    @classmethod
    def made(
        cls, final: npt.NDArray[np.object_], mask: npt.NDArray[np.bool_], rows: list[Any]
    ) -> FinalsInfo:
        """The info of the final observations ``final`` (an object array: ``rows`` at the
        copies ``mask`` marks, None elsewhere), their final infos empty."""
        info: dict[str, Any] = {}
        info_mask = mask.copy()
        made = cls(final_obs=final, _final_obs=mask, final_info=info, _final_info=info_mask)
        made.final, made.mask, made.rows = final, mask, rows
        made.info, made.info_mask = info, info_mask
        return made

    def kept(self) -> tuple[list[Any], npt.NDArray[np.bool_]] | None:
        """The final observations and their mask, while the info is as it was made."""
        get = self.get
        if (
            len(self) == 4
            and get("final_obs") is self.final
            and get("_final_obs") is self.mask
            and get("final_info") is self.info
            and get("_final_info") is self.info_mask
            and not self.info
        ):
            return self.rows, self.mask
        return None


@dataclass(frozen=True, slots=True)
class SpaceReply:
    """A space, as the Gymnasium space object."""

    space: Space[Any]


@dataclass(frozen=True, slots=True)
class SampleReply:
    """A sampled action."""

    action: object


@dataclass(frozen=True, slots=True)
class RenderReply:
    """A rendered frame (an RGB array), or None when the env renders no frames."""

    frame: object


@dataclass(frozen=True, slots=True)
class MonitorReply:
    """Where the monitor records, after the server's monitor root was applied."""

    directory: str


@dataclass(frozen=True, slots=True)
class Ok:
    """A request that succeeded with nothing to say (Close)."""


Reply = (
    ResetReply
    | StepReply
    | VectorStepReply
    | SpaceReply
    | SampleReply
    | RenderReply
    | MonitorReply
    | Ok
)


#: Accepted spellings of Gymnasium's autoreset modes (a vector session's option).
AUTORESET_MODES = {mode.value: mode for mode in AutoresetMode} | {
    "next_step": AutoresetMode.NEXT_STEP,
    "same_step": AutoresetMode.SAME_STEP,
    "disabled": AutoresetMode.DISABLED,
}


def autoreset_mode(name: str | AutoresetMode) -> AutoresetMode:
    """The mode a name denotes ('NextStep' or 'next_step', ...).

    Raises:
        InvalidArgumentError: not a mode.
    """
    if isinstance(name, AutoresetMode):
        return name
    try:
        return AUTORESET_MODES[name]
    except (KeyError, TypeError):
        known = ", ".join(mode.value for mode in AutoresetMode)
        raise InvalidArgumentError(f"autoreset mode {name!r} is not one of {known}") from None


def slot_setters(cls: type, *names: str) -> tuple[Callable[[object, object], None], ...]:
    """The setters of the slots ``names`` of the frozen message ``cls``, for a hot path that
    makes the message by ``object.__new__(cls)`` and these: a third of the dataclass's
    ``__init__``, whose ``object.__setattr__`` per field would be paid on every step."""
    return tuple(getattr(cls, name).__set__ for name in names)
