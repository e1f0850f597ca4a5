"""The gym-socket Go client's bytes, and the two Monitor layouts, byte for byte.

The packets below are what the original gym-socket Go client (binding-go, its latest
revision) sent to ``envwire serve`` on loopback, captured by a logging TCP proxy: it sends
flags 0, and Monitor in the later layout (``resume, force, video, dir``, answered with an
error string), with the absolute path of its working directory as ``dir`` (the path here
stands in for the one captured). docs/protocols/gym-socket.md describes the run.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st

from envwire import messages as m
from envwire.errors import EnvError, InvalidArgumentError, UsageError
from envwire.protocols.gymsocket import (
    MAX_MONITOR_DIR,
    NEED_DATA,
    Flags,
    Handshake,
    ServerConnection,
    monitor_has_video,
)
from tests.budget import examples


def s(data: bytes) -> bytes:
    return struct.pack("<I", len(data)) + data


GO_DIR = b"/home/agent/go-monitor"
GO_HANDSHAKE = bytes.fromhex("000b000000") + b"CartPole-v1"
GO_ACTION_SPACE = bytes.fromhex("0200")
GO_OBSERVATION_SPACE = bytes.fromhex("0201")
# env.Monitor(dir, force=true, resume=false, video=true): resume 0, force 1, video 1, dir.
GO_MONITOR = bytes.fromhex("04000101") + s(GO_DIR)
GO_RESET = bytes.fromhex("00")
GO_RENDER_THEN_SAMPLE = bytes.fromhex("0503")  # Render has no reply: both arrive together
GO_STEP_1 = bytes.fromhex("01000100000031")  # action type 0 (JSON), "1"

GO_SESSION = (
    GO_ACTION_SPACE + GO_OBSERVATION_SPACE + GO_MONITOR + GO_RESET + GO_RENDER_THEN_SAMPLE
) + GO_STEP_1
GO_EVENTS: list[Any] = [
    m.GetSpace(m.SpaceKind.ACTION),
    m.GetSpace(m.SpaceKind.OBSERVATION),
    m.Monitor(GO_DIR.decode(), resume=False, force=True, video=True),
    m.Reset(),
    m.Render(),
    m.SampleAction(),
]

CARTPOLE_OBS = spaces.Box(-np.inf, np.inf, (4,), np.float32)


def opened(flags: int = 0, **kwargs: Any) -> ServerConnection:
    server = ServerConnection(**kwargs)
    server.receive_data(bytes([flags]) + s(b"CartPole-v1"))
    assert isinstance(server.next_event(), Handshake)
    server.set_spaces(spaces.Discrete(2), CARTPOLE_OBS)
    return server


def read_all(server: ServerConnection, data: bytes, *, one_byte_at_a_time: bool) -> list[Any]:
    """Events from ``data``; byte by byte, each event must be complete at its last byte."""
    chunks = [data[i : i + 1] for i in range(len(data))] if one_byte_at_a_time else [data]
    found = []
    for chunk in chunks:
        server.receive_data(chunk)
        while (event := server.next_event()) is not NEED_DATA:
            found.append(event)
    return found


@pytest.mark.parametrize("one_byte_at_a_time", [False, True])
def test_the_go_client_session_with_default_settings(one_byte_at_a_time: bool) -> None:
    server = ServerConnection()
    server.receive_data(GO_HANDSHAKE)
    assert server.next_event() == Handshake(Flags(0), "CartPole-v1")
    assert server.send_handshake_reply("") == bytes.fromhex("00000000")
    server.set_spaces(spaces.Discrete(2), CARTPOLE_OBS)
    events = read_all(server, GO_SESSION, one_byte_at_a_time=one_byte_at_a_time)
    assert events[:-1] == GO_EVENTS
    assert isinstance(events[-1], m.Step) and events[-1].action == 1
    assert server.buffered == 0
    # The replies the Go client reads, in order (Render: none).
    assert server.send_reply(m.SpaceReply(spaces.Discrete(2))) == s(b'{"type":"Discrete","n":2}')
    server.send_reply(m.SpaceReply(CARTPOLE_OBS))
    assert server.send_reply(m.MonitorReply("")) == bytes.fromhex("00000000")
    obs = np.zeros(4, np.float32)
    assert server.send_reply(m.ResetReply(obs)) == b"\x00" + s(b"[0.0,0.0,0.0,0.0]")
    assert server.send_reply(m.RenderReply(None)) == b""
    assert server.send_reply(m.SampleReply(np.int64(1))) == b"\x00" + s(b"1")


def test_a_monitor_error_reaches_the_go_client_and_the_session_goes_on() -> None:
    server = opened()
    server.receive_data(GO_MONITOR + GO_RESET)
    assert isinstance(server.next_event(), m.Monitor)
    error = InvalidArgumentError("monitor directory x already holds 2 monitor files")
    assert server.send_error(error) == s(str(error).encode())
    assert server.next_event() == m.Reset()


def test_a_failed_render_costs_a_flags_zero_client_nothing() -> None:
    server = opened()
    server.receive_data(GO_RENDER_THEN_SAMPLE)
    assert server.next_event() == m.Render()
    # No reply exists for Render in this protocol: nothing is sent and nothing is closed.
    assert server.send_error(EnvError("CartPole-v1: render raised DependencyNotInstalled")) == b""
    assert server.next_event() == m.SampleAction()
    assert server.send_reply(m.SampleReply(np.int64(0))) == b"\x00" + s(b"0")


def test_other_flags_zero_errors_still_close() -> None:
    server = opened()
    server.receive_data(bytes.fromhex("040100") + s(b"runs"))
    assert isinstance(server.next_event(), m.Monitor)
    assert server.send_error(InvalidArgumentError("already holds")) is None


# -- the seed's layout, read by the same default server -------------------------------------


def seed_monitor(resume: int, force: int, directory: bytes) -> bytes:
    return bytes([4, resume, force]) + s(directory)


def video_monitor(resume: int, force: int, video: int, directory: bytes) -> bytes:
    return bytes([4, resume, force, video]) + s(directory)


@pytest.mark.parametrize("one_byte_at_a_time", [False, True])
@pytest.mark.parametrize(
    "directory",
    [b"", b"a", b"runs/cartpole", b"d" * 255, b"d" * 256, b"e" * 257, b"f" * 513],
    ids=lambda d: f"{len(d)}-bytes",
)
def test_seed_layout_has_no_video_byte_and_no_reply(
    directory: bytes, one_byte_at_a_time: bool
) -> None:
    # Lengths 0, 1, 256, 257 and 513 put a 0 or 1 where the video byte would be.
    server = opened()
    wire = seed_monitor(1, 0, directory) + GO_RESET
    events = read_all(server, wire, one_byte_at_a_time=one_byte_at_a_time)
    assert events == [
        m.Monitor(directory.decode(), resume=True, force=False, video=True),
        m.Reset(),
    ]
    assert server.send_reply(m.MonitorReply("")) == b""


@pytest.mark.parametrize("one_byte_at_a_time", [False, True])
@pytest.mark.parametrize("video", [0, 1])
@pytest.mark.parametrize("size", [1, 2, 255, 256, 257, MAX_MONITOR_DIR])
def test_video_layout_is_recognised(size: int, video: int, one_byte_at_a_time: bool) -> None:
    server = opened()
    directory = b"/" + b"m" * (size - 1)
    wire = video_monitor(0, 1, video, directory) + GO_RESET
    events = read_all(server, wire, one_byte_at_a_time=one_byte_at_a_time and size < 1000)
    assert events == [
        m.Monitor(directory.decode(), resume=False, force=True, video=bool(video)),
        m.Reset(),
    ]
    assert server.send_reply(m.MonitorReply("")) == bytes.fromhex("00000000")


def test_each_packet_is_decided_at_its_last_byte_never_later() -> None:
    for wire in (video_monitor(0, 1, 1, GO_DIR), seed_monitor(0, 1, b"x" * 256)):
        server = opened()
        for i, byte in enumerate(wire):
            server.receive_data(bytes([byte]))
            event = server.next_event()
            assert (event is NEED_DATA) == (i < len(wire) - 1)
        assert server.buffered == 0


@pytest.mark.parametrize(
    ("body", "decision"),
    [
        (b"", None),
        (b"\x00\x01", None),
        (b"\x00\x01\x02", False),  # third byte above 1: no video byte
        (b"\x00\x01\x01\x16\x00", None),
        (b"\x00\x01\x00\x00\x00\x00", False),  # length 0 or >= 2**24 whatever comes next
        (b"\x00\x01\x01\x00\x00\x00", False),
        (b"\x00\x01\x01\x16\x00\x00", None),
        (b"\x00\x01\x01\x16\x00\x00\x00", True),  # 22 bytes: the Go client's
        (b"\x00\x01\x01\x00\x01\x00\x00", True),  # 256 bytes
        (b"\x00\x01\x01\x01\x00\x01\x00", False),  # 65,537 bytes: longer than any path
        (b"\x00\x01\x01\x01\x00\x00\x2f", False),  # seed: a 1+256-byte dir starting with '/'
    ],
)
def test_the_decision_byte_by_byte(body: bytes, decision: bool | None) -> None:
    assert monitor_has_video(b"\x04" + body, 1) is decision


@settings(max_examples=examples(200), deadline=None)
@given(
    layout=st.sampled_from(["seed", "video"]),
    flags=st.tuples(st.integers(0, 1), st.integers(0, 1), st.integers(0, 1)),
    directory=st.text(min_size=1, max_size=600).filter(lambda t: not t.startswith("\x00")),
    following=st.sampled_from([GO_RESET, GO_STEP_1, GO_RENDER_THEN_SAMPLE, GO_MONITOR]),
)
def test_both_layouts_are_read_whole_and_in_pieces(
    layout: str, flags: tuple[int, int, int], directory: str, following: bytes
) -> None:
    resume, force, video = flags
    raw = directory.encode()
    if layout == "seed":
        wire, expected = (
            seed_monitor(resume, force, raw),
            m.Monitor(directory, bool(resume), bool(force)),
        )
    else:
        wire = video_monitor(resume, force, video, raw)
        expected = m.Monitor(directory, bool(resume), bool(force), bool(video))
    for pieces in (False, True):
        server = opened()
        events = read_all(server, wire + following, one_byte_at_a_time=pieces)
        assert events[0] == expected
        assert len(events) == (2 if following != GO_RENDER_THEN_SAMPLE else 3)


# -- forcing a layout ------------------------------------------------------------------------


def test_forcing_the_seed_layout_misreads_the_go_client() -> None:
    # What a server that follows the seed for flags-0 clients does: it takes "video, length"
    # for a length of 0x1601 bytes and waits for them; the Go client waits for its reply.
    server = opened(monitor_layout="seed")
    server.receive_data(GO_MONITOR)
    assert server.next_event() is NEED_DATA


def test_forcing_the_video_layout() -> None:
    server = opened(monitor_layout="video")
    server.receive_data(video_monitor(0, 0, 1, b""))  # an empty dir: auto would read the seed
    assert server.next_event() == m.Monitor("", resume=False, force=False, video=True)
    assert server.send_reply(m.MonitorReply("")) == bytes.fromhex("00000000")


def test_the_flag_means_the_video_layout_whatever_the_option() -> None:
    server = opened(int(Flags.MONITOR_REPLY), monitor_layout="seed")
    server.receive_data(video_monitor(1, 0, 0, b"d"))
    assert server.next_event() == m.Monitor("d", resume=True, force=False, video=False)
    assert server.send_reply(m.MonitorReply("")) == bytes.fromhex("00000000")


def test_an_unknown_layout_is_refused() -> None:
    with pytest.raises(UsageError, match="monitor_layout must be one of"):
        ServerConnection(monitor_layout="legacy")


def test_pipelined_monitors_of_both_layouts_get_their_own_replies() -> None:
    server = opened()
    wire = seed_monitor(0, 1, b"a") + video_monitor(0, 1, 1, GO_DIR) + seed_monitor(1, 0, b"b")
    assert [type(e) for e in read_all(server, wire, one_byte_at_a_time=False)] == [m.Monitor] * 3
    assert server.send_reply(m.MonitorReply("")) == b""
    assert server.send_error(InvalidArgumentError("no")) == s(b"no")
    assert server.send_reply(m.MonitorReply("")) == b""
