"""A dm_env_rpc client transport that pipelines, and ``grpc://`` URLs.

:class:`DmEnvRpcTransport` speaks envwire's message vocabulary (Reset, Step, ...) over one
dm_env_rpc ``Process`` stream: it creates a world for the env (or joins a given one), joins it,
and reads the exact Gymnasium spaces through the properties extension, so that a
:class:`~envwire.adapters.gymenv.RemoteEnv` over it has the server env's spaces. Unlike the
official ``Connection``, :meth:`DmEnvRpcTransport.send` does not wait: several requests may be
in flight, and :meth:`DmEnvRpcTransport.receive` returns their replies in order.

Gymnasium semantics are kept on top of dm_env_rpc's: ``reset`` is a ResetRequest followed by the
Step that starts the sequence (sent together), a Step before the first reset or after the
episode ended is refused with :class:`~envwire.errors.StateError`, TERMINATED is
``terminated``, and ``truncated`` and ``info`` come from the ``envwire.extras`` observations.

Vector worlds (N copies per message) are in :mod:`envwire.client.dmenvrpc.vector`.

``grpcs://`` URLs use TLS and verify the server against ``ca`` (default ``ENVWIRE_CA``, else the
system's CAs); ``token`` (default ``ENVWIRE_TOKEN``) travels as the stream's
``authorization: Bearer`` metadata.
"""

from __future__ import annotations

import json
import queue
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypedDict, Unpack

import grpc
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from dm_env_rpc.v1 import dm_env_rpc_pb2_grpc
from dm_env_rpc.v1.extensions import properties_pb2
from google.protobuf import any_pb2, message

from envwire import jsonio, spacecodec
from envwire import messages as m
from envwire.client.credentials import Credentials
from envwire.client.dmenvrpc.channel import (
    CHANNEL_OPTIONS,
    DEFAULT_PORT,
    channel_credentials,
    open_channel,
)
from envwire.client.transport import split_url
from envwire.errors import (
    CapacityError,
    EnvError,
    EnvwireError,
    InvalidArgumentError,
    ProtocolError,
    StateError,
    TransportError,
    UnauthenticatedError,
    UnsupportedError,
)
from envwire.protocols import dmenvrpc
from envwire.protocols.dmenvrpc import WORLD_OBSERVATIONS, Layout
from envwire.watchdog import Watchdog

__all__ = [
    "CHANNEL_OPTIONS",
    "DEFAULT_PORT",
    "DmEnvRpcTransport",
    "channel_credentials",
    "open_url",
    "security",
]

_SPACES = ("env.action_space", "env.observation_space")
_Decoder = Callable[[], m.Reply]


class _Security(TypedDict):
    credentials: Credentials
    tls: bool


class _Options(TypedDict, total=False):
    """The keyword arguments :func:`open_url` passes on to :class:`DmEnvRpcTransport`."""

    world: str | None
    world_settings: Mapping[str, Any] | None
    join_settings: Mapping[str, Any] | None


# One thread for every transport: cancels a stream whose reply is overdue.
_DEADLINES = Watchdog(interval=0.25, name="envwire-grpc-deadlines")


class DmEnvRpcTransport:
    """One env on a dm_env_rpc server, as envwire messages over one pipelining stream.

    Args:
        host, port: the server's gRPC address.
        env_id: the env to create a world for.
        timeout: seconds to wait for the channel and for each reply.
        world: join this existing world instead of creating one (a multi-player world
            someone else created); ``env_id`` is then only used in messages.
        world_settings: more CreateWorld settings (``players``, ``kwargs``: a dict of
            constructor arguments, ...); ``env`` is set from ``env_id``.
        join_settings: more JoinWorld settings (``player``, ...).
        credentials: the token to present; and, with ``tls``, the CA to verify the server by.
        tls: connect over TLS (``grpcs://``).

    Raises (from the constructor):
        TransportError: the server cannot be reached (or is not trusted, under TLS).
        UnauthenticatedError: the server wants a token this client does not have.
        EnvwireError: the server refused the world (UnknownEnvError, CapacityError, ...).
        UnsupportedError: the env's spaces cannot be rebuilt here (typed envs).
    """

    #: Properties read at JoinWorld beside the spaces, handed to :meth:`_lay_out`.
    _properties: tuple[str, ...] = ()

    def __init__(
        self,
        host: str,
        port: int,
        env_id: str,
        *,
        timeout: float = 30.0,
        world: str | None = None,
        world_settings: Mapping[str, Any] | None = None,
        join_settings: Mapping[str, Any] | None = None,
        credentials: Credentials | None = None,
        tls: bool = False,
    ) -> None:
        self.where = f"{'grpcs' if tls else 'grpc'}://{host}:{port}/{env_id}"
        self.env_id = env_id
        self.timeout = timeout
        credentials = credentials or Credentials()
        self._channel = open_channel(
            host, port, tls=tls, credentials=credentials, timeout=timeout, where=self.where
        )
        self._outbox: queue.SimpleQueue[pb.EnvironmentRequest | None] = queue.SimpleQueue()
        self._call = dm_env_rpc_pb2_grpc.EnvironmentStub(self._channel).Process(
            iter(self._outbox.get, None), metadata=credentials.grpc_metadata()
        )
        self._replies: Iterator[pb.EnvironmentResponse] = self._call
        self._pending: deque[_Decoder] = deque()
        self._waiting_since: float | None = None
        self._expired = False
        self._closed = False
        self._started = False  # a sequence was started by a sent reset
        self._ended = False  # the last received step ended its episode
        self.world_name = world or ""
        self._created = world is None  # a world this transport made is destroyed on close
        _DEADLINES.watch(self)
        try:
            self._open(world, dict(world_settings or {}), dict(join_settings or {}))
        except BaseException:
            self.close()
            raise

    def _open(
        self, world: str | None, world_settings: dict[str, Any], join: dict[str, Any]
    ) -> None:
        if world is None:
            settings = {"env": self.env_id, **world_settings}
            self._put("create_world", pb.CreateWorldRequest(settings=_tensors(settings)))
            self.world_name = self._take("create_world").world_name
        join = {"envwire.extras": True, **join}
        self._put(
            "join_world", pb.JoinWorldRequest(world_name=self.world_name, settings=_tensors(join))
        )
        keys = _SPACES + self._properties
        for key in keys:
            self._put("extension", _property_read(key))
        self.specs = self._take("join_world").specs
        values = {key: _property_value(self._take("extension")) for key in keys}
        descriptions = [json.loads(values[key]) for key in _SPACES]
        if any("error" in d for d in descriptions):
            raise UnsupportedError(
                f"{self.where}: the env's spaces ({descriptions[0].get('repr')}, ...) have no "
                "envwire description; typed envs travel over dm_env_rpc as JSON strings: use the "
                "official client, or envwire's http:// or ws:// front end"
            )
        self.action_space = spacecodec.from_description(descriptions[0])
        self.observation_space = spacecodec.from_description(descriptions[1])
        self._lay_out(values)

    def _lay_out(self, values: Mapping[str, str]) -> None:
        """Make the layouts, following the specs' UIDs and data types, and find the UIDs of
        the observations the world adds."""
        uids = {spec.name: uid for uid, spec in self.specs.observations.items()}
        self._actions = Layout(self.action_space, "action").matched(self.specs.actions, "action")
        self._observations = Layout(
            self.observation_space, "observation", reserved=WORLD_OBSERVATIONS
        ).matched(self.specs.observations, "observation")
        self._requested = sorted(uids.values())
        self._reward, self._truncated, self._info = (
            uids[name] for name in ("reward", "envwire.truncated", "envwire.info")
        )

    # -- the wire -----------------------------------------------------------------------

    def _put(self, field: str, payload: message.Message) -> None:
        if self._closed:
            raise TransportError(f"{self.where}: the connection is closed")
        request = pb.EnvironmentRequest()
        getattr(request, field).CopyFrom(payload)
        self._outbox.put(request)

    def _take(self, field: str) -> Any:
        """The next response's payload, which must be ``field``; errors raise.

        ``Any``: its class is the one of the response's ``field`` (``StepResponse`` for
        ``"step"``, ...), which callers read attributes of.
        """
        self._waiting_since = time.monotonic()
        try:
            response = next(self._replies)
        except grpc.RpcError as exc:
            raise self._lost(exc) from None
        except StopIteration:
            raise TransportError(f"{self.where}: the server ended the stream") from None
        finally:
            self._waiting_since = None
        got = response.WhichOneof("payload")
        if got == "error":
            raise dmenvrpc.error_from_status(response.error)
        if got != field:
            raise ProtocolError(f"{self.where}: expected a {field} response, got {got}")
        return getattr(response, field)

    def _lost(self, exc: grpc.RpcError) -> EnvwireError:
        if self._expired:
            return TransportError(f"{self.where}: no reply within {self.timeout:g} s")
        code = exc.code() if isinstance(exc, grpc.Call) else None
        details = exc.details() if isinstance(exc, grpc.Call) else str(exc)
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return UnauthenticatedError(f"{self.where}: {details}")
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            return CapacityError(f"{self.where}: {details}")
        if code == grpc.StatusCode.CANCELLED and not self._closed:
            return TransportError(
                f"{self.where}: the server dropped the connection (it drops a connection whose "
                f"inline env hung, and idle connections): {details}"
            )
        return TransportError(f"{self.where}: {code.name if code else 'gRPC error'}: {details}")

    def overdue(self, now: float) -> bool:
        """True when a reply has been awaited for longer than the timeout."""
        since = self._waiting_since
        return since is not None and now - since > self.timeout and not self._expired

    def expire(self) -> None:
        """Give up on the overdue reply: cancel the stream (the waiting call raises)."""
        self._expired = True
        self._call.cancel()

    # -- envwire messages ---------------------------------------------------------------

    def send(self, request: m.Request) -> None:
        """Send a request without waiting; its reply comes from :meth:`receive`, in order.

        Raises:
            StateError: a Step before the first reset, or after an episode that ended.
            UnsupportedError: Render, Monitor and Upload do not exist over dm_env_rpc.
            InvalidArgumentError: reset options (dm_env_rpc has no place for them).
        """
        match request:
            case m.Step(action=action):
                if not self._started or self._ended:
                    why = (
                        "before the first reset" if not self._started else "after the episode ended"
                    )
                    raise StateError(f"step {why} on {self.where}: reset first")
                self._send_step(action)
                self._pending.append(self._step_reply)
            case m.Reset(seed=seed, options=options):
                settings = self._reset_settings(seed, options)
                self._put("reset", pb.ResetRequest(settings=_tensors(settings)))
                self._send_step(None)
                self._started, self._ended = True, False
                self._pending.append(self._reset_reply)
            case m.GetSpace(which=which):
                space = self.action_space if which == m.SpaceKind.ACTION else self.observation_space
                self._pending.append(lambda: m.SpaceReply(space))
            case m.SampleAction():
                self._pending.append(lambda: m.SampleReply(self.action_space.sample()))
            case m.Close():
                self._pending.append(m.Ok)
            case _:
                raise UnsupportedError(
                    f"{type(request).__name__} does not exist over dm_env_rpc ({self.where})"
                )

    def _reset_settings(self, seed: object, options: Mapping[str, Any] | None) -> dict[str, Any]:
        if options:
            raise InvalidArgumentError(
                f"reset options {sorted(options)} have no place in a ResetRequest"
            )
        return {} if seed is None else {"seed": seed}

    def _send_step(self, action: object) -> None:
        request = pb.EnvironmentRequest()
        step = request.step
        if action is not None:
            try:
                self._actions.write(action, step.actions)
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise InvalidArgumentError(
                    f"action {action!r} does not fit {self.action_space}: {exc}"
                ) from None
        step.requested_observations.extend(self._requested)
        if self._closed:
            raise TransportError(f"{self.where}: the connection is closed")
        self._outbox.put(request)

    def receive(self) -> m.Reply:
        """The reply to the oldest request still unanswered.

        Raises:
            EnvwireError: the server's error for that request, as the class its code names.
            TransportError: the connection failed or the reply did not come in time.
        """
        if not self._pending:
            raise ProtocolError(f"{self.where}: receive() with no request in flight")
        return self._pending.popleft()()

    def request(self, request: m.Request) -> m.Reply:
        """Send a request and wait for its reply."""
        self.send(request)
        return self.receive()

    def _reset_reply(self) -> m.ResetReply:
        error: EnvwireError | None = None
        try:
            self._take("reset")
        except EnvwireError as exc:  # the step after it must still be read off the stream
            error = exc
        try:
            observations = self._take("step").observations
        except EnvwireError as exc:
            self._ended = True
            raise (error or exc) from None
        if error is not None:  # the step went on in the old sequence: reset again
            self._ended = True
            raise error
        info = jsonio.loads_info(observations[self._info].strings.array[0])
        return m.ResetReply(self._observe(observations), info)

    def _step_reply(self) -> m.StepReply:
        try:
            response = self._take("step")
        except EnvError:  # the env failed: the server ends the episode
            self._ended = True
            raise
        if self._ended:  # the server began a new sequence with this step: not Gymnasium's way
            raise StateError(f"step after the episode ended on {self.where}: reset first")
        observations = response.observations
        terminated = response.state == pb.TERMINATED
        truncated = bool(observations[self._truncated].bools.array[0])
        self._ended = response.state != pb.RUNNING
        return m.StepReply(
            self._observe(observations),
            _number(observations[self._reward]),
            terminated,
            truncated or (response.state == pb.INTERRUPTED),
            jsonio.loads_info(observations[self._info].strings.array[0]),
        )

    def _observe(self, observations: Mapping[int, pb.Tensor]) -> object:
        """The observation (a sample of the observation space) the tensors hold."""
        return self._observations.read(observations, "observation", check=False)

    def observe(self) -> tuple[Any, float, str]:
        """Step without actions (in a multi-player world: wait for your turn).

        Returns:
            The observation, the reward since the last step, and the state ("running",
            "terminated" or "interrupted").
        """
        if self._pending:
            raise ProtocolError(f"{self.where}: observe() with requests in flight")
        self._send_step(None)
        response = self._take("step")
        state = pb.EnvironmentStateType.Name(response.state).lower()
        reward = _number(response.observations[self._reward])
        return self._observe(response.observations), reward, state

    def read_property(self, key: str) -> Any:
        """The value of a property (see ``docs/protocols/dm_env_rpc.md``), as an array or a
        scalar."""
        if self._pending:
            raise ProtocolError(f"{self.where}: read_property() with requests in flight")
        self._put("extension", _property_read(key))
        array = dmenvrpc.unpack(_property_response(self._take("extension")).read_property.value)
        return array[()] if array.ndim == 0 else array

    def close(self) -> None:
        """Leave the world (and destroy it, if this transport created it), then close the
        channel. The server would free a created world on disconnect anyway."""
        if self._closed:
            return
        if not self._pending and self.world_name and not self._expired:
            try:
                self._put("leave_world", pb.LeaveWorldRequest())
                if self._created:
                    self._put("destroy_world", pb.DestroyWorldRequest(world_name=self.world_name))
                self._take("leave_world")
                if self._created:
                    self._take("destroy_world")
            except EnvwireError:
                pass  # someone else is joined, or the stream is gone: the server cleans up
        self._closed = True
        self._outbox.put(None)
        self._channel.close()

    def __repr__(self) -> str:
        return f"DmEnvRpcTransport({self.where}, world {self.world_name!r})"


def _number(tensor: pb.Tensor) -> float:
    """A one-element numeric tensor's value (rewards are DOUBLE, or the env's own type)."""
    return float(getattr(tensor, tensor.WhichOneof("payload")).array[0])


def _tensors(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings as tensors; a mapping (``kwargs``) travels as a JSON object."""
    return {
        name: dmenvrpc.pack(json.dumps(value) if isinstance(value, Mapping) else value)
        for name, value in settings.items()
    }


def _property_read(key: str) -> any_pb2.Any:
    packed = any_pb2.Any()
    packed.Pack(
        properties_pb2.PropertyRequest(read_property=properties_pb2.ReadPropertyRequest(key=key))
    )
    return packed


def _property_response(packed: any_pb2.Any) -> properties_pb2.PropertyResponse:
    response = properties_pb2.PropertyResponse()
    if not packed.Unpack(response):
        raise ProtocolError(f"expected a PropertyResponse, got {packed.type_url}")
    return response


def _property_value(packed: any_pb2.Any) -> str:
    return str(dmenvrpc.unpack(_property_response(packed).read_property.value).reshape(())[()])


def open_url(
    url: str,
    *,
    timeout: float = 30.0,
    token: str | None = None,
    ca: str | None = None,
    **kwargs: Unpack[_Options],
) -> DmEnvRpcTransport:
    """A transport to ``grpc://host:port/<env id>`` (``grpcs://``: over TLS). ``token`` and
    ``ca`` default to ``ENVWIRE_TOKEN`` and ``ENVWIRE_CA``; other keyword arguments go to
    :class:`DmEnvRpcTransport`: ``world``, ``world_settings``, ``join_settings``.

    Raises:
        InvalidArgumentError: a malformed URL, or settings the server refused.
        TransportError: the server cannot be reached.
        UnauthenticatedError: the server wants a token this client does not have.
    """
    host, port, env_id = split_url(url, DEFAULT_PORT)
    return DmEnvRpcTransport(
        host, port, env_id, timeout=timeout, **security(url, token, ca), **kwargs
    )


def security(url: str, token: str | None, ca: str | None) -> _Security:
    """The transport's ``credentials`` and ``tls`` arguments for ``url``."""
    return _Security(credentials=Credentials.resolve(token, ca), tls=url.startswith("grpcs:"))
