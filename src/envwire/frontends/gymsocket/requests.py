"""The gym-socket front end's answers to what a client asks for in its handshake and
requests: a vector session's options, whether an env's spaces are a typed env's, and the
answer to an Upload."""

from __future__ import annotations

from typing import Any

from envwire.errors import InvalidArgumentError
from envwire.protocols.gymsocket import Upload
from envwire.session import confine

__all__ = ["is_typed_space", "upload_gone", "vector_options"]


def vector_options(options: dict[str, Any] | None) -> dict[str, Any]:
    """Session options from the VECTOR handshake's JSON.

    Raises:
        InvalidArgumentError: unknown keys or wrong types.
    """
    if options is None:
        return {}
    unknown = set(options) - {"num_envs", "autoreset_mode", "workers"}
    if unknown:
        raise InvalidArgumentError(f"unknown vector options {sorted(unknown)}")
    num_envs = options.get("num_envs", 1)
    workers = options.get("workers", 1)
    if not isinstance(num_envs, int) or not isinstance(workers, int) or num_envs < 1:
        raise InvalidArgumentError(
            f"vector options need integer num_envs >= 1 and workers, got {options}"
        )
    return {
        "num_envs": num_envs,
        "autoreset_mode": options.get("autoreset_mode", "NextStep"),
        "workers": workers,
    }


def upload_gone(monitor_root: str | None, upload: Upload) -> str:
    """The answer to an Upload: the scoreboard is gone, and where the monitor files stay."""
    if monitor_root is None:
        kept = "no directory (Monitor is disabled on this server)"
    else:
        try:
            kept = confine(monitor_root, upload.directory)
        except InvalidArgumentError:
            kept = f"no directory ({upload.directory!r} is not a usable monitor directory)"
    return (
        "Upload: the OpenAI Gym scoreboard this packet uploaded to was shut down in 2017, so "
        f"nothing was uploaded; the monitor files stay in {kept} on the server"
    )


def is_typed_space(space: object) -> bool:
    """Whether a space is a typed env's (pydantic models, no tensor form)."""
    return type(space).__name__ == "ModelSpace"
