"""The gRPC channel of a dm_env_rpc client: its options, its TLS credentials, and a wait for it
that ends at the first failed connection with what answered instead.

gRPC's own wait (``channel_ready_future``) retries a failed connection with backoff until its
timeout, so a client pointed at another front end's port, or with TLS on one side only, would
wait its whole timeout and learn nothing. :func:`open_channel` watches the channel's state
instead: at its first ``TRANSIENT_FAILURE`` it probes the port (:mod:`envwire.client.probe`)
and raises what it found there; only when a gRPC server does answer there does it go on
waiting, as gRPC would, for the channel to become ready.
"""

from __future__ import annotations

import threading
import time

import grpc

from envwire.client.credentials import Credentials
from envwire.client.probe import Expecting, Finding, Found, explain, probe
from envwire.errors import ConfigError, TransportError
from envwire.ports import DMENVRPC

__all__ = ["CHANNEL_OPTIONS", "DEFAULT_PORT", "channel_credentials", "open_channel"]

#: Options of the channels this client opens: messages of any size, keepalive pings.
CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
)

#: The port of ``grpc://`` URLs that name none.
DEFAULT_PORT = DMENVRPC.default_port
#: What the wrong server's answers are told from.
_EXPECTING = Expecting("dm_env_rpc", Found.HTTP2, DEFAULT_PORT)

_READY = grpc.ChannelConnectivity.READY
_FAILED = grpc.ChannelConnectivity.TRANSIENT_FAILURE


def channel_credentials(credentials: Credentials) -> grpc.ChannelCredentials:
    """SSL channel credentials that verify the server against ``credentials.ca`` (else the
    system's CAs).

    Raises:
        ConfigError: the CA file cannot be read.
    """
    roots = None
    if credentials.ca is not None:
        try:
            with open(credentials.ca, "rb") as file:
                roots = file.read()
        except OSError as exc:
            raise ConfigError(f"cannot read CA certificates from {credentials.ca}: {exc}") from None
    return grpc.ssl_channel_credentials(root_certificates=roots)


def open_channel(
    host: str, port: int, *, tls: bool, credentials: Credentials, timeout: float, where: str = ""
) -> grpc.Channel:
    """A ready channel to ``host:port`` (over TLS when ``tls``), within ``timeout`` seconds;
    ``where`` names the server in errors (default ``grpc://host:port``, or ``grpcs://``).

    Raises:
        TransportError: the first connection failed and a probe found why (nothing listens,
            another protocol answers, TLS on one side only, a certificate not trusted), or the
            channel was not ready in time.
        ConfigError: the CA file cannot be read.
    """
    target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if tls:
        channel = grpc.secure_channel(
            target, channel_credentials(credentials), options=CHANNEL_OPTIONS
        )
    else:
        channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
    states = _States()
    channel.subscribe(states.note, try_to_connect=True)
    try:
        _wait(states, timeout, host, port, tls=tls, ca=credentials.ca, where=where)
    except BaseException:
        channel.unsubscribe(states.note)
        channel.close()
        raise
    channel.unsubscribe(states.note)
    return channel


class _States:
    """The connectivity states a channel has been in, as gRPC reports them (on its threads)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._seen: set[grpc.ChannelConnectivity] = set()

    def note(self, state: grpc.ChannelConnectivity) -> None:
        with self._changed:
            self._seen.add(state)
            self._changed.notify_all()

    def wait(
        self, wanted: set[grpc.ChannelConnectivity], deadline: float
    ) -> set[grpc.ChannelConnectivity]:
        """The states seen, once one of ``wanted`` is among them or at ``deadline``."""
        with self._changed:
            self._changed.wait_for(
                lambda: not wanted.isdisjoint(self._seen), max(deadline - time.monotonic(), 0)
            )
            return set(self._seen)


def _wait(
    states: _States, timeout: float, host: str, port: int, *, tls: bool, ca: str | None, where: str
) -> None:
    """Wait until the channel is READY; at its first TRANSIENT_FAILURE, probe the port.

    Raises:
        TransportError: see :func:`open_channel`.
    """
    scheme = "grpcs" if tls else "grpc"
    where = where or f"{scheme}://{host}:{port}"
    deadline = time.monotonic() + timeout
    seen = states.wait({_READY, _FAILED}, deadline)
    if _FAILED in seen and _READY not in seen:
        finding = probe(host, port, tls=tls, ca=ca)
        if finding.untrusted:  # a gRPC server, whose certificate this client does not trust
            finding = Finding(Found.UNTRUSTED, finding.untrusted)
        line = explain(finding, _EXPECTING, scheme)
        if line is not None and finding.found is not Found.SILENT:
            raise TransportError(f"cannot connect to {where}: {line}")
        # A gRPC server answers there (or something that says nothing): wait, as gRPC would.
        seen = states.wait({_READY}, deadline)
    if _READY not in seen:
        hint = " (is its certificate trusted? see ca= and ENVWIRE_CA)" if tls else ""
        raise TransportError(f"cannot connect to {where} within {timeout:g} s{hint}")
