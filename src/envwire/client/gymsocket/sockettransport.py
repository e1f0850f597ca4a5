"""A blocking gym-socket client transport (with request pipelining)."""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from envwire import messages as m
from envwire.client.probe import (
    Expecting,
    Finding,
    Found,
    explain,
    not_tls,
    probe,
    recognize,
    untrusted,
)
from envwire.errors import (
    EnvwireError,
    InvalidArgumentError,
    ProtocolError,
    TransportError,
    UnauthenticatedError,
    UnknownEnvError,
)
from envwire.ports import GYM_SOCKET
from envwire.protocols.gymsocket import (
    NEED_DATA,
    ClientConnection,
    Flags,
    HandshakeReply,
)
from envwire.protocols.gymsocket.lean import StepResult
from envwire.sockets import RECV_SIZE, busy_poll, busy_poll_seconds, configure_stream
from envwire.sockets.tls import TlsSocket

__all__ = ["DEFAULT_FLAGS", "DEFAULT_PORT", "GymSocketTransport"]

DEFAULT_FLAGS = Flags.ERRORS | Flags.MONITOR_REPLY | Flags.EXTENDED
#: The port of ``gym-socket://`` URLs that name none.
DEFAULT_PORT = GYM_SOCKET.default_port
#: The receive buffer the lean reads fill in place (recv_into: no allocation a reply).
_RECV = 256 * 1024
#: The handshake errors of a server that wants a token (docs/protocols/gym-socket.md).
_AUTH_REFUSALS = frozenset({"this server requires a token", "the token was not accepted"})
#: A refused handshake carries the error's text alone (the protocol's one string): the class
#: the other schemes' clients raise is told from the words every envwire server begins it with.
_REFUSALS: tuple[tuple[str, type[EnvwireError]], ...] = (("unknown env ", UnknownEnvError),)

#: A large observation's step reply is read into a buffer of its own, made by this (no
#: zeroing: the reply fills it).
_EMPTY = np.empty
_R = TypeVar("_R", bound=m.Reply)
#: A vector step's result, as Gymnasium's vector envs return it.
VectorStep = tuple[Any, Any, Any, Any, dict[str, Any]]
#: A vector step's result, and its final observations kept apart (None: in the info).
VectorSplit = tuple[Any, Any, Any, Any, dict[str, Any], Any]
_L = TypeVar("_L")
#: What the wrong server's answers are told from.
_EXPECTING = Expecting("gym-socket", Found.GYM_SOCKET, DEFAULT_PORT)
#: What a probe finds that tells no more than the close this connection saw.
_UNTOLD = frozenset({Found.UNTRUSTED, Found.UNREACHABLE, Found.SILENT})


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
        token: the server's token (adds the AUTH flag).
        tls: a client TLS context: the connection runs over TLS (``gym-sockets://``) and the
            server's certificate is verified against ``host``.
        busy_poll_us: wait for each reply by polling the socket, without sleeping, for up to
            this many microseconds before blocking (0, the default, blocks at once): lower
            latency for CPU time; plain connections only (see docs/protocols/gym-socket.md,
            "Busy polling").

    Raises (from the constructor):
        TransportError: the server cannot be reached, does not answer, or fails TLS
            verification.
        UnauthenticatedError: the server requires a token, and none or a wrong one was given.
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
        token: str | None = None,
        tls: ssl.SSLContext | None = None,
        busy_poll_us: float = 0,
    ) -> None:
        self.address = (host, port)
        self.env_id = env_id
        self.timeout = timeout
        self._scheme = "gym-sockets" if tls is not None else "gym-socket"
        self._busy_poll = busy_poll_seconds(busy_poll_us)
        if self._busy_poll and tls is not None:
            raise InvalidArgumentError(
                "busy_poll_us is for plain gym-socket:// connections, not TLS (gym-sockets://)"
            )
        self._sock = self._connect(tls)
        # Under TLS, timeouts and TCP options are those of the socket below (TlsSocket's own
        # settimeout and setsockopt forward to it).
        raw = self._sock.raw if isinstance(self._sock, TlsSocket) else self._sock
        configure_stream(raw, timeout)
        # Replies are read into one buffer for the connection's life: no allocation per recv.
        self._inbox = memoryview(bytearray(_RECV))
        if vector is not None:
            flags |= Flags.VECTOR
        if token is not None:
            flags |= Flags.AUTH
        self._codec = ClientConnection(flags)
        # None for a session with no env (env_id ''), which is no Transport for the adapters.
        self.action_space: spaces.Space[Any] | None = None
        self.observation_space: spaces.Space[Any] | None = None
        #: A vector session's size and autoreset mode (1 and '' for one env).
        self.num_envs = int((vector or {}).get("num_envs", 1))
        self.autoreset_mode = str((vector or {}).get("autoreset_mode", ""))
        try:
            reply = self._handshake(self._codec.send_handshake(env_id, vector, token))
            if reply.error:
                refused = f"{self._scheme}://{host}:{port} refused {env_id!r}: {reply.error}"
                if reply.error in _AUTH_REFUSALS:
                    raise UnauthenticatedError(refused)
                for words, error in _REFUSALS:
                    if reply.error.startswith(words):
                        raise error(refused)
                raise TransportError(refused)
            if env_id:
                self.send(m.GetSpace(m.SpaceKind.ACTION))
                self.send(m.GetSpace(m.SpaceKind.OBSERVATION))
                action_space = self._expect(m.SpaceReply).space
                observation_space = self._expect(m.SpaceReply).space
                self.action_space, self.observation_space = action_space, observation_space
                if vector is None:
                    self._codec.set_spaces(action_space, observation_space)
                else:
                    n = self.num_envs
                    self._codec.set_spaces(
                        batch_space(action_space, n), batch_space(observation_space, n)
                    )
        except BaseException:
            self._sock.close()
            raise

    def _connect(self, tls: ssl.SSLContext | None) -> socket.socket | TlsSocket:
        """The connected socket (a TLS one when ``tls``), or TransportError."""
        host, port = self.address
        try:
            sock = socket.create_connection(self.address, timeout=self.timeout)
        except OSError as exc:
            raise TransportError(
                f"cannot connect to {self._scheme}://{host}:{port}: {exc}"
            ) from exc
        if tls is None:
            return sock
        secure = TlsSocket(sock, tls, server_side=False, server_hostname=host)
        try:
            secure.handshake(self.timeout)
        except (OSError, ssl.SSLError) as exc:
            sock.close()
            if not_tls(exc):
                raise self._stranger(Finding(Found.NOT_TLS)) from exc
            if isinstance(exc, ssl.SSLCertVerificationError):
                raise self._stranger(Finding(Found.UNTRUSTED, untrusted(exc))) from exc
            if isinstance(exc, ConnectionError):  # closed or reset, before a word of TLS
                raise self._stranger(Finding(Found.CLOSED)) from exc
            raise TransportError(f"TLS with {self._scheme}://{host}:{port} failed: {exc}") from exc
        return secure

    def _handshake(self, opening: bytes) -> HandshakeReply:
        """Send the handshake's ``opening`` bytes; the server's answer.

        The answer's first bytes are recognized before the codec reads them, so that another
        protocol's answer is named as such (an HTTP status line would read as a length of
        1347703880).

        Raises:
            TransportError: another protocol answered, the server closed the connection
                without answering, or no answer came in time.
        """
        # A server that closes before reading (gRPC's, after its own first frames) may have
        # answered already: its bytes are read below either way.
        with contextlib.suppress(ConnectionError):
            self._sock.sendall(opening)
        head = b""
        while (found := recognize(head)) is None:
            try:
                data = self._sock.recv(RECV_SIZE)
            except TimeoutError:
                raise TransportError(
                    f"{self._scheme}://{self._where()}: no answer to the handshake within "
                    f"{self.timeout:g} s: is this a gym-socket port? gym-socket's default port "
                    f"is {DEFAULT_PORT}"
                ) from None
            except ConnectionError:
                data = b""  # reset: as closed
            except OSError as exc:
                raise TransportError(f"{self._scheme}://{self._where()}: {exc}") from exc
            if not data:
                raise self._closed_in_handshake(head)
            head += data
        if found is not Found.GYM_SOCKET:
            raise self._stranger(Finding(found, repr(head[:24])))
        self._codec.receive_data(head)
        reply = self._receive()
        assert isinstance(reply, HandshakeReply)  # the codec's first event is the handshake's
        return reply

    def _closed_in_handshake(self, head: bytes) -> TransportError:
        """The error for a server that closed the connection before its handshake answer was
        whole: a TLS port closes so on a plain handshake, and gRPC's on a TLS one without h2."""
        if head:
            return self._stranger(Finding(Found.OTHER, repr(head[:24])))
        host, port = self.address
        finding = probe(host, port, tls=self._scheme == "gym-sockets")
        # The probe has no CA: a certificate it cannot verify says nothing here, where this
        # connection verified it.
        if finding.found in _UNTOLD or explain(finding, _EXPECTING, self._scheme) is None:
            finding = Finding(Found.CLOSED)
        return self._stranger(finding)

    def _stranger(self, finding: Finding) -> TransportError:
        """A TransportError that says what answered instead of a gym-socket server."""
        host, port = self.address
        line = explain(finding, _EXPECTING, self._scheme) or finding.found.value
        return TransportError(f"{self._scheme}://{host}:{port}/{self.env_id}: {line}")

    @property
    def flags(self) -> Flags:
        """The handshake flags this connection was opened with."""
        return self._codec.flags

    def send(self, request: m.Request) -> None:
        """Send a request without waiting; its reply comes from :meth:`receive`, in order."""
        self._send(self._codec.send_request(request))

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise self._send_failed(exc) from exc

    def _send_failed(self, exc: OSError) -> TransportError:
        return TransportError(f"sending to {self._scheme}://{self._where()} failed: {exc}")

    def step(self, action: object) -> StepResult:
        """Step the env once and wait: (observation, reward, terminated, truncated, info),
        as ``request(Step(action))`` gives them. The usual step of a one-env session with an
        integer action is lean: its request's bytes are made once, and its reply, when it
        comes in the usual layout, is read straight from the receive buffer (a large
        observation's into a buffer of the reply's own, which the observation keeps: no copy);
        anything else (an error, an info) takes the general path.

        Raises:
            EnvwireError: as :meth:`request` raises.
        """
        codec = self._codec
        lean = codec.lean_step(action)
        if lean is not None:
            request, own, read = lean
            try:  # _send(), inlined (as _read() below): every step
                self._sock.sendall(request)
            except OSError as exc:
                raise self._send_failed(exc) from exc
            if own:  # a large observation: read in place, into a buffer of the reply's own
                inbox = self._inbox
                self._inbox = memoryview(_EMPTY(own, np.uint8))  # type: ignore[arg-type]
            try:
                try:
                    if self._busy_poll:
                        size = self._read()
                    else:
                        size = self._sock.recv_into(self._inbox)
                        if not size:
                            raise self._closed()
                except BaseException as exc:  # (its reply may come yet: the codec expects it)
                    codec.lean_sent()
                    raise self._read_failed(exc) if isinstance(exc, OSError) else exc  # noqa: B904
                result = read(self._inbox, size, not own)
                if result is None:  # not whole yet, or no usual reply: the codec's reads
                    codec.lean_sent()
                    lean_read = codec.lean_owned_reply if own else codec.lean_step_reply
                    result = self._read_lean(lean_read, size)
            finally:
                if own:  # (the observation keeps that buffer)
                    self._inbox = inbox
            if result is not None:
                return result
            reply = self.receive()
        else:
            reply = self.request(m.Step(action))
        if not isinstance(reply, m.StepReply):
            raise ProtocolError(f"step answered with {type(reply).__name__}")
        return reply.observation, reply.reward, reply.terminated, reply.truncated, reply.info

    def reset_env(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env and wait: (observation, info), as ``request(Reset(seed, options))``
        gives them. The usual reset (no seed, no options) of a one-env session is lean: its
        reply, when it comes whole in the usual step reply's layout, is read straight from the
        receive buffer; anything else takes the general path.

        Raises:
            EnvwireError: as :meth:`request` raises.
        """
        codec = self._codec
        request = codec.lean_reset_request(seed, options)
        if request is None:
            reply = self.request(m.Reset(seed=seed, options=options))
        else:
            self._send(request)
            result = self._read_lean(codec.lean_reset_reply)
            if result is not None:
                return result
            reply = self.receive()
        if not isinstance(reply, m.ResetReply):
            raise ProtocolError(f"reset answered with {type(reply).__name__}")
        return reply.observation, reply.info

    def send_vector_step(self, actions: object) -> None:
        """Send a vector session's step without waiting, as ``send(Step(actions))`` does; its
        result comes from :meth:`receive_vector_step`. A batch of actions that is an array
        of a tensor dtype, sent with nothing else in flight, is lean: the bytes before its own
        are made once per dtype and shape."""
        codec = self._codec
        request = codec.lean_vector_request(actions)
        if request is None:
            request = codec.send_request(m.Step(actions))
        try:  # _send(), inlined: every batch
            self._sock.sendall(request)
        except OSError as exc:
            raise self._send_failed(exc) from exc

    def receive_vector_step(self) -> VectorStep:
        """The result of the vector step in flight: (observations, rewards, terminations,
        truncations, infos), what ``receive()`` gives as a ``VectorStepReply``. A reply in
        the layout of the last usual one (its info aside) is read straight from the receive
        buffer; any other by the general path.

        Raises:
            EnvwireError: as :meth:`receive` raises; ProtocolError when the reply is not a
                vector step's.
        """
        codec = self._codec
        if not codec.buffered:
            step = self._read_lean(codec.lean_vector_step)
            if step is not None:
                return step
        return self._general_vector_step()

    def _general_vector_step(self) -> VectorStep:
        """The vector step's reply read by the general path, as its arrays and info."""
        reply = self.receive()
        if not isinstance(reply, m.VectorStepReply):
            raise ProtocolError(f"step answered with {type(reply).__name__}")
        return reply.observations, reply.rewards, reply.terminations, reply.truncations, reply.infos

    def receive_vector_split(self) -> VectorSplit:
        """:meth:`receive_vector_step`, with the final observations of a SameStep session's
        usual reply kept apart: (observations, rewards, terminations, truncations, infos,
        finals), where ``finals`` is None and ``infos`` Gymnasium's whole vector info, or
        ``infos`` is ``{}`` and ``finals`` the batch of the final observations of the copies
        whose episodes ended, in copy order (their final infos empty), which Gymnasium's info
        would carry as ``final_obs``, ``_final_obs``, ``final_info`` and ``_final_info``.

        Raises:
            EnvwireError: as :meth:`receive_vector_step` raises.
        """
        codec = self._codec
        if not codec.buffered:
            step = self._read_lean(codec.lean_vector_split)
            if step is not None:
                return step
        return (*self._general_vector_step(), None)

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

    def _expect(self, kind: type[_R]) -> _R:
        reply = self.receive()
        if not isinstance(reply, kind):
            raise ProtocolError(f"expected {kind.__name__}, got {type(reply).__name__}")
        return reply

    def _read_lean(self, lean: Callable[[memoryview, int], _L | None], size: int = 0) -> _L | None:
        """The reply to the one request in flight, read by ``lean`` (one of the codec's lean
        reads) once all of it has come, if it comes in its usual layout; else None, what came
        fed to the codec for :meth:`receive`. ``size``: bytes of it already in the inbox, which
        ``lean`` found too few (0: none yet)."""
        codec, inbox = self._codec, self._inbox
        if not size:
            size = self._read()
            result = lean(inbox, size)
        else:
            result = None
        while result is None:  # a usual reply that came in pieces (a frame): the rest
            wants = codec.lean_wants(inbox, size)
            if not size < wants <= len(inbox):
                codec.receive_view(inbox[:size])
                return None
            size += self._read(size)
            result = lean(inbox, size)
        return result

    def _receive(self) -> HandshakeReply | m.Reply:
        codec = self._codec
        if self.autoreset_mode and not codec.buffered:  # a vector step's reply may be lean
            reply = self._read_lean(codec.lean_vector_reply)
            if reply is not None:
                return reply
        while True:
            # Parse only when bytes wait: a reply is never there before its request's answer.
            event = codec.next_event() if codec.buffered else NEED_DATA
            if event is not NEED_DATA:
                break
            codec.receive_view(self._inbox[: self._read()])
        if isinstance(event, EnvwireError):
            raise event
        return event  # type: ignore[return-value]

    def _read(self, offset: int = 0) -> int:
        """Receive what the server sent into the inbox from ``offset`` on (polled first, with
        busy polling, at offset 0): how many bytes.

        Raises:
            TransportError: no bytes within the timeout, the connection failed, or it closed.
        """
        try:
            if offset:  # the rest of a reply on its way: no polling
                size = self._sock.recv_into(self._inbox[offset:])
            else:
                polled = busy_poll(self._receive_into, self._busy_poll) if self._busy_poll else None
                size = self._sock.recv_into(self._inbox) if polled is None else polled
        except OSError as exc:
            raise self._read_failed(exc)  # noqa: B904 (its cause is set)
        if not size:
            raise self._closed()
        return size

    def _read_failed(self, exc: OSError) -> TransportError:
        """The error a failed receive raises: a timeout's says so (and hides the socket's
        exception), any other's has the socket's exception as its cause."""
        if isinstance(exc, TimeoutError | BlockingIOError):
            error = TransportError(
                f"{self._scheme}://{self._where()}: no reply within {self.timeout:g} s"
            )
            error.__suppress_context__ = True
        else:
            error = TransportError(f"{self._scheme}://{self._where()}: {exc}")
            error.__cause__ = exc
        return error

    def _closed(self) -> TransportError:
        return TransportError(
            f"{self._scheme}://{self._where()} closed the connection (the server drops "
            "connections whose env hung, and flags-0 connections on any error)"
        )

    def _receive_into(self, flags: int) -> int:
        return self._sock.recv_into(self._inbox, 0, flags)

    def _where(self) -> str:
        return f"{self.address[0]}:{self.address[1]}/{self.env_id}"

    def close(self) -> None:
        """Close the connection; the server frees the session at once."""
        with contextlib.suppress(OSError):
            self._sock.close()
