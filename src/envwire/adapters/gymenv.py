"""A remote env as an ordinary ``gymnasium.Env``, over any client transport."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium

from envwire import messages as m
from envwire.client.transport import Transport
from envwire.errors import ProtocolError

__all__ = ["RemoteEnv"]


class RemoteEnv(gymnasium.Env[Any, Any]):
    """A ``gymnasium.Env`` whose env lives on an envwire (or compatible) server.

    Its spaces equal the server env's; ``reset(seed=...)`` seeds the remote env, so a remote
    episode equals a local one for the same seed and actions.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, transport: Transport, url: str = "") -> None:
        self.transport = transport
        self.url = url
        self.action_space = transport.action_space
        self.observation_space = transport.observation_space
        self._closed = False
        # A transport with a step of its own (gym-socket's lean one) answers step() directly:
        # bound here as this env's step, so that a step is one call less.
        lean = getattr(transport, "step", None)
        if callable(lean):
            self.step = lean  # type: ignore[method-assign]
        # And one with a reset of its own (gym-socket's), which reset() hands over to.
        self._reset_env: Callable[[int | None, dict[str, Any] | None], Any] | None = getattr(
            transport, "reset_env", None
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        if self._reset_env is not None:
            obs, info = self._reset_env(seed, options)
            return obs, info
        reply = self.transport.request(m.Reset(seed=seed, options=options))
        if not isinstance(reply, m.ResetReply):
            raise ProtocolError(f"reset answered with {type(reply).__name__}")
        return reply.observation, reply.info

    def step(self, action: object) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        return self._request_step(action)

    def _request_step(self, action: object) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        reply = self.transport.request(m.Step(action))
        if not isinstance(reply, m.StepReply):
            raise ProtocolError(f"step answered with {type(reply).__name__}")
        return reply.observation, reply.reward, reply.terminated, reply.truncated, reply.info

    def step_async(self, action: object) -> None:
        """Send a step without waiting for it (pipelining: several may be in flight).

        Replies come back in order from :meth:`step_wait`. The gym-socket, dm_env_rpc and
        OpenEnv WebSocket transports pipeline; OpenEnv over HTTP raises ``UnsupportedError``.
        """
        self.transport.send(m.Step(action))

    def step_wait(self) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """The result of the oldest :meth:`step_async` still unanswered."""
        reply = self.transport.receive()
        if not isinstance(reply, m.StepReply):
            raise ProtocolError(f"step answered with {type(reply).__name__}")
        return reply.observation, reply.reward, reply.terminated, reply.truncated, reply.info

    def sample_remote_action(self) -> Any:
        """An action sampled by the server from the env's action space (a sample of a space
        known only at run time: Any)."""
        reply = self.transport.request(m.SampleAction())
        assert isinstance(reply, m.SampleReply)
        return reply.action

    def monitor(
        self, directory: str, *, resume: bool = False, force: bool = False, video: bool = True
    ) -> None:
        """Have the server record episode statistics (and videos) into ``directory``."""
        self.transport.request(m.Monitor(directory, resume=resume, force=force, video=video))

    def render_remote(self) -> None:
        """Render server-side; the frame goes to the server's monitor."""
        self.transport.request(m.Render())

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.transport.close()

    def __repr__(self) -> str:
        return f"RemoteEnv({self.url or self.transport!r})"
