"""The dm_env_rpc front end: gRPC's ``Environment.Process`` bidirectional stream.

Each ``Process`` call is one connection. Its requests are handled one by one in the thread
gRPC gives the call, in arrival order, so pipelined requests are answered in order; every
failure is answered in-band, as a ``google.rpc.Status`` in the response's ``error`` field, and
the stream goes on. Requests arrive as raw bytes and are parsed here, so that even bytes that
are not an ``EnvironmentRequest`` get an in-band error instead of a broken stream.

Worlds and seats are in :mod:`.world` (vector worlds in :mod:`.vector`), their table and
lifetimes in :mod:`.world_table`, the properties extension in :mod:`.properties`, the tensors, specs
and state table in :mod:`envwire.protocols.dmenvrpc`.

Settings (:class:`~envwire.settings.DmEnvRpcSettings`): ``grpc_max_connections`` (streams at once;
each holds a thread while open, and a thread left idle for 10 s exits), the security settings'
``max_connections_per_address`` (of those, from one client address; ``auto``: half of them),
``grpc_max_message_size`` (the largest request message; gRPC refuses a larger one with
``RESOURCE_EXHAUSTED`` before it is parsed), ``grpc_max_num_envs`` (the most copies a vector
world may have). The server's ``idle_timeout`` drops streams that sent nothing for that long.
Connections (:class:`DmEnvRpcFrontEnd` arguments from the security settings): gRPC's core closes
one whose handshake (TLS, HTTP/2 preface) takes longer than ``handshake_timeout``, or that holds
no stream for that long (so a connection that never shows a token is gone within the deadline),
and refuses connections past ``max_transports`` (``max_connections``) at once. gRPC has no
per-address count of connections; streams are counted per address, as above.

Security (:mod:`envwire.server.security`): with a certificate the port serves TLS only; with
tokens, a stream's ``authorization: Bearer TOKEN`` metadata is checked once, before its first
request is read (``UNAUTHENTICATED`` otherwise). A stream past the total or its address's share
ends with ``RESOURCE_EXHAUSTED``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any, Literal, ParamSpec, TypeAlias, TypeVar

import grpc
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb

from envwire.errors import CapacityError, EnvError, EnvwireError
from envwire.frontends.dmenvrpc.properties import Properties
from envwire.frontends.dmenvrpc.world import Connection
from envwire.frontends.dmenvrpc.world_table import WorldTable
from envwire.observe import Observability
from envwire.ports import DMENVRPC
from envwire.protocols import dmenvrpc
from envwire.protocols.dmenvrpc import Kind, Phase
from envwire.registry import Catalog
from envwire.server.ratelog import refusals
from envwire.server.security import Security
from envwire.server.security.addresses import AddressLimiter, address_of
from envwire.server.security.tokens import presented_token
from envwire.server.sessions import SessionTable
from envwire.settings import DmEnvRpcSettings

__all__ = ["SERVICE", "DmEnvRpcFrontEnd"]

log = logging.getLogger("envwire.grpc")

#: The gRPC service name, from dm-env-rpc's generated descriptors.
SERVICE: str = pb.DESCRIPTOR.services_by_name["Environment"].full_name


_OPTIONS = (
    ("grpc.max_send_message_length", -1),
    ("grpc.so_reuseport", 0),  # a port in use is an error, not a silently shared port
    ("grpc.keepalive_time_ms", 60_000),  # find half-open connections
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
)


#: Seconds a stream thread waits for another stream before it exits: a burst of streams leaves
#: no crowd of idle threads behind it.
IDLE_THREAD_SECONDS = 10.0

P = ParamSpec("P")
T = TypeVar("T")
#: A queued call: the future for its result, the function and its arguments.
_Work: TypeAlias = tuple[
    futures.Future[Any], Callable[..., object], tuple[object, ...], dict[str, object]
]


class _DaemonPool(futures.Executor):
    """A thread pool of daemon threads, made as needed up to ``max_workers``; a thread idle
    for ``idle_seconds`` exits.

    gRPC's sync server runs each stream in a pool thread for the stream's whole life. A thread
    stuck in a hung inline env can never return, and ``ThreadPoolExecutor`` joins its threads
    at interpreter exit, so a server with such a thread could not exit; daemon threads can.
    ``ThreadPoolExecutor`` also keeps every thread it ever made; here a thread that found no
    work for ``idle_seconds`` exits. Under one lock, every queued item is owed a thread: an
    idle one it claimed, a new one, or (at the bound) the next to finish its work; a thread
    exits only if no item is owed to it.
    """

    def __init__(self, max_workers: int, idle_seconds: float = IDLE_THREAD_SECONDS) -> None:
        self._max = max_workers
        self._idle_seconds = idle_seconds
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0  # threads waiting for work that no queued item has claimed
        self._backlog = 0  # queued items that found neither an idle thread nor room for one
        self._shutdown = False

    @property
    def threads(self) -> int:
        """Threads alive in the pool (busy or idle)."""
        return self._threads

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> futures.Future[T]:
        future: futures.Future[T] = futures.Future()
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new work after shutdown")
            self._work.put((future, fn, args, kwargs))
            if self._idle:
                self._idle -= 1
            elif self._threads < self._max:
                self._threads += 1
                threading.Thread(target=self._run, name="envwire-grpc", daemon=True).start()
            else:
                self._backlog += 1
        return future

    def _run(self) -> None:
        while True:
            try:
                item = self._work.get(timeout=self._idle_seconds)
            except queue.Empty:
                with self._lock:
                    if self._idle:  # no queued item is owed to this thread
                        self._idle -= 1
                        self._threads -= 1
                        return
                continue
            if item is None:
                return
            future, fn, args, kwargs = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as exc:  # handed to whoever waits on the future
                    future.set_exception(exc)
            del item, future, fn, args, kwargs
            with self._lock:
                if self._backlog:
                    self._backlog -= 1
                else:
                    self._idle += 1

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shutdown = True
            for _ in range(self._threads):
                self._work.put(None)


class DmEnvRpcFrontEnd:
    """Serves the session table over dm_env_rpc on ``host:port`` (port 0 picks one); the
    arguments are as :class:`~envwire.frontends.gymsocket.GymSocketFrontEnd`'s, and
    ``per_address`` bounds the streams of one client address; a connection is closed when its
    handshake, or a time without any stream, passes ``handshake_timeout``, and connections past
    ``max_transports`` (None: no bound) are refused (see the module docstring);
    ``shared_port`` binds with SO_REUSEPORT, for the workers of one server
    (:mod:`envwire.server.supervisor`)."""

    name = DMENVRPC.name

    def __init__(
        self,
        settings: DmEnvRpcSettings,
        *,
        host: str,
        sessions: SessionTable,
        catalog: Catalog,
        security: Security,
        per_address: int | None,
        observe: Observability,
        per_token: int | None = None,
        idle_timeout: float | None,
        handshake_timeout: float = 10.0,
        max_transports: int | None = None,
        shared_port: bool = False,
    ) -> None:
        self.host, self.port = host, settings.port or 0
        self.handshake_timeout = handshake_timeout
        self.max_transports = max_transports
        self.shared_port = shared_port
        self.observe = observe
        self.worlds = WorldTable(sessions, settings.grpc_max_num_envs)
        self.properties = Properties(catalog, self.worlds)
        self.max_connections = settings.grpc_max_connections
        self.streams = AddressLimiter(self.max_connections, per_address, "streams")
        self.per_token = per_token
        self.max_message = settings.grpc_max_message_size
        self.security = security
        self.idle_timeout = idle_timeout
        self._server: grpc.Server | None = None
        self._pool: _DaemonPool | None = None
        self._streams: set[_Stream] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def start(self) -> tuple[str, int]:
        """Bind, listen and start serving; returns the bound address.

        Raises:
            OSError: the address cannot be bound.
        """
        self._pool = _DaemonPool(self.max_connections + 4, IDLE_THREAD_SECONDS)
        handler = grpc.method_handlers_generic_handler(
            SERVICE,
            {
                "Process": grpc.stream_stream_rpc_method_handler(
                    self._process,
                    request_deserializer=None,  # raw bytes: parsed by the codec
                    response_serializer=pb.EnvironmentResponse.SerializeToString,
                )
            },
        )
        limit = -1 if self.max_message is None else self.max_message
        # A connection's handshake (TLS, the HTTP/2 preface), and any time it holds no stream
        # (before its first, between two), may last the handshake deadline: the server then
        # closes it (a client's channel reconnects by itself when it next calls).
        deadline_ms = max(int(self.handshake_timeout * 1000), 1)
        options = [
            *(o for o in _OPTIONS if o[0] != "grpc.so_reuseport"),
            ("grpc.so_reuseport", int(self.shared_port)),
            ("grpc.max_receive_message_length", limit),
            ("grpc.server_handshake_timeout_ms", deadline_ms),
            ("grpc.max_connection_idle_ms", deadline_ms),
        ]
        if self.max_transports is not None:  # past it, gRPC closes a new connection at once
            options.append(("grpc.max_allowed_incoming_connections", self.max_transports))
        server = grpc.server(
            self._pool,
            handlers=[handler],
            maximum_concurrent_rpcs=self.max_connections,
            options=options,
        )
        address = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        security = self.security
        try:
            if security.cert_file is not None and security.key_file is not None:
                with open(security.key_file, "rb") as key, open(security.cert_file, "rb") as cert:
                    pair = (key.read(), cert.read())
                bound = server.add_secure_port(address, grpc.ssl_server_credentials([pair]))
            else:
                bound = server.add_insecure_port(address)
        except RuntimeError as exc:  # the caller names the front end and the address
            raise OSError(str(exc)) from None
        if not bound:
            raise OSError("the port cannot be bound")
        server.start()
        self._server, self.port = server, bound
        if self.idle_timeout is not None:
            threading.Thread(target=self._reap_idle, name="envwire-grpc-idle", daemon=True).start()
        return self.host, bound

    def _process(
        self, requests: Iterator[bytes], context: grpc.ServicerContext
    ) -> Iterator[pb.EnvironmentResponse]:
        """One ``Process`` stream: a response for each request, in order (after the token
        and the client's share of streams are checked: ``context.abort`` raises)."""
        address = address_of(context.peer())
        tokens = self.security.tokens
        key: str = address
        cap: int | Literal["address"] | None = "address"
        if tokens is not None:
            metadata = dict(context.invocation_metadata())
            header = metadata.get("authorization")
            given_token = presented_token(header if isinstance(header, str) else None)
            principal = tokens.principal(given_token)
            if principal is None:
                given = "no token" if header is None else "a token not accepted"
                refusals("dm_env_rpc", address, given)
                context.abort(
                    grpc.StatusCode.UNAUTHENTICATED,
                    "this server requires a token (metadata authorization: Bearer TOKEN); "
                    f"the stream carried {given}",
                )
            # a token is who the client is: its streams count by it, not by the address
            key, cap = str(principal), self.per_token
        try:
            self.streams.acquire(key, cap)
        except CapacityError as exc:
            refusals("dm_env_rpc", address, str(exc))
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
        stream = _Stream(self, context, key)
        with self._lock:
            self._streams.add(stream)
        context.add_callback(stream.end)
        try:
            for data in requests:
                yield stream.handle(data)
                stream.tell()  # (grpc asks for the next response once this one is sent)
        except grpc.RpcError:  # the client went away while we waited for its next request
            return
        finally:
            stream.end()

    def revoke(self, still_valid: Callable[[str], bool]) -> int:
        """Cancel every stream opened with a token no longer accepted; how many."""
        with self._lock:
            gone = [s for s in self._streams if not still_valid(s.address)]
        for stream in gone:
            log.info("a gRPC stream's token was revoked; stream cancelled")
            stream.context.cancel()
        return len(gone)

    def forget(self, stream: _Stream) -> None:
        with self._lock:
            self._streams.discard(stream)

    def _reap_idle(self) -> None:
        assert self.idle_timeout is not None
        interval = min(max(self.idle_timeout / 4, 0.05), 30.0)
        while not self._stopping.wait(interval):
            cutoff = time.monotonic() - self.idle_timeout
            with self._lock:
                idle = [s for s in self._streams if s.last_active < cutoff and not s.busy]
            for stream in idle:
                log.info("dropping a gRPC connection idle for %g s", self.idle_timeout)
                stream.context.cancel()

    def stop(self) -> None:
        """Stop serving: cancel every stream and drop every world."""
        self._stopping.set()
        if self._server is not None:
            self._server.stop(grace=None)
        if self._pool is not None:
            self._pool.shutdown(wait=False)
        with self._lock:
            streams = list(self._streams)
        for stream in streams:
            stream.end(force=True)
        self.worlds.close_all()


class _Stream:
    """One ``Process`` call: its connection state and the dispatch of its requests."""

    def __init__(
        self, front: DmEnvRpcFrontEnd, context: grpc.ServicerContext, address: str
    ) -> None:
        self.front = front
        self.context = context
        self.address = address  # holds one of its streams until end()
        peer = getattr(context, "peer", None)
        self.conn = Connection(abort=self._abort, peer=str(peer() or "") if peer else "")
        self.last_active = time.monotonic()
        self.busy = False
        self._ending = self._ended = False
        self._lock = threading.Lock()

    def handle(self, data: bytes) -> pb.EnvironmentResponse:
        """The response to one serialized request (errors become ``error`` responses)."""
        self.busy, self.last_active = True, time.monotonic()
        conn = self.conn
        kind: Kind | None = None
        try:
            request = dmenvrpc.parse_request(data)
            kind = dmenvrpc.request_kind(request)
            after = dmenvrpc.next_phase(conn.phase, kind, conn.world_name)
            response = self._dispatch(kind, request)
            if isinstance(after, Phase) and kind is not Kind.STEP:
                conn.phase = after
            return response
        except EnvwireError as exc:
            self.front.observe.error("dm_env_rpc", exc)
            if not exc.remote:
                log.warning("world %s: %s", conn.world_name or "-", exc)
            return dmenvrpc.error_response(exc)
        except Exception as exc:  # a bug of ours must cost one request, not the stream
            log.exception("handling a %s request failed", kind.value if kind else "malformed")
            what = kind.value if kind else "request"
            return dmenvrpc.error_response(
                EnvError(f"internal error handling {what}: {type(exc).__name__}: {exc}")
            )
        finally:
            self.busy = False
            if self._ending:
                self.end()

    def tell(self) -> None:
        """Tell the tap of the step the last request kept until its response was sent; not
        while another player's request holds the world's session (which tells it first)."""
        world = self.conn.world
        if world is not None:
            world.session.tell(blocking=False)

    def _dispatch(self, kind: Kind, request: pb.EnvironmentRequest) -> pb.EnvironmentResponse:
        conn, worlds = self.conn, self.front.worlds
        response = pb.EnvironmentResponse()
        match kind:
            case Kind.STEP:
                assert conn.world is not None  # the state table refuses Step when unjoined
                conn.world.step(conn, request.step, response.step)
            case Kind.CREATE_WORLD:
                settings = dmenvrpc.read_settings(request.create_world.settings, "create_world")
                response.create_world.world_name = worlds.create(settings, conn).name
            case Kind.JOIN_WORLD:
                settings = dmenvrpc.read_settings(request.join_world.settings, "join_world")
                world = worlds.get(request.join_world.world_name)
                response.join_world.specs.CopyFrom(world.join(conn, settings))
            case Kind.RESET:
                assert conn.world is not None
                settings = dmenvrpc.read_settings(request.reset.settings, "reset")
                response.reset.specs.CopyFrom(conn.world.reset(conn, settings))
            case Kind.RESET_WORLD:
                settings = dmenvrpc.read_settings(request.reset_world.settings, "reset_world")
                worlds.get(request.reset_world.world_name).reset_world(settings, conn)
                response.reset_world.SetInParent()
            case Kind.LEAVE_WORLD:
                worlds.leave(conn)
                response.leave_world.SetInParent()
            case Kind.DESTROY_WORLD:
                worlds.destroy(request.destroy_world.world_name, conn)
                response.destroy_world.SetInParent()
            case Kind.EXTENSION:
                response.extension.CopyFrom(self.front.properties.handle(request.extension, conn))
        return response

    def _abort(self) -> None:
        """Watchdog thread: the env this stream was stepping hung; drop the stream now."""
        log.warning("world %s: an inline env hung; dropping its connection", self.conn.world_name)
        self.context.cancel()
        self.end(force=True)

    def end(self, force: bool = False) -> None:
        """Release the connection's world and created worlds (idempotent, any thread).

        While a request is being handled, the release waits for it to finish, unless
        ``force`` (the request is stuck in a hung env).
        """
        with self._lock:
            if self._ended:
                return
            if self.busy and not force:
                self._ending = True
                return
            self._ended = True
        self.front.streams.release(self.address)
        self.front.forget(self)
        self.front.worlds.disconnect(self.conn)
