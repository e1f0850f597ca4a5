"""OpenEnv's HTTP bodies (``POST /reset`` and ``POST /step``), validated as FastAPI validates
them: bad input raises :class:`BodyError` with FastAPI's status and ``detail``."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from envwire import jsonio
from envwire.jsonio import JsonObject
from envwire.protocols.openenv.jsondata import validation_detail

__all__ = [
    "BodyError",
    "ResetRequest",
    "StepRequest",
    "parse_reset_body",
    "parse_step_body",
    "undeclared_body",
]


class ResetRequest(BaseModel):
    """The body of ``POST /reset``; extra keys are passed to envs that accept them."""

    model_config = ConfigDict(extra="allow")

    seed: int | None = Field(default=None, ge=0, description="Seed of the episode")
    episode_id: str | None = Field(default=None, max_length=255, description="Episode identifier")


class StepRequest(BaseModel):
    """The body of ``POST /step``."""

    model_config = ConfigDict(extra="allow")

    action: dict[str, Any] = Field(description="The action's fields (see /schema)")
    timeout_s: float | None = Field(default=None, gt=0, description="Seconds the step may take")
    request_id: str | None = Field(default=None, max_length=255, description="For tracing")


class BodyError(Exception):
    """A request body that fails validation; answer ``status`` (422: FastAPI's detail list;
    400 for a body that Python's JSON decoder cannot read, as FastAPI answers) with
    ``{"detail": detail}``."""

    def __init__(self, detail: list[dict[str, Any]] | str, status: int = 422) -> None:
        super().__init__(detail)
        self.detail = detail
        self.status = status


_Model = TypeVar("_Model", bound=BaseModel)


def _body(raw: bytes, model: type[_Model], default: JsonObject | None) -> _Model:
    if not raw.strip():
        if default is not None:
            return model.model_validate(default)
        raise BodyError(
            [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]
        )
    try:
        obj = jsonio.loads(raw)
    except jsonio.TooDeepError:
        raise BodyError("There was an error parsing the body", 400) from None
    except json.JSONDecodeError as exc:
        raise BodyError(
            [
                {
                    "type": "json_invalid",
                    "loc": ["body", exc.pos],
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": exc.msg},
                }
            ]
        ) from None
    except UnicodeDecodeError:
        raise BodyError("There was an error parsing the body", 400) from None
    if not isinstance(obj, dict):
        raise _not_an_object(obj)
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise BodyError(validation_detail(exc, ("body",), include_url=False)) from None


def _not_an_object(value: object) -> BodyError:
    return BodyError(
        [
            {
                "type": "model_attributes_type",
                "loc": ["body"],
                "msg": "Input should be a valid dictionary or object to extract fields from",
                "input": value,
            }
        ]
    )


def undeclared_body(raw: bytes) -> BodyError:
    """FastAPI's answer to a ``/reset`` or ``/step`` body declared as anything but JSON (a
    form, ``text/plain``): it validates the body's text, which is no object (422). A body that
    is not UTF-8 cannot be shown: 400, as for such a JSON body (FastAPI fails with a 500)."""
    try:
        return _not_an_object(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return BodyError("There was an error parsing the body", 400)


def parse_reset_body(raw: bytes) -> ResetRequest:
    """Validate a ``/reset`` body (empty = defaults).

    Raises:
        BodyError: with FastAPI's 422 detail list.
    """
    return _body(raw, ResetRequest, {})


def parse_step_body(raw: bytes) -> StepRequest:
    """Validate a ``/step`` body.

    Raises:
        BodyError: with FastAPI's 422 detail list.
    """
    return _body(raw, StepRequest, None)
