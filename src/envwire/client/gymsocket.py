"""A blocking gym-socket client transport (with request pipelining)."""

from __future__ import annotations

import contextlib
import socket
from typing import Any

from gymnasium.vector.utils import batch_space

from envwire import messages as m
from envwire.client.transport import split_url
from envwire.errors import EnvwireError, ProtocolError, TransportError
from envwire.protocols.gymsocket import (
    NEED_DATA,
    ClientConnection,
    Flags,
    HandshakeReply,
)
from envwire.sockets import configure_stream

__all__ = ["DEFAULT_FLAGS", "DEFAULT_PORT", "GymSocketTransport", "open_url", "open_vector_url"]

DEFAULT_FLAGS = Flags.ERRORS | Flags.MONITOR_REPLY | Flags.EXTENDED
#: The port of ``gym-socket://`` URLs that name none.
DEFAULT_PORT = 5001
_RECV = 256 * 1024


class GymSocketTransport:
    """One gym-socket connection to one env on a server.

    Args:
        host, port: the server's gym-socket address.
        env_id: the env to open ('' for a session with no env).
        timeout: seconds to wait for the connection and for each reply.
        flags: handshake flags; the default asks for error replies, the Monitor reply and the
            extended packets (seeded resets, truncation, raw tensors, exact spaces).
        vector: open a vector session: ``{"num_envs": N, "autoreset_mode": ..., "workers":
            K}`` (adds the VECTOR flag).

    Raises (from the constructor):
        TransportError: the server cannot be reached or does not answer.
        RemoteError (or the class its code names): the server refused the env.
    """

    def __init__(
        self,
        host: str,
        port: int,
        env_id: str,
        *,
        timeout: float = 30.0,
        flags: Flags = DEFAULT_FLAGS,
        vector: dict[str, Any] | None = None,
    ) -> None:
        self.address = (host, port)
        self.env_id = env_id
        self.timeout = timeout
        try:
            self._sock = socket.create_connection(self.address, timeout=timeout)
        except OSError as exc:
            raise TransportError(f"cannot connect to gym-socket://{host}:{port}: {exc}") from exc
        configure_stream(self._sock, timeout)
        # Replies are read into one buffer for the connection's life: no allocation per recv.
        self._inbox = memoryview(bytearray(_RECV))
        if vector is not None:
            flags |= Flags.VECTOR
        self._codec = ClientConnection(flags)
        self.action_space: Any = None
        self.observation_space: Any = None
        #: A vector session's size and autoreset mode (1 and '' for one env).
        self.num_envs = int((vector or {}).get("num_envs", 1))
        self.autoreset_mode = str((vector or {}).get("autoreset_mode", ""))
        try:
            self._sock.sendall(self._codec.send_handshake(env_id, vector))
            reply = self._receive()
            assert isinstance(reply, HandshakeReply)
            if reply.error:
                raise TransportError(
                    f"gym-socket://{host}:{port} refused {env_id!r}: {reply.error}"
                )
            if env_id:
                self.send(m.GetSpace(m.SpaceKind.ACTION))
                self.send(m.GetSpace(m.SpaceKind.OBSERVATION))
                self.action_space = self._expect(m.SpaceReply).space
                self.observation_space = self._expect(m.SpaceReply).space
                if vector is None:
                    self._codec.set_spaces(self.action_space, self.observation_space)
                else:
                    n = self.num_envs
                    self._codec.set_spaces(
                        batch_space(self.action_space, n), batch_space(self.observation_space, n)
                    )
        except BaseException:
            self._sock.close()
            raise

    @property
    def flags(self) -> Flags:
        """The handshake flags this connection was opened with."""
        return self._codec.flags

    def send(self, request: m.Request) -> None:
        """Send a request without waiting; its reply comes from :meth:`receive`, in order."""
        try:
            self._sock.sendall(self._codec.send_request(request))
        except OSError as exc:
            raise TransportError(f"sending to gym-socket://{self._where()} failed: {exc}") from exc

    def receive(self) -> m.Reply:
        """The reply to the oldest unanswered request.

        Raises:
            EnvwireError: the server reported an error for that request (as the class its code
                names, or RemoteError), or the connection failed.
        """
        reply = self._receive()
        if isinstance(reply, HandshakeReply):  # pragma: no cover - only during __init__
            raise ProtocolError("unexpected handshake reply")
        return reply

    def request(self, request: m.Request) -> m.Reply:
        """Send a request and wait for its reply."""
        self.send(request)
        return self.receive()

    def _expect(self, kind: type[Any]) -> Any:
        reply = self.receive()
        if not isinstance(reply, kind):
            raise ProtocolError(f"expected {kind.__name__}, got {type(reply).__name__}")
        return reply

    def _receive(self) -> HandshakeReply | m.Reply:
        codec = self._codec
        while True:
            # Parse only when bytes wait: a reply is never there before its request's answer.
            event = codec.next_event() if codec.buffered else NEED_DATA
            if event is not NEED_DATA:
                break
            try:
                size = self._sock.recv_into(self._inbox)
            except (TimeoutError, BlockingIOError):
                raise TransportError(
                    f"gym-socket://{self._where()}: no reply within {self.timeout:g} s"
                ) from None
            except OSError as exc:
                raise TransportError(f"gym-socket://{self._where()}: {exc}") from exc
            if not size:
                raise TransportError(
                    f"gym-socket://{self._where()} closed the connection (the server drops "
                    "connections whose env hung, and flags-0 connections on any error)"
                )
            codec.receive_data(self._inbox[:size])
        if isinstance(event, EnvwireError):
            raise event
        return event  # type: ignore[return-value]

    def _where(self) -> str:
        return f"{self.address[0]}:{self.address[1]}/{self.env_id}"

    def close(self) -> None:
        """Close the connection; the server frees the session at once."""
        with contextlib.suppress(OSError):
            self._sock.close()


def open_url(url: str, *, timeout: float = 30.0, **kwargs: Any) -> GymSocketTransport:
    """A transport to ``gym-socket://host:port/<env id>`` (keyword arguments go to
    :class:`GymSocketTransport`).

    Raises:
        InvalidArgumentError: a malformed URL.
        TransportError: the server cannot be reached, or refused the env.
    """
    host, port, env_id = split_url(url, DEFAULT_PORT)
    return GymSocketTransport(host, port, env_id, timeout=timeout, **kwargs)


def open_vector_url(
    url: str,
    *,
    num_envs: int,
    autoreset_mode: str = "NextStep",
    workers: int = 1,
    timeout: float = 30.0,
    **kwargs: Any,
) -> GymSocketTransport:
    """A transport to a vector session of ``num_envs`` copies of the env at
    ``gym-socket://host:port/<env id>``.

    Raises:
        InvalidArgumentError: a malformed URL or an unknown autoreset mode.
        TransportError: the server cannot be reached, or refused the env.
    """
    mode = m.autoreset_mode(autoreset_mode).value
    vector = {"num_envs": num_envs, "autoreset_mode": mode, "workers": workers}
    host, port, env_id = split_url(url, DEFAULT_PORT)
    return GymSocketTransport(host, port, env_id, timeout=timeout, vector=vector, **kwargs)
