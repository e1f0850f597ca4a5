"""The gym-socket client codec: a malformed reply of any kind raises ProtocolError, nothing else.

Random bytes seldom get past a reply's framing, so the fuzz tests also build replies whose
framing is right and whose contents (JSON, byte lists, tensors, space descriptions) are not.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from envwire import messages as m
from envwire.errors import EnvwireError, ProtocolError, TooLargeError
from envwire.protocols.gymsocket import NEED_DATA, ClientConnection, Flags, HandshakeReply, Upload
from tests.budget import examples

ALL = Flags.ERRORS | Flags.MONITOR_REPLY | Flags.EXTENDED
CARTPOLE_OBS = spaces.Box(-np.inf, np.inf, (4,), np.float32)


def s(data: bytes) -> bytes:
    return struct.pack("<I", len(data)) + data


def client(flags: Flags, request: m.Request, vector: bool = False) -> ClientConnection:
    conn = ClientConnection(flags | (Flags.VECTOR if vector else Flags(0)))
    conn.send_handshake("CartPole-v1", {"num_envs": 2} if vector else None)
    conn.receive_data(s(b""))
    assert conn.next_event() == HandshakeReply("")
    conn.set_spaces(spaces.Discrete(2), CARTPOLE_OBS)
    conn.send_request(request)
    return conn


def outcome(conn: ClientConnection, data: bytes) -> tuple[Any, Exception | None]:
    conn.receive_data(data)
    try:
        return conn.next_event(), None
    except Exception as exc:
        return None, exc


def assert_protocol_error(conn: ClientConnection, data: bytes, match: str = "") -> None:
    event, error = outcome(conn, data)
    assert type(error) is ProtocolError, f"got {event!r} / {type(error).__name__}: {error}"
    assert match in str(error)


# -- the replies the issue names, one by one ----------------------------------------------------


@pytest.mark.parametrize(
    ("which", "payload", "match"),
    [
        (m.GetSpace(m.SpaceKind.ACTION), s(b"not json"), "JSONDecodeError"),
        (m.GetSpace(m.SpaceKind.ACTION), s(b"[1, 2]"), "must be a JSON object"),
        (m.GetSpace(m.SpaceKind.ACTION), s(b'{"type": "Discrete"}'), ""),
        (m.GetSpace(m.SpaceKind.ACTION), s(b'{"type": "Box", "shape": "x"}'), ""),
        (m.SampleAction(), b"\x00" + s(b"{"), "JSONDecodeError"),
        (m.SampleAction(), b"\x00" + s(b"[[1]]"), "malformed sample action reply"),
        (m.SampleAction(), b"\x07" + s(b"1"), "sampled action of unknown type 7"),
        (m.Reset(), b"\x00" + s(b"nope"), "JSONDecodeError"),
        (m.Reset(), b"\x00" + s(b'{"a": 1}'), "malformed reset reply"),
        (m.Reset(), b"\x01" + s(b"\x02\x00"), "has no whole header"),
        (m.Reset(), b"\x01" + s(struct.pack("<3I", 2, 3, 4) + b"\x00" * 5), "has 5 bytes"),
        (m.Reset(), b"\x01" + s(struct.pack("<I", 2**31)), "has no whole header"),
        (m.Reset(), b"\x09" + s(b""), "unknown observation type 9"),
    ],
)
def test_malformed_replies_raise_protocol_error(
    which: m.Request, payload: bytes, match: str
) -> None:
    for flags in (Flags(0), Flags.ERRORS):
        prefix = b"\x00" if flags & Flags.ERRORS else b""
        assert_protocol_error(client(flags, which), prefix + payload, match)


def test_the_cause_is_kept() -> None:
    conn = client(Flags(0), m.GetSpace(m.SpaceKind.ACTION))
    _, error = outcome(conn, s(b"{oops"))
    assert isinstance(error, ProtocolError)
    assert isinstance(error.__cause__, json.JSONDecodeError)


def test_a_good_byte_list_still_reads() -> None:
    conn = client(Flags(0), m.Reset())
    frame = np.arange(6, dtype=np.uint8).reshape(2, 3)
    event, error = outcome(conn, b"\x01" + s(struct.pack("<3I", 2, 2, 3) + frame.tobytes()))
    assert error is None
    np.testing.assert_array_equal(event.observation, frame)


# -- fuzz: every reply kind, every flag set -----------------------------------------------------

REQUESTS: list[tuple[m.Request | Upload, bool]] = [
    (m.Reset(), False),
    (m.Reset(seed=1), False),
    (m.Step(np.int64(1)), False),
    (m.GetSpace(m.SpaceKind.ACTION), False),
    (m.GetSpace(m.SpaceKind.OBSERVATION), False),
    (m.SampleAction(), False),
    (m.Monitor("d"), False),
    (m.Render(), False),
    (Upload("d", "k", "a"), False),
    (m.Reset(seed=0), True),
    (m.Step(np.zeros(2, np.int64)), True),
]
FLAG_SETS = [Flags(0), Flags.ERRORS, Flags.ERRORS | Flags.EXTENDED, ALL]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=12,
)
space_like = st.fixed_dictionaries(
    {"type": st.sampled_from(["Box", "Discrete", "Tuple", "Dict", "MultiDiscrete", "Text", "?"])},
    optional={
        "n": json_values,
        "shape": json_values,
        "low": json_values,
        "high": json_values,
        "subspaces": json_values,
        "spaces": json_values,
        "dtype": json_values,
    },
)
contents = (
    st.binary(max_size=40)
    | json_values.map(lambda v: json.dumps(v).encode())
    | space_like.map(lambda v: json.dumps(v).encode())
    | st.builds(
        lambda dims, tail: struct.pack(f"<I{len(dims)}I", len(dims), *dims) + tail,
        st.lists(st.integers(0, 2**32 - 1), max_size=4),
        st.binary(max_size=24),
    )
)
# A status byte, a type byte, a well-framed field of bad contents, more fields, then anything.
framed = st.builds(
    lambda status, kind, body, more, tail: status + kind + s(body) + b"".join(more) + tail,
    st.sampled_from([b"", b"\x00", b"\x01"]),
    st.sampled_from([b"", b"\x00", b"\x01", b"\x02", b"\x05"]),
    contents,
    st.lists(contents.map(s), max_size=3),
    st.binary(max_size=16),
)


@settings(max_examples=examples(200), deadline=None)
@given(
    request=st.sampled_from(REQUESTS),
    flags=st.sampled_from(FLAG_SETS),
    reply=framed | st.binary(max_size=120),
)
def test_garbage_replies_raise_only_protocol_error(
    request: tuple[m.Request, bool], flags: Flags, reply: bytes
) -> None:
    which, vector = request
    if vector:
        flags |= Flags.EXTENDED
    if isinstance(which, m.Reset) and which.seed is not None and not flags & Flags.EXTENDED:
        which = m.Reset()
    conn = client(flags, which, vector)
    conn.receive_data(reply)
    # Then EOF: a reply cut short is an error too, never a wait for bytes that cannot come.
    event, error = outcome(conn, b"")
    while error is None and event is not NEED_DATA:  # a reply: what follows it is read too
        assert isinstance(event, m.Reply | EnvwireError)
        event, error = outcome(conn, b"")
    if error is not None:  # the protocol's own errors (a field over 256 MiB: TooLargeError)
        assert type(error) in (ProtocolError, TooLargeError), f"{type(error).__name__}: {error}"
    else:
        assert conn.closed
