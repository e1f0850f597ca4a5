"""Coding: run Python code in envwire's sandbox and observe what it printed.

Wire shapes (OpenEnv's coding env): action ``{"code": str, "language": "python"}``;
observation ``{"stdout": str, "stderr": str, "exit_code": int}``, ``reward`` 1.0 when the code
exits with status 0 (else 0.0), and ``done`` true once the episode's runs are used up (one run
per episode by default, as in OpenEnv's guide). Each run is a fresh sandbox
(:mod:`envwire.envs.coding.sandbox`) under :class:`~envwire.envs.coding.sandbox.SandboxLimits`:
an infinite loop, a memory bomb, a fork bomb or an escape attempt costs that run an error exit
code, nothing more. The MCP tool ``run_python`` runs code the same way without taking a step.

Making the env raises :class:`~envwire.errors.ConfigError`, naming what the host lacks, where
the sandbox cannot be built and no unsafe sandbox is allowed.
"""

from __future__ import annotations

import uuid
from typing import Any, TypedDict, Unpack

from pydantic import Field

from envwire.envs.coding.sandbox import Sandbox, SandboxLimits, SandboxResult
from envwire.errors import InvalidActionError
from envwire.kinds.typed import (
    Action,
    EnvMetadata,
    Observation,
    State,
    Transform,
    TypedEnv,
    tool,
)
from envwire.kinds.typed.gymenv import TypedGymEnv, as_gymnasium

__all__ = [
    "CodeAction",
    "CodeObservation",
    "CodingEnv",
    "CodingOptions",
    "CodingState",
    "gymnasium_env",
]


class CodeAction(Action):
    """Source code to run."""

    code: str = Field(description="The program")
    language: str = Field(default="python", description="Only 'python' is supported")


class CodeObservation(Observation):
    """What the program printed and how it exited."""

    stdout: str = Field(default="", description="Standard output (capped)")
    stderr: str = Field(default="", description="Standard error (capped), with sandbox notes")
    exit_code: int = Field(default=0, description="Exit status; 128 + signal when killed")


class CodingState(State):
    """The episode's state plus the last run's exit code."""

    last_exit_code: int | None = None


class CodingOptions(TypedDict, total=False):
    """The keyword arguments of :class:`CodingEnv` (a catalog entry's ``kwargs``)."""

    runs_per_episode: int
    wall_time: float
    memory: int
    output: int
    disk: int
    transform: Transform[Any] | None


class CodingEnv(TypedEnv[CodeAction, CodeObservation, CodingState]):
    """Runs Python code in a sandboxed process; reward 1.0 when it exits cleanly.

    Args:
        runs_per_episode: how many runs an episode allows before ``done`` (default 1).
        wall_time, memory, output, disk: limits of each run (seconds, bytes of memory across
            its processes, bytes per output stream, bytes in its directory).

    Raises:
        ConfigError: the host cannot build the sandbox (see the module docstring).
    """

    action_type = CodeAction
    observation_type = CodeObservation
    state_type = CodingState

    def __init__(
        self,
        runs_per_episode: int = 1,
        wall_time: float = 10.0,
        memory: int = 512 << 20,
        output: int = 64 << 10,
        disk: int = 64 << 20,
        *,
        transform: Transform[Any] | None = None,
    ) -> None:
        super().__init__(transform=transform)
        if runs_per_episode < 1:
            raise ValueError(f"runs_per_episode must be >= 1, got {runs_per_episode}")
        self.runs_per_episode = runs_per_episode
        limits = SandboxLimits(wall_time=wall_time, memory=memory, output=output, disk=disk)
        self.sandbox = Sandbox(limits)
        self.sandbox.check()
        self._state = CodingState(episode_id=None, step_count=0)

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: object
    ) -> CodeObservation:
        self._state = CodingState(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return CodeObservation(done=False, reward=0.0)

    def _run(self, code: str) -> SandboxResult:
        return self.sandbox.run(code)

    def step(
        self, action: CodeAction, timeout_s: float | None = None, **kwargs: object
    ) -> CodeObservation:
        if action.language.lower() != "python":
            raise InvalidActionError(
                f"language {action.language!r} is not supported; only 'python' is"
            )
        result = self._run(action.code)
        self._state.step_count += 1
        self._state.last_exit_code = result.exit_code
        return CodeObservation(
            stdout=result.stdout,
            stderr=result.stderr,
            exit_code=result.exit_code,
            reward=1.0 if result.ok else 0.0,
            done=self._state.step_count >= self.runs_per_episode,
        )

    @property
    def state(self) -> CodingState:
        return self._state

    def get_metadata(self) -> EnvMetadata:
        return EnvMetadata(
            name="envwire/Coding-v0",
            description="Runs Python code in a sandboxed process; reward 1.0 on exit status 0",
            readme_content=__doc__,
            version="1.0.0",
            author="envwire",
        )

    @tool(name="run_python")
    def run_python(self, code: str) -> dict[str, Any]:
        """Run Python code in the sandbox and return its stdout, stderr and exit_code."""
        result = self._run(code)
        return {"stdout": result.stdout, "stderr": result.stderr, "exit_code": result.exit_code}


def gymnasium_env(**options: Unpack[CodingOptions]) -> TypedGymEnv:
    """The Gymnasium registration's entry point."""
    return as_gymnasium(CodingEnv(**options))
