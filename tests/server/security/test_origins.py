"""Host and Origin allow-lists (DNS rebinding, cross-site requests)."""

from __future__ import annotations

import pytest

from envwire.server.security.origins import HostPolicy, is_loopback, split_authority


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("example.org", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("localhost:8000", ("localhost", 8000)),
        ("LocalHost", ("localhost", None)),
        ("[::1]:80", ("::1", 80)),
        ("[::1]", ("::1", None)),
        ("a:b:c", ("", None)),
        ("host:port", ("", None)),
        ("[::1", ("", None)),
    ],
)
def test_split_authority(value: str, parsed: tuple[str, int | None]) -> None:
    assert split_authority(value) == parsed


def test_hosts_allowed_by_default() -> None:
    policy = HostPolicy("127.0.0.1")
    for host in ("127.0.0.1:8000", "localhost:8000", "LOCALHOST", "[::1]:8000", "10.0.0.7"):
        assert policy.host_allowed(host), host
    # DNS rebinding: a name the attacker points at 127.0.0.1
    for host in ("evil.example:8000", "evil.example", "", "localhost.evil.example"):
        assert not policy.host_allowed(host), host


def test_configured_and_bound_names() -> None:
    policy = HostPolicy("node17.cluster", ["envs.example.org"])
    assert policy.host_allowed("node17.cluster:5000")
    assert policy.host_allowed("envs.example.org")
    assert not policy.host_allowed("other.example.org")
    assert HostPolicy("0.0.0.0", ["*"]).host_allowed("anything.example")


def test_origins() -> None:
    policy = HostPolicy("127.0.0.1", origins=["https://app.example"])
    host = "127.0.0.1:8000"
    assert policy.origin_allowed(None, host)  # non-browser clients send none
    assert policy.origin_allowed("http://127.0.0.1:8000", host)  # the server's own pages
    assert policy.origin_allowed("https://app.example/", host)
    assert not policy.origin_allowed("http://evil.example", host)
    assert not policy.origin_allowed("http://127.0.0.1:3000", host)  # another local site
    assert not policy.origin_allowed("http://localhost:8000", host)  # not the same origin
    assert not policy.origin_allowed("null", host)
    assert not policy.origin_allowed("http://127.0.0.1:99999", host)
    assert not policy.origin_allowed("ftp://127.0.0.1:8000", host)
    # same origin, but the Host itself is a rebound name
    assert not policy.origin_allowed("http://evil.example:8000", "evil.example:8000")
    tls = HostPolicy("127.0.0.1", scheme="https")
    assert tls.origin_allowed("https://127.0.0.1", "127.0.0.1")
    assert HostPolicy("127.0.0.1", origins=["*"]).origin_allowed("null", host)
