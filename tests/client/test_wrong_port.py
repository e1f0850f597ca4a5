"""Every client envwire ships, pointed at the wrong port or with TLS on one side only, says what
it found there in one line, at once: against real servers (every front end, with TLS and
without), an HTTP proxy, and a server that closes without a word. The servers' side too: an
HTTP port refuses another protocol's first bytes at once, and so does the gym-socket port."""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

import envwire
from envwire.errors import EnvwireError
from envwire.testing import ServerProcess
from tests.tlsfiles import TlsFiles, make_tls_files

#: A generous bound for a loaded machine; the design target is 2 s.
PROMPT = 5.0
FRONT_ENDS = ("gym-socket", "http", "grpc")
#: Each client's scheme: its front end, and whether it speaks TLS.
SCHEMES = {
    "gym-socket": ("gym-socket", False),
    "gym-sockets": ("gym-socket", True),
    "http": ("http", False),
    "https": ("http", True),
    "ws": ("http", False),
    "wss": ("http", True),
    "grpc": ("grpc", False),
    "grpcs": ("grpc", True),
}
#: How each front end's port answers a stranger, and the flag that sets it.
ANSWERS = {"gym-socket": "gym-socket", "http": "HTTP", "grpc": "HTTP/2 (gRPC)"}
PLAIN = {"gym-sockets": "gym-socket", "https": "http", "wss": "ws", "grpcs": "grpc"}
SECURE = {plain: secure for secure, plain in PLAIN.items()}


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def servers(
    tls: TlsFiles, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[bool, ServerProcess]]:
    """Both servers: every front end without TLS (False), and with it (True)."""
    config = tmp_path_factory.mktemp("config") / "tls.toml"
    config.write_text(f'[server]\ntls_cert = "{tls.cert}"\ntls_key = "{tls.key}"\n')
    plain = ServerProcess(["CartPole-v1"], front_ends=FRONT_ENDS)
    secure = ServerProcess(["CartPole-v1"], ("--config", str(config)), front_ends=FRONT_ENDS)
    with plain, secure:
        yield {False: plain, True: secure}


def expected(scheme: str, port_of: str, server_tls: bool) -> str:
    """The line a client of ``scheme`` reports at ``port_of``'s port of a server with TLS or not."""
    client_tls = SCHEMES[scheme][1]
    if client_tls and not server_tls:
        return f"the server does not speak TLS: use {PLAIN[scheme]}://"
    if server_tls and not client_tls:
        return f"the server speaks TLS: use {SECURE[scheme]}://"
    return f"the server answered {ANSWERS[port_of]}: is this the --{port_of} port?"


def attempt(url: str, ca: str | None = None) -> tuple[str, float]:
    """The message of the error opening ``url`` raises, and the seconds it took."""
    start = time.monotonic()
    with pytest.raises(EnvwireError) as raised:
        envwire.make(url, ca=ca, timeout=30)
    return str(raised.value), time.monotonic() - start


WRONG = [
    (scheme, port_of, server_tls)
    for scheme, (own, client_tls) in SCHEMES.items()
    for port_of in FRONT_ENDS
    for server_tls in (False, True)
    if (port_of, server_tls) != (own, client_tls)
]


@pytest.mark.parametrize(("scheme", "port_of", "server_tls"), WRONG)
def test_a_wrong_pairing_is_named_at_once(
    servers: dict[bool, ServerProcess], tls: TlsFiles, scheme: str, port_of: str, server_tls: bool
) -> None:
    prefix = "envs/" if SCHEMES[scheme][0] == "http" else ""
    url = servers[server_tls].url(scheme, prefix + "CartPole-v1", port_of)
    message, seconds = attempt(url, tls.ca)
    assert expected(scheme, port_of, server_tls) in message
    assert url.partition("/CartPole")[0].partition("/envs")[0] in message  # names the server
    assert seconds < PROMPT


def test_the_right_pairings_still_connect(
    servers: dict[bool, ServerProcess], tls: TlsFiles
) -> None:
    """The probes only speak after a failure: every client still reaches its own server."""
    for scheme, (own, client_tls) in SCHEMES.items():
        prefix = "envs/" if own == "http" else ""
        url = servers[client_tls].url(scheme, prefix + "CartPole-v1", own)
        env = envwire.make(url, ca=tls.ca, timeout=30)
        try:
            assert env.reset(seed=0)[0].shape == (4,)
        finally:
            env.close()


class FakeServer:
    """A TCP server on a free port that answers every connection with ``answer`` once it has
    read something (or closes it at once when ``answer`` is None)."""

    def __init__(self, answer: bytes | None) -> None:
        self.answer = answer
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._one, args=(connection,), daemon=True).start()

    def _one(self, connection: socket.socket) -> None:
        with connection:
            if self.answer is None:
                return
            connection.settimeout(5)
            try:
                connection.recv(65536)
                connection.sendall(self.answer)
            except OSError:
                pass

    def close(self) -> None:
        with contextlib.suppress(OSError):  # wakes the accept (Linux)
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join(5)


@pytest.fixture
def proxy() -> Iterator[FakeServer]:
    """Anything that answers HTTP: a proxy that wants its own credentials."""
    server = FakeServer(
        b"HTTP/1.1 407 Proxy Authentication Required\r\ncontent-length: 0\r\n"
        b"connection: close\r\n\r\n"
    )
    yield server
    server.close()


@pytest.fixture
def closer() -> Iterator[FakeServer]:
    server = FakeServer(None)
    yield server
    server.close()


@pytest.mark.parametrize(
    ("scheme", "line"),
    [
        ("gym-socket", "the server answered HTTP: is this the --http port? gym-socket's default "
         "port is 5001"),
        ("grpc", "the server answered HTTP: is this the --http port? dm_env_rpc's default port "
         "is 50051"),
        ("http", "the server answered 407 Proxy Authentication Required without an envwire "
         "error"),
        ("ws", "server rejected WebSocket connection: HTTP 407"),
        ("gym-sockets", "the server does not speak TLS: use gym-socket://"),
        ("grpcs", "the server does not speak TLS: use grpc://"),
    ],
)  # fmt: skip
def test_an_http_proxy_is_named(proxy: FakeServer, scheme: str, line: str) -> None:
    message, seconds = attempt(f"{scheme}://127.0.0.1:{proxy.port}/CartPole-v1")
    assert line in message
    assert "1347703880" not in message
    assert seconds < PROMPT


@pytest.mark.parametrize(
    ("scheme", "protocol"),
    [
        ("gym-socket", "a gym-socket port"),
        ("gym-sockets", "a gym-socket port"),  # during the TLS handshake
        ("http", "an OpenEnv port"),
        ("https", "an OpenEnv port"),
        ("ws", "an OpenEnv port"),
        ("wss", "an OpenEnv port"),
        ("grpc", "a dm_env_rpc port"),
        ("grpcs", "a dm_env_rpc port"),
    ],
)
def test_a_close_without_a_word_is_named(closer: FakeServer, scheme: str, protocol: str) -> None:
    message, seconds = attempt(f"{scheme}://127.0.0.1:{closer.port}/CartPole-v1")
    assert f"the server closed the connection without answering: is this {protocol}?" in message
    assert seconds < PROMPT


def client_hello() -> bytes:
    """The first bytes a TLS client sends (its ClientHello record)."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        context = ssl.create_default_context()
        with context.wrap_socket(
            ours, server_hostname="localhost", do_handshake_on_connect=False
        ) as secure:
            secure.setblocking(False)
            with pytest.raises(ssl.SSLWantReadError):
                secure.do_handshake()
            return theirs.recv(65536)


def first_answer(port: int, sent: bytes) -> tuple[bytes, float]:
    """What a server sends back first to ``sent`` (read until it closes, or 10 s)."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(sent)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer, time.monotonic() - start


@pytest.mark.parametrize(
    ("name", "sent"),
    [
        ("a gym-socket handshake", b"\x01\x00\x00\x00"),
        ("a TLS ClientHello", b""),  # filled in by the test
    ],
)
def test_the_http_port_refuses_another_protocol_before_a_line_ends(
    servers: dict[bool, ServerProcess], name: str, sent: bytes
) -> None:
    answer, seconds = first_answer(servers[False].ports["http"], sent or client_hello())
    assert answer.startswith(b"HTTP/1.1 400 "), name
    assert b"expected a request line" in answer
    assert seconds < PROMPT


@pytest.mark.parametrize(
    ("named", "sent"),
    [
        (b"that is an HTTP request", b"GET /envs HTTP/1.1\r\n"),
        (b"that is a TLS ClientHello", b""),  # filled in by the test
    ],
)
def test_the_gym_socket_port_refuses_another_protocol_at_once(
    servers: dict[bool, ServerProcess], named: bytes, sent: bytes
) -> None:
    answer, seconds = first_answer(servers[False].ports["gym-socket"], sent or client_hello())
    size = int.from_bytes(answer[:4], "little")
    assert 0 < size == len(answer) - 4  # one handshake refusal, then the close
    assert named in answer
    assert seconds < PROMPT


@pytest.mark.parametrize(("scheme", "port_of"), [("gym-socket", "http"), ("grpc", "gym-socket")])
def test_vector_clients_name_the_wrong_port_too(
    servers: dict[bool, ServerProcess], scheme: str, port_of: str
) -> None:
    url = servers[False].url(scheme, "CartPole-v1", port_of)
    start = time.monotonic()
    with pytest.raises(EnvwireError) as raised:
        envwire.make_vec(url, 2, timeout=30)
    assert expected(scheme, port_of, server_tls=False) in str(raised.value)
    assert time.monotonic() - start < PROMPT


USER_SCRIPT = """
import sys, time
import envwire
start = time.monotonic()
try:
    envwire.make(sys.argv[1], timeout=30)
except envwire.EnvwireError as exc:
    print(f"{time.monotonic() - start:.2f} {type(exc).__name__}: {exc}")
"""


@pytest.mark.parametrize("scheme", ["gym-sockets", "https", "wss", "grpcs"])
def test_an_untrusted_certificate_is_one_line_naming_ca(
    servers: dict[bool, ServerProcess], scheme: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's script without ``ca=``: one line that says to give it, at once; no gRPC log
    lines on the client's stderr or the server's."""
    monkeypatch.delenv("ENVWIRE_CA", raising=False)
    monkeypatch.delenv("GRPC_VERBOSITY", raising=False)
    own = SCHEMES[scheme][0]
    url = servers[True].url(scheme, ("envs/" if own == "http" else "") + "CartPole-v1", own)
    heard = len(servers[True].output)
    command = [sys.executable, "-c", USER_SCRIPT, url]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=120)
    assert done.stderr == ""
    (line,) = done.stdout.splitlines()
    seconds, _, message = line.partition(" ")
    assert message.startswith("TransportError: ")
    assert message.endswith(
        "the server's TLS certificate is not trusted (unable to get local issuer certificate): "
        "give the CA that signed it with ca= or ENVWIRE_CA"
    )
    assert float(seconds) < PROMPT
    time.sleep(0.5)  # what the server would log of it comes at once
    assert servers[True].output[heard:] == []


@pytest.mark.parametrize("scheme", ["gym-socket", "http", "grpc"])
def test_a_plain_client_at_a_tls_port_leaves_no_server_log(
    servers: dict[bool, ServerProcess], tls: TlsFiles, scheme: str
) -> None:
    heard = len(servers[True].output)
    url = servers[True].url(scheme, ("envs/" if scheme == "http" else "") + "CartPole-v1")
    for _ in range(3):
        message, _ = attempt(url, tls.ca)
        assert f"the server speaks TLS: use {SECURE[scheme]}://" in message
    time.sleep(0.5)
    assert servers[True].output[heard:] == []
