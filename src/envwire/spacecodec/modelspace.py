"""The Gymnasium space of a typed env's actions or observations: instances of one pydantic
model. The codecs carry its samples as the model's JSON (:mod:`envwire.kinds.typed` makes typed
envs whose spaces these are)."""

from __future__ import annotations

from typing import Any, NoReturn

import gymnasium
from pydantic import BaseModel

from envwire.errors import UnsupportedError

__all__ = ["ModelSpace"]


class ModelSpace(gymnasium.Space[BaseModel]):
    """The space of instances of one pydantic model.

    Attributes:
        model: the pydantic model class.
        state_model: (observation spaces) the env's State model.
        about: (observation spaces) the env's metadata (an ``EnvMetadata`` of
            :mod:`envwire.kinds.typed.models`).
        tools: (action spaces) the MCP tool specs the env offers.
    """

    def __init__(
        self,
        model: type[BaseModel],
        *,
        state_model: type[BaseModel] | None = None,
        about: BaseModel | None = None,
        tools: tuple[dict[str, Any], ...] = (),
    ) -> None:
        super().__init__()
        self.model = model
        self.state_model = state_model
        self.about = about
        self.tools = tools

    def contains(self, x: object) -> bool:
        return isinstance(x, self.model)

    def sample(self, mask: object = None, probability: object = None) -> NoReturn:
        raise UnsupportedError(
            f"{self.model.__name__} actions cannot be sampled; see the env's /schema"
        )

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ModelSpace) and other.model is self.model

    def __hash__(self) -> int:
        return hash(self.model)

    def __repr__(self) -> str:
        return f"ModelSpace({self.model.__name__})"
