"""The gym-socket front end: one thread per connection, blocking sockets.

Blocking sockets with a thread per connection are the fastest request/response path in CPython
(no event-loop hop), and they confine an inline env that hangs to its own connection: the
watchdog answers that client and drops the connection, while every other thread goes on.

What a client can make the front end hold is bounded (``docs/protocols/gym-socket.md``, "Limits"):
each field by its kind (the codec checks a length as soon as it arrives), and the bytes all
connections buffer together by ``max_buffered``. A client that breaks the protocol hears why in its
error channel when it has one, then the connection closes; every such close, and every refused
handshake, is logged at INFO with the peer's address (rate-limited).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading

from gymnasium.vector.utils import batch_space

from envwire import messages as m
from envwire import spacecodec
from envwire.errors import (
    CapacityError,
    EnvTimeoutError,
    EnvwireError,
    ProtocolError,
    TooLargeError,
    UnsupportedError,
)
from envwire.frontends.gymsocket.polling import Polling
from envwire.frontends.gymsocket.requests import is_typed_space, upload_gone, vector_options
from envwire.observe import Observability
from envwire.protocols.gymsocket import Flags, Handshake, Invalid, ServerConnection, Upload
from envwire.protocols.gymsocket.packets import NeedData
from envwire.server.listener import BACKLOG, HOT_WINDOW, ThreadedListener
from envwire.server.parking import Parking
from envwire.server.ratelog import RateLimitedLog, refusals
from envwire.server.security import Security
from envwire.server.security.admission import ConnectionLimits, Ticket
from envwire.server.sessions import SessionTable
from envwire.server.threads import ThreadPool
from envwire.session import Session
from envwire.settings import GymSocketSettings
from envwire.sockets import RECV_SIZE, Stream, configure_stream, receive_timeout, send_buffers
from envwire.sockets.buffers import DEFAULT_MAX_BUFFERED, BufferBudget

__all__ = ["GymSocketFrontEnd"]

log = logging.getLogger("envwire.gym-socket")
#: Closes and refusals a client provokes: INFO (the peer's doing, not the server's trouble), and
#: no more than 20 lines per 10 s, so that no client can flood the log.
_peer_log = RateLimitedLog(log)


class GymSocketFrontEnd(ThreadedListener["_Connection"]):
    """Serves the session table over gym-socket on ``host:port`` (port 0 picks one).

    Args:
        settings: the port, ``monitor_layout`` (how Monitor packets of clients without the
            MONITOR_REPLY flag are read), ``packet_timeout`` (a deadline for each command packet
            once its first byte has arrived), ``max_action_size`` (bytes of one action),
            and ``busy_poll_us``: a connection waits for its next request by polling its socket
            for up to that many microseconds before it sleeps, as long as the client's requests
            keep coming within that window (plain connections only); at most one connection
            fewer than the machine has CPUs polls at once (:attr:`pollers`).
        host: the address to bind.
        sessions: the server's session table.
        security: tokens and TLS; ``limits`` the connection bounds (the ``handshake_timeout``
            is a deadline for the whole handshake).
        observe: where errors answered to clients are counted.
        idle_timeout: seconds a connection may stay silent between commands (None: forever).
        budget: the receive buffers all connections of every front end share.
        threads: the server's pool that serves connections while they have work; ``parking``
            where they wait for their clients meanwhile, without a thread.
    """

    name = "gym-socket"
    thread_name = "envwire-gym-socket"

    def __init__(
        self,
        settings: GymSocketSettings,
        *,
        host: str,
        sessions: SessionTable,
        security: Security,
        limits: ConnectionLimits,
        observe: Observability,
        idle_timeout: float | None,
        budget: BufferBudget | None = None,
        threads: ThreadPool | None = None,
        parking: Parking | None = None,
    ) -> None:
        self.sessions = sessions
        self.observe = observe
        self.host, self.port = host, settings.port or 0
        self.monitor_layout = settings.monitor_layout
        self.idle_timeout = idle_timeout
        self.security = security
        self.packet_timeout = settings.packet_timeout
        self.max_action = settings.max_action_size
        self.budget = budget or BufferBudget(DEFAULT_MAX_BUFFERED)
        self.busy_poll = settings.busy_poll_us / 1e6
        #: Places for connections polling at once: spinning threads beyond the CPUs left over
        #: would only take turns with the GIL and the threads doing work.
        self.pollers = threading.BoundedSemaphore(max(1, (os.cpu_count() or 2) - 1))
        super().__init__(limits, security.tls, threads=threads, parking=parking)

    def start(self) -> tuple[str, int]:
        """Bind, listen and start accepting; returns the bound address."""
        return self.listen(BACKLOG)

    def connection(self, sock: Stream, peer: object, ticket: Ticket) -> _Connection:
        return _Connection(self, sock, peer, ticket)

    def refusal(self, error: EnvwireError) -> bytes:
        """A refused connection's answer: the handshake error string."""
        return ServerConnection().send_handshake_reply(str(error))

    def stop(self) -> None:
        """Stop accepting, drop every connection and free their sessions."""
        for conn in self.stop_listening():
            conn.abort()


class _Connection(Polling):
    """One client: its socket, codec and session."""

    front: GymSocketFrontEnd

    def __init__(
        self, front: GymSocketFrontEnd, sock: Stream, peer: object, ticket: Ticket
    ) -> None:
        self.front = front
        self.sock = sock
        self.peer = peer
        self.ticket = ticket
        self.codec = ServerConnection(
            monitor_layout=front.monitor_layout, max_action=front.max_action
        )
        self.hold = front.budget.hold()
        self._render_failures = 0
        self.session: Session | None = None
        self._send_lock = threading.Lock()
        self._dead = False
        #: When the command packet in the buffer began to arrive (None: no packet begun).
        self.packet_began: float | None = None
        #: The pool thread serving the connection now (forsaken if its env hangs).
        self.thread = 0
        #: Whether the next receive polls first (busy polling: see ``_receive_polled``).
        self._poll = True
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)

    def fileno(self) -> int:
        return self.sock.fileno()

    def serve(self) -> float | None:
        """Greet the client, then answer its commands while they keep coming (a pool thread):
        when it falls silent, the time until which it may stay so, None when it is over."""
        self.thread = threading.get_ident()
        try:
            if self.session is None:
                greeted = self._greet()
                if greeted is None:  # refused, or the client left
                    return None
                if not greeted:  # the handshake is not whole yet
                    return self.ticket.deadline
            return self._serve()
        except ProtocolError as exc:
            self._fatal(exc)
        except OSError as exc:
            log.debug("connection %s ends: %s", self.peer, exc)
        return None

    def expire(self) -> float | None:
        """The client stayed silent past its time: say why where the protocol can, and close."""
        if self.session is None:
            seconds = self.front.admission.limits.handshake_timeout
            self._refuse(f"no handshake within {seconds:g} s")
        elif self.codec.buffered:
            seconds = self.front.packet_timeout
            self._fatal(ProtocolError(f"a command packet did not arrive whole in {seconds:g} s"))
        elif not self._dead:
            waited = self.front.idle_timeout
            _peer_log("%s: closing the connection after %g s of silence", self.peer, waited)
        return None

    @property
    def over(self) -> bool:
        return self._dead

    def abort(self) -> None:
        self.drop()
        self.codec.discard()

    def _fatal(self, error: ProtocolError) -> None:
        """The client's bytes cannot be parsed further: say why where it can hear it, log it."""
        if self._dead:
            return
        who = f"session {self.session.id[:8]}" if self.session else "handshake"
        _peer_log("%s (%s): %s; closing the connection", self.peer, who, error)
        reply = self.codec.send_fatal(error)
        if reply is not None:
            self._send(reply)

    def _greet(self) -> bool | None:
        """Read and answer the handshake (as far as the client's bytes allow): True when a
        session is open, False when the handshake is not whole yet, None when it was refused
        or the client left."""
        codec = self.codec
        event: object = codec.next_event()
        try:
            while isinstance(event, NeedData):
                # Past the deadline what has arrived is still read (the server may come to a
                # connection late in a burst); the handshake's size is bounded.
                receive_timeout(self.sock, min(HOT_WINDOW, max(self.ticket.remaining(), 0.001)))
                data = self.sock.recv(RECV_SIZE)
                if not data:
                    return None
                codec.receive_data(data)
                event = codec.next_event()
        except (TimeoutError, BlockingIOError):  # ProtocolError goes to serve()'s _fatal
            return False
        assert isinstance(event, Handshake)  # before its handshake the codec yields no other
        reply = self._handshake(event)
        self.ticket.passed()
        if reply is None:
            return None
        # From now on: sends may take the idle time, a receive waits the hot window at most.
        configure_stream(self.sock, self.front.idle_timeout)
        receive_timeout(self.sock, HOT_WINDOW)
        self._send(reply)
        return True

    def _serve(self) -> float | None:
        """Answer commands until the client falls silent: then the time it may stay so."""
        codec, session = self.codec, self.session
        assert session is not None  # serve() greets first
        data = b"?"  # not EOF: the first round parses what came with the handshake
        parse = codec.buffered > 0
        # Polled while the client's requests come within the window (_receive_polled); a
        # connection that waited for its client past the hot window begins again unpolled.
        window = self.front.busy_poll if isinstance(self.sock, socket.socket) else 0.0
        lean = False  # whether the last request was a lean step (then nothing is buffered)
        while not self._dead:
            if not parse:
                if not lean:
                    self._mark_packet()
                try:
                    data = self._receive_polled(window) if window else self.sock.recv(RECV_SIZE)
                except (TimeoutError, BlockingIOError):
                    self._poll = False  # silent past the window: its next wait sleeps at once
                    return self._silent_until()
                step = codec.lean_step(data)
                if step is not None:  # the usual request: one step, alone
                    reply: bytes | list[bytes | memoryview] | None
                    if type(step) is m.Step:  # _handle's, in fewer calls: nearly every request
                        try:  # (the tap is told once the reply is sent: session.tell below)
                            reply = codec.send_reply_buffers(session.step(step, tell=False))
                        except Exception as exc:
                            reply = self._failed(step, exc)
                    else:
                        reply = self._handle(step)
                    if reply is None:
                        return None
                    if not self._dead:
                        send_lock = self._send_lock  # (acquired and released: half the with's cost)
                        send_lock.acquire()
                        try:
                            if isinstance(reply, bytes):
                                self.sock.sendall(reply)
                            else:  # a frame's buffers (the env's array among them), gathered
                                send_buffers(self.sock, reply)
                        finally:
                            send_lock.release()
                    if session.due:  # (a step kept for the tap: told now the reply is out)
                        session.tell()
                    lean = True
                    continue
                lean = False
                codec.receive_data(data)
                if not self.hold.update(codec.buffered):
                    raise TooLargeError(
                        f"the server's receive buffers are full ({self.front.budget.limit} "
                        "bytes across all connections); try again later"
                    )
            parse = False
            if not self._answer_buffered() or not data:
                return None
        return None

    def _answer_buffered(self) -> bool:
        """Answer the requests whole in the codec's buffer; False: close the connection now."""
        codec = self.codec
        out: list[bytes | memoryview] = []
        while True:
            event = codec.next_event()
            if isinstance(event, NeedData):
                break
            reply = self._handle(event)
            if reply is None:
                self._flush(out)
                return False
            if isinstance(reply, list):  # the env's own array in it: sent before it may change
                out += reply
                self._flush(out)
            else:
                out.append(reply)
            if not codec.buffered:
                break
        self._flush(out)
        self.hold.update(codec.buffered)
        return True

    def _flush(self, out: list[bytes | memoryview]) -> None:
        if out and not self._dead:
            with self._send_lock:
                send_buffers(self.sock, out)
            out.clear()

    def _handle(
        self, event: Handshake | m.Request | Upload | Invalid
    ) -> bytes | list[bytes | memoryview] | None:
        """The bytes answering one event (a list: buffers to send before the next event is
        handled, see ``ServerConnection.send_reply_buffers``); None means: close the connection
        now."""
        codec = self.codec
        if isinstance(event, Handshake):
            return self._handshake(event)
        assert self.session is not None
        try:
            if isinstance(event, Invalid):
                raise event.error
            if isinstance(event, Upload):  # gym-socket's own: never reaches the session
                raise UnsupportedError(upload_gone(self.front.sessions.monitor_root, event))
            return codec.send_reply_buffers(self.session.handle(event))
        except Exception as exc:
            return self._failed(event, exc)

    def _failed(
        self, event: m.Request | Upload | Invalid, exc: Exception
    ) -> bytes | list[bytes | memoryview] | None:
        """The bytes answering an event whose handling raised ``exc`` (None: close now)."""
        assert self.session is not None
        codec = self.codec
        if isinstance(exc, EnvwireError):
            self.front.observe.error(self.front.name, exc, self.session.env_id)
            if self._dead:
                return None
            if isinstance(event, m.Render) and not codec.flags & Flags.ERRORS:
                self._render_failed(exc)
            elif not exc.remote:
                log.warning("session %s (%s): %s", self.session.id[:8], self.session.env_id, exc)
            return codec.send_error(exc)
        # a bug of ours: say so, keep serving
        log.error("session %s: internal error", self.session.id[:8], exc_info=exc)
        internal = EnvwireError(f"internal server error: {type(exc).__name__}: {exc}")
        return None if self._dead else codec.send_error(internal)

    def _render_failed(self, error: EnvwireError) -> None:
        """Log a Render the client cannot hear of: once loudly, then quietly (clients that
        render every step would flood the log)."""
        assert self.session is not None
        self._render_failures += 1
        level = logging.WARNING if self._render_failures == 1 else logging.DEBUG
        log.log(
            level,
            "session %s (%s): Render failed (%d so far); the client has no reply to hear it "
            "in, so the session goes on (a monitor notes it as video_error): %s",
            self.session.id[:8],
            self.session.env_id,
            self._render_failures,
            error,
        )

    def _handshake(self, event: Handshake) -> bytes | None:
        """The reply opening the session, or None after refusing it (the reason was sent)."""
        unknown = self.codec.unknown_flags()
        if unknown:
            error = (
                f"unknown handshake flags 0x{unknown:02x} (known: 0x01 errors, 0x02 monitor "
                "reply, 0x04 extended, 0x08 vector, 0x10 auth, 0x20 final obs)"
            )
            self._refuse(error)
            return None
        security = self.front.security
        if security.tokens is not None:  # before the env id is even looked at
            if not event.flags & Flags.AUTH:
                error = "this server requires a token"
                why = (
                    "no token: its handshake has no AUTH flag (clients without token support, "
                    "such as the original Go client, cannot connect to a server with tokens)"
                )
            elif not security.authenticated(event.token):
                error = why = "the token was not accepted"
            else:
                error = ""
            if error:
                refusals(self.front.name, self.ticket.address, why)
                self._refuse(error)
                return None
            try:  # from now on the connection counts by its token, not its address
                self.ticket.authenticated(str(security.tokens.principal(event.token)))
            except CapacityError as exc:
                refusals(self.front.name, self.ticket.address, str(exc))
                self._refuse(str(exc))
                return None
        try:
            session = self.front.sessions.open(
                event.env_name,
                front_end=self.front.name,
                peer=f"{self.peer[0]}:{self.peer[1]}" if isinstance(self.peer, tuple) else "",
                **vector_options(event.vector),
            )
        except EnvwireError as exc:
            self.front.observe.error(self.front.name, exc)
            self._refuse(str(exc))
            return None
        try:  # every space must have a gym-socket description (typed envs' have none)
            if session.spec is not None:
                spacecodec.describe(session.action_space)
                spacecodec.describe(session.observation_space)
        except EnvwireError as exc:
            self.front.sessions.close(session)
            error = f"{event.env_name} cannot be served over gym-socket: {exc}"
            if is_typed_space(session.action_space):
                error += " (a typed env: use its OpenEnv front end, http:// or ws://)"
            self._refuse(error)
            return None
        self.session = session
        session.set_on_hang(self._on_hang)
        if session.spec is None:
            pass  # no env named (only Upload and Close follow): the codec needs no spaces
        elif session.autoreset_mode is None:
            self.codec.set_spaces(session.action_space, session.observation_space)
        else:  # JSON actions and observations of a vector session are batches
            assert session.batch_action_space is not None  # set for every vector session
            self.codec.set_spaces(
                session.batch_action_space,
                batch_space(session.observation_space, session.num_envs),
            )
        return self.codec.send_handshake_reply("")

    def _refuse(self, error: str) -> None:
        """Answer the handshake with ``error``; the connection then closes."""
        _peer_log("%s: handshake refused: %s", self.peer, error)
        self._send(self.codec.send_handshake_reply(error))

    def _on_hang(self, error: EnvTimeoutError) -> None:
        """Watchdog thread: the env is stuck in our thread; tell the client and hang up (the
        stuck thread's place in the pool goes to another)."""
        self.front.threads.forsake(self.thread)
        log.warning("session %s: %s", self.session.id[:8] if self.session else "?", error)
        reply = self.codec.send_error(error)
        if reply is not None:
            self._send(reply)
        self.drop()

    def _send(self, data: bytes) -> None:
        try:
            with self._send_lock:
                self.sock.sendall(data)
        except OSError:
            pass

    def drop(self) -> None:
        """Free the session, then close the socket (idempotent, any thread).

        In that order, so that a client that sees the connection close can open a new session
        at once, even on a server at capacity.
        """
        if self._dead:
            return
        self._dead = True
        self.hold.release()
        if self.session is not None:
            # The session's worker calls back into this connection if it hangs: forget that,
            # or the cycle keeps the connection and its buffers until the cyclic collector runs.
            self.session.set_on_hang(None)
            self.front.sessions.close(self.session)
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.front.forget(self)
