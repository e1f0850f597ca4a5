"""gym-socket's FINAL_OBS flag: SameStep's final observations as a tensor field after the info.

A client with the flag reads the same vector infos as one without it (whose replies keep the
typed JSON form, byte for byte), over every space, by the lean read and the general one alike;
a final field that cannot be read is the same error on both paths.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from envwire import messages as m
from envwire.errors import ProtocolError
from envwire.protocols.gymsocket import ClientConnection, Flags, ServerConnection, finals
from envwire.protocols.gymsocket.finals import NO_FINALS, merge_finals, read_finals, split_finals
from envwire.protocols.gymsocket.packets import (
    EMPTY_INFO,
    Packet,
    pack_column,
    pack_field,
    pack_tensor,
)
from envwire.runtime.syncvector import _final_obs
from tests.protocols.test_gymsocket_lean import _same_step_infos
from tests.spaces_catalog import IDS, SPACES, assert_same

_VECTOR = Flags.ERRORS | Flags.MONITOR_REPLY | Flags.EXTENDED | Flags.VECTOR
_FINALS = _VECTOR | Flags.FINAL_OBS
_ACTIONS = spaces.Discrete(2)
_N = 3


def _pair(flags: Flags, space: spaces.Space[Any]) -> tuple[ClientConnection, ServerConnection]:
    client, server = ClientConnection(flags), ServerConnection()
    server.receive_data(client.send_handshake("x", {"num_envs": _N}))
    server.next_event()
    client.receive_data(server.send_handshake_reply(""))
    client.next_event()
    for end in (client, server):
        end.set_spaces(batch_space(_ACTIONS, _N), batch_space(space, _N))
    return client, server


def _replies(space: spaces.Space[Any]) -> list[m.VectorStepReply]:
    """Usual replies (the first teaches the layouts), then SameStep's replies with final
    observations, with usual ones between them."""
    batch = batch_space(space, _N)
    batch.seed(2)
    replies = []
    infos_seq: list[dict[str, Any]] = [{}, {}]
    for infos in _same_step_infos(space):
        infos_seq += [infos, {}]
    for t, infos in enumerate(infos_seq):
        ended = np.asarray(infos.get("_final_obs", np.zeros(_N, bool)))
        replies.append(
            m.VectorStepReply(
                batch.sample(),
                np.arange(_N, dtype=np.float64) * t,
                ended & (np.arange(_N) != 1),
                ended & (np.arange(_N) == 1),
                infos,
            )
        )
    return replies


def _write(server: ServerConnection, reply: m.VectorStepReply) -> bytes:
    server._pending.append(Packet.VECTOR_STEP)
    return server.send_reply(reply)


def _general(client: ClientConnection, data: bytes) -> Any:
    client.send_request(m.Step(np.zeros(_N, np.int64)))
    client.receive_data(data)
    event = client.next_event()
    if isinstance(event, m.VectorStepReply):
        return (
            event.observations,
            event.rewards,
            event.terminations,
            event.truncations,
            event.infos,
        )
    return event


def _lean(client: ClientConnection, data: bytes) -> tuple[Any, bool]:
    """What the transport reads: the lean read, else the general path; and whether lean."""
    client.send_request(m.Step(np.zeros(_N, np.int64)))
    inbox = memoryview(bytearray(data))
    got = client.lean_vector_step(inbox, len(data))
    if got is not None:
        return got, True
    client.receive_view(inbox)
    event = client.next_event()
    assert isinstance(event, m.VectorStepReply)
    fields = (event.observations, event.rewards, event.terminations, event.truncations)
    return (*fields, event.infos), False


def _split(client: ClientConnection, data: bytes) -> tuple[Any, bool]:
    """What SB3's transport reads: the split read, else the general path (as the transport
    gives it, the final observations in the info); and whether the finals were kept apart."""
    client.send_request(m.Step(np.zeros(_N, np.int64)))
    inbox = memoryview(bytearray(data))
    got = client.lean_vector_split(inbox, len(data))
    if got is None:
        client.receive_view(inbox)
        event = client.next_event()
        assert isinstance(event, m.VectorStepReply)
        fields = (event.observations, event.rewards, event.terminations, event.truncations)
        return (*fields, event.infos, None), False
    return got, got[5] is not None


def _merged(step: Any) -> Any:
    """A split read's result as Gymnasium's vector step (final observations in the info)."""
    *arrays, infos, finals = step
    if finals is None:
        return (*arrays, infos)
    assert infos == {}
    mask = np.logical_or(arrays[2], arrays[3])
    return (*arrays, merge_finals(infos, 3, mask, finals) if len(finals) else infos)


@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_the_split_read_is_the_merged_read(name: str, space: Any) -> None:
    """Every space's SameStep replies: the split read (final observations kept apart, for
    SB3) gives, once merged, what the general path reads; the usual ended steps of a tensor
    space are split, any other reply (an info, final infos of their own) is read whole."""
    general, server = _pair(_FINALS, space)
    split, _ = _pair(_FINALS, space)
    splits = ended = 0
    for t, reply in enumerate(_replies(space)):
        data = _write(server, reply)
        expected = _general(general, data)
        got, was_split = _split(split, data)
        assert_same(_merged(got), expected, f"{name} {t}")
        splits += was_split
        ended += was_split and len(got[5]) > 0
        if reply.infos and split_finals(reply.infos) != ({}, split_finals(reply.infos)[1]):
            assert not was_split, f"{name} {t}: an info of its own is read whole"
    if isinstance(batch_space(space, _N).sample(), np.ndarray) and space.shape:
        assert ended >= 1 and splits >= ended, name


def test_a_mask_that_is_not_the_ended_copies_is_read_whole() -> None:
    """A final field whose mask is not terminated | truncated: read as the general path reads
    it (the final observations in the info), not split."""
    space = spaces.Box(-1, 1, (4,), np.float32, seed=1)
    general, server = _pair(_FINALS, space)
    split, _ = _pair(_FINALS, space)
    first = _replies(space)[0]
    data = _write(server, first)
    assert_same(_merged(_split(split, data)[0]), _general(general, data))  # the layout, learned
    final = np.empty(_N, dtype=object)
    final[1] = np.arange(4, dtype=np.float32)
    mask = np.array([False, True, False])
    infos = {"final_obs": final, "_final_obs": mask, "final_info": {}, "_final_info": mask.copy()}
    for terminated, truncated in [
        (np.zeros(_N, bool), np.zeros(_N, bool)),  # nobody ended
        (np.array([True, True, False]), np.zeros(_N, bool)),  # another copy too
        (np.zeros(_N, bool), np.array([False, True, True])),
    ]:
        for reply in (
            first,
            m.VectorStepReply(first.observations, first.rewards, terminated, truncated, infos),
        ):
            data = _write(server, reply)
            expected = _general(general, data)
            got, was_split = _split(split, data)
            assert_same(_merged(got), expected)
            assert was_split == (reply is first)


@pytest.mark.parametrize(("name", "space"), SPACES, ids=IDS)
def test_final_observations_read_as_the_json_form_reads(name: str, space: Any) -> None:
    """Every space's SameStep replies: a FINAL_OBS client reads (lean or general) what a
    client without the flag reads from the JSON form, and that form is the bytes the server
    wrote before the flag existed."""
    json_reader, json_server = _pair(_VECTOR, space)
    general, server = _pair(_FINALS, space)
    lean, _ = _pair(_FINALS, space)
    binary = leans = 0
    for t, reply in enumerate(_replies(space)):
        old = _write(json_server, reply)
        json_server._pending.append(Packet.VECTOR_STEP)
        assert old == b"".join((b"\x00", *json_server._vector_step_parts(reply))), t
        json_server._pending.popleft()
        server._pending.append(Packet.VECTOR_STEP)
        written = b"".join((b"\x00", *server._vector_step_parts(reply)))
        server._pending.popleft()
        new = _write(server, reply)
        assert new == written, f"{name} {t}: the lean reply is the general path's bytes"
        expected = _general(json_reader, old)
        assert_same(_general(general, new), expected, f"{name} {t} general")
        got, was_lean = _lean(lean, new)
        assert_same(got, expected, f"{name} {t} lean")
        leans += was_lean
        if b"final_obs" in old and b"final_obs" not in new:
            binary += 1
    tensor = isinstance(batch_space(space, _N).sample(), np.ndarray)
    finals = [i for i in _same_step_infos(space) if "final_obs" in i]
    for infos in finals:  # the field is the tensor codec's bytes of the stacked observations
        field = split_finals(infos)[1]
        if field != NO_FINALS:
            mask = infos["_final_obs"]
            rows = np.stack([row for row in infos["final_obs"] if row is not None])
            reference = pack_column(mask, np.dtype(bool)) + b"\x02" + pack_field(pack_tensor(rows))
            assert field[1:] == reference, name
    if tensor and finals and split_finals(finals[0])[1] != NO_FINALS:
        assert binary == len(finals), name
        assert leans >= len(finals), name  # the ended steps too are read lean
    if not tensor:
        assert leans == 0, name


def test_cartpoles_final_infos_leave_the_json_whole() -> None:
    """The usual SameStep step where copies end (no info of their own): the info is the empty
    one, and the final field carries the observations and says the final infos were empty."""
    space = spaces.Box(-1, 1, (4,), np.float32)
    final = np.empty(_N, dtype=object)
    final[1] = np.arange(4, dtype=np.float32)
    mask = np.array([False, True, False])
    infos = {"final_obs": final, "_final_obs": mask, "final_info": {}, "_final_info": mask.copy()}
    rest, field = split_finals(infos)
    assert rest == {} and field[0] == 3
    _, server = _pair(_FINALS, space)
    obs = np.zeros((_N, 4), np.float32)
    reply = m.VectorStepReply(obs, np.zeros(_N), mask, np.zeros(_N, bool), infos)
    data = _write(server, reply)
    assert data.endswith(field) and EMPTY_INFO + field in data
    finals = read_finals(field, 0, len(field), _N)
    assert finals is not None and finals[3] == len(field)
    assert_same(finals[1], mask)
    assert_same(finals[2], final[1][None])


def test_a_final_info_of_its_own_stays_in_the_json() -> None:
    final = np.array([None, np.ones(2, np.float32)], dtype=object)
    mask = np.array([False, True])
    infos = {
        "final_obs": final,
        "_final_obs": mask,
        "final_info": {"x": np.array([0, 5])},
        "_final_info": mask,
    }
    rest, field = split_finals(infos)
    assert field[0] == 1 and list(rest) == ["final_info", "_final_info"]
    for odd in (
        {"final_obs": np.array([None, [1.0]], dtype=object), "_final_obs": mask},  # a list
        {"final_obs": final, "_final_obs": np.array([True, True])},  # None under the mask
        {"final_obs": final, "_final_obs": np.array([False, False])},  # an array without it
        {"final_obs": final, "_final_obs": [False, True]},
        {"final_obs": np.array([None, np.ones(2, ">f4")], dtype=object), "_final_obs": mask},
        {
            "final_obs": np.array([np.ones(2), np.ones(3)], dtype=object),
            "_final_obs": np.array([True, True]),
        },
    ):
        assert split_finals(odd) == (odd, NO_FINALS)


def _mask(code: int, data: bytes) -> bytes:
    return pack_field(bytes([code]) + b"\x01\x00\x00\x00" + bytes([len(data), 0, 0, 0]) + data)


#: One final observation of 4 float32s: the batch's type byte and field.
_ROW = b"\x02" + pack_field(b"\x0a\x02\x00\x00\x00\x01\x00\x00\x00\x04\x00\x00\x00" + bytes(16))
_BROKEN = [
    b"\x04",  # an unknown kind
    b"\x01" + _mask(0, b"\x00\x00\x00") + _ROW,  # a final observation for no ended copy
    b"\x03" + _mask(1, b"\x00\x01\x00") + _ROW,  # a mask of int8
    b"\x01" + _mask(0, b"\x00\x01") + _ROW,  # a mask of 2 for 3 copies
    b"\x01" + _mask(0, b"\x00\x01\x00") + b"\x01" + _ROW[1:],  # a byte list, not a tensor
    b"\x01" + _mask(0, b"\x00\x01\x00") + _ROW[:1] + pack_field(_ROW[5:] + b"\x00"),
]


@pytest.mark.parametrize("field", _BROKEN)
def test_a_final_field_the_lean_read_cannot_read_is_the_general_paths_error(field: bytes) -> None:
    space = spaces.Box(-1, 1, (4,), np.float32, seed=1)
    general, server = _pair(_FINALS, space)
    lean, _ = _pair(_FINALS, space)
    usual = _write(server, _replies(space)[0])
    odd = usual[: -len(EMPTY_INFO + NO_FINALS)] + EMPTY_INFO + field
    split, _ = _pair(_FINALS, space)
    outcomes = []
    for client, read in ((general, _general), (lean, _lean), (split, _split)):
        assert _lean(client, usual)[0] is not None  # teaches the lean client the layout
        with pytest.raises(ProtocolError) as raised:
            read(client, odd)
        outcomes.append(str(raised.value))
    assert outcomes[0] == outcomes[1] == outcomes[2]


def test_without_vector_the_flag_changes_nothing() -> None:
    """FINAL_OBS is a vector session's: a one-env connection with it writes the same bytes."""
    space = spaces.Box(-1, 1, (4,), np.float32)
    ends = []
    for flags in (Flags.ERRORS | Flags.EXTENDED, Flags.ERRORS | Flags.EXTENDED | Flags.FINAL_OBS):
        client, server = ClientConnection(flags), ServerConnection()
        server.receive_data(client.send_handshake("x"))
        assert server.next_event() is not None and server.unknown_flags() == 0
        for end in (client, server):
            end.set_spaces(_ACTIONS, space)
        server.receive_data(client.send_request(m.Step(1)))
        server.next_event()
        ends.append(server.send_reply(m.StepReply(np.zeros(4, np.float32), 1.0, False, False, {})))
    assert ends[0] == ends[1]


def _usual(rows: dict[int, Any], **changes: Any) -> dict[str, Any]:
    final = np.empty(_N + 1, dtype=object)
    mask = np.zeros(_N + 1, bool)
    for i, row in rows.items():
        final[i], mask[i] = row, True
    infos = {"final_obs": final, "_final_obs": mask, "final_info": {}, "_final_info": mask.copy()}
    return infos | changes


_ROW32 = np.arange(4, dtype=np.float32)
_USUAL_INFOS = [
    _usual({1: _ROW32}),
    _usual({0: _ROW32, 2: _ROW32 + 1, 3: _ROW32 + 2}),
    _usual({1: np.zeros((2, 3), np.uint8), 2: np.ones((2, 3), np.uint8)}),
    _usual({1: _ROW32}, _final_info=np.array([[False, True], [False, False]])),  # same bytes
    _usual({1: _ROW32}, _final_info=np.array([True, True, False, False])),
    _usual({1: _ROW32}, final_info={"x": np.array([0, 5, 0, 0])}),
    _usual({1: _ROW32, 2: _ROW32.astype(np.float64)}),
    _usual({1: _ROW32, 2: np.zeros(3, np.float32)}),
    _usual({1: [0.0, 1.0]}),
    _usual({1: _ROW32.astype(">f4")}),
    _usual({1: _ROW32}, _final_obs=np.array([0, 1, 0, 0], np.int8)),
    _usual({1: _ROW32}, final_obs=np.array([None, _ROW32, _ROW32, None], dtype=object)),
    _usual({}),
]


@pytest.mark.parametrize("infos", _USUAL_INFOS)
def test_the_usual_infos_split_as_the_general_split_does(
    infos: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The usual SameStep info (its four keys alone) is split by a shorter path: the same
    info and field as the general split's, for it and for anything near it."""
    got = split_finals(infos)
    monkeypatch.setattr(finals, "_usual_field", lambda *_: None)
    expected = split_finals(infos)
    assert_same(got[0], expected[0])
    assert got[1] == expected[1]


def _finals_info(rows: dict[int, Any]) -> m.FinalsInfo:
    """The FinalsInfo a SameStep vector env makes of ``rows`` (ended copy -> final obs)."""
    return _final_obs(_N + 1, list(rows.items()))


_ROW_SETS = [
    {1: _ROW32},
    {0: _ROW32, 2: _ROW32 + 1, 3: _ROW32 + 2},
    {1: np.zeros((2, 3), np.uint8), 2: np.ones((2, 3), np.uint8)},
    {1: _ROW32, 2: _ROW32.astype(np.float64)},  # two dtypes: in the info JSON
    {1: _ROW32, 2: np.zeros(3, np.float32)},  # two shapes
    {1: [0.0, 1.0]},  # not an array
    {1: _ROW32.astype(">f4")},  # not native
    {1: np.array("x")},  # no tensor dtype
]


@pytest.mark.parametrize("rows", _ROW_SETS)
def test_a_finals_info_splits_as_the_same_plain_info(rows: dict[int, Any]) -> None:
    """A SameStep vector env's info that keeps its final observations as a list gives the
    field from that list: the same info and field as the plain dict of the same keys, and
    the same reply's bytes."""
    infos = _finals_info(rows)
    assert type(infos) is m.FinalsInfo and infos.kept() is not None
    got, expected = split_finals(infos), split_finals(dict(infos))
    assert_same(dict(got[0]), expected[0])
    assert got[1] == expected[1]
    space = spaces.Box(-1, 1, (4,), np.float32)
    obs = np.zeros((_N + 1, 4), np.float32)
    columns = (np.zeros(_N + 1), infos["_final_obs"], np.zeros(_N + 1, bool))
    written = []
    for each in (infos, dict(infos)):
        server = ServerConnection()
        server.receive_data(ClientConnection(_FINALS).send_handshake("x", {"num_envs": _N + 1}))
        server.next_event()
        server.send_handshake_reply("")
        server.set_spaces(batch_space(_ACTIONS, _N + 1), batch_space(space, _N + 1))
        replies = [m.VectorStepReply(obs, *columns, {}), m.VectorStepReply(obs, *columns, each)]
        written.append([_write(server, reply) for reply in replies])  # (the first: a layout)
    assert written[0] == written[1]


def test_a_finals_info_changed_after_it_was_made_is_read_in_full() -> None:
    """Whoever replaces one of a FinalsInfo's values, puts an item in its final_info or adds a
    key makes it an info like any other: split as its dict is, not from the list it was made
    with."""
    replaced = _finals_info({1: _ROW32})
    replaced["final_obs"] = np.array([None, _ROW32 + 9, None, None], dtype=object)
    added = _finals_info({1: _ROW32})
    added["score"] = np.array([1, 2, 3, 4])
    masked = _finals_info({1: _ROW32})
    masked["_final_obs"] = np.array([False, True, False, False])
    told = _finals_info({1: _ROW32})
    told["final_info"]["x"] = np.array([0, 5, 0, 0])
    other = _finals_info({1: _ROW32})
    other["_final_info"] = np.array([False, True, False, False])
    for infos in (replaced, added, masked, told, other):
        assert infos.kept() is None
        got, expected = split_finals(infos), split_finals(dict(infos))
        assert_same(dict(got[0]), expected[0])
        assert got[1] == expected[1]
    field = split_finals(replaced)[1]
    read = read_finals(field, 0, len(field), _N + 1)
    assert read is not None
    assert_same(read[2], (_ROW32 + 9)[None])
