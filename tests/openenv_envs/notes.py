"""An MCP env: FastMCP tools on an ``MCPEnvironment``, served by ``create_app`` with
openenv-core's MCP action and observation (the shape of OpenEnv's echo env)."""

from __future__ import annotations

import os
import uuid
from typing import Any

from fastmcp import FastMCP
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation
from openenv.core.env_server.types import Action, Observation, State


class NotesEnvironment(MCPEnvironment):
    """Keeps notes; everything happens through its tools."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        server = FastMCP("notes")
        self._notes: list[str] = []

        @server.tool
        def add_note(text: str) -> int:
            """Store a note; returns how many notes there are."""
            self._notes.append(text)
            return len(self._notes)

        @server.tool
        def list_notes() -> list[str]:
            """Every note so far."""
            return list(self._notes)

        @server.tool
        def word_count(text: str) -> dict[str, int]:
            """Words and characters of a text."""
            return {"words": len(text.split()), "chars": len(text)}

        @server.tool
        def fail(reason: str) -> str:
            """Always raises."""
            raise ValueError(reason)

        super().__init__(server)
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> Observation:
        self._notes.clear()
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return Observation(done=False, reward=0.0, metadata={"status": "ready"})

    def _step_impl(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        return Observation(done=False, reward=0.0, metadata={"error": "use the tools"})

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        self._state.step_count += 1
        return super().step(action, timeout_s=timeout_s, **kwargs)

    async def step_async(
        self, action: Action, timeout_s: float | None = None, **kwargs: Any
    ) -> Observation:
        self._state.step_count += 1
        return await super().step_async(action, timeout_s=timeout_s, **kwargs)

    @property
    def state(self) -> State:
        return self._state


app = create_app(
    NotesEnvironment,
    CallToolAction,
    CallToolObservation,
    env_name="notes",
    max_concurrent_envs=int(os.environ.get("NOTES_MAX_CONCURRENT_ENVS", "4")),
)
