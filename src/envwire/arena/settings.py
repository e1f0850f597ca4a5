"""The settings of one arena env: how its runs are scheduled, scored and shown.

An arena env is a catalog env plus these settings. Defaults come from the code below, then from
the env class's ``metadata["arena"]`` (how the env wants to be hosted: Nim asks for the bare
observation as percept and its own outcome), then from what the admin gave. The result is
stored with the env, so a later change of code does not change a running competition.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

from envwire.errors import InvalidArgumentError
from envwire.jsonio import JsonValue

__all__ = ["ArenaEnvSettings", "OutcomeRule", "PerceptForm"]

PerceptForm = Literal["full", "observation"]
OutcomeRule = Literal["auto", "return"]

_CHOICES: dict[str, tuple[str, ...]] = {
    "percept": ("full", "observation"),
    "outcome": ("auto", "return"),
    "rating_objective": ("max", "min"),
}


@dataclass(frozen=True, slots=True)
class ArenaEnvSettings:
    """How an arena env is run.

    Attributes:
        requests_per_reply: N, the most action requests per reply (1 when a client turns parallel
            runs off).
        rating_runs: the last N finished runs an agent's rating averages; also the runs after
            which it counts as fully evaluated.
        rating_objective: ``"max"`` (higher outcomes are better) or ``"min"``.
        initial_rating: the rating of an agent without finished runs.
        can_abandon: whether clients may abandon runs (v1 ``to_abandon``).
        abandon_outcome: the outcome of an abandoned run (the worst one, usually).
        percept: ``"full"``: ``{"observation", "reward", "step"}``; ``"observation"``: the
            observation alone.
        outcome: ``"auto"``: ``info["outcome"]`` of the run's last step when the env gives one,
            else the episode's return; ``"return"``: always the episode's return.
        kwargs: keyword arguments for the env's constructor.
        config: the config of a plugin env of the AISysProj interface (any JSON value), given
            to its constructor.
    """

    requests_per_reply: int = 5
    rating_runs: int = 50
    rating_objective: Literal["max", "min"] = "max"
    initial_rating: float = 0.0
    can_abandon: bool = False
    abandon_outcome: float = 0
    percept: PerceptForm = "full"
    outcome: OutcomeRule = "auto"
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    config: JsonValue = None

    @classmethod
    def build(cls, *layers: Mapping[str, Any] | None) -> ArenaEnvSettings:
        """Settings from the defaults overlaid with each layer in turn.

        Raises:
            InvalidArgumentError: an unknown key or a bad value, named.
        """
        merged: dict[str, Any] = {}
        known = {f.name for f in fields(cls)}
        for layer in layers:
            for key, value in (layer or {}).items():
                if key not in known:
                    raise InvalidArgumentError(
                        f"unknown arena setting {key!r}; known: {', '.join(sorted(known))}"
                    )
                merged[key] = value
        for key, value in merged.items():
            _check(key, value)
        return cls(**merged)

    def to_json(self) -> dict[str, Any]:
        """The settings as a JSON object (what the database stores)."""
        data = asdict(self)
        data["kwargs"] = dict(self.kwargs)
        return data


def _check(key: str, value: object) -> None:
    def bad(expected: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"arena setting {key}: expected {expected}, got {value!r}")

    if key in ("requests_per_reply", "rating_runs"):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000:
            raise bad("an integer from 1 to 10000")
    elif key in _CHOICES:
        if value not in _CHOICES[key]:
            raise bad(" or ".join(repr(c) for c in _CHOICES[key]))
    elif key == "initial_rating":
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise bad("a finite number")
    elif key == "can_abandon":
        if not isinstance(value, bool):
            raise bad("true or false")
    elif key == "abandon_outcome":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad("a number")
    elif key == "kwargs" and not isinstance(value, Mapping):
        raise bad("an object of constructor arguments")
