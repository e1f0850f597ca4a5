"""The act protocol's sans-IO codec: parsing v0 and v1, every field error, reply encoding."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envwire.arena.errors import (
    ARENA_STATUS,
    BodyTooLargeError,
    MalformedRequestError,
    NotJSONError,
    UnsupportedVersionError,
)
from envwire.errors import error_class_for_code
from envwire.protocols.arena import (
    ACT_STATUS,
    ActionIn,
    ActionRequest,
    ActReply,
    Message,
    RawJSON,
    decode_body,
    encode_reply,
    error_body,
    error_reply,
    parse_act_request,
)
from envwire.protocols.http.status import status_of
from tests.budget import examples

BASE = {"agent": "a", "pwd": "p"}


def test_v0_request() -> None:
    request = parse_act_request(
        {**BASE, "actions": [{"run": "40#1", "action": 2}, {"run": "7#3", "action": [1]}]}
    )
    assert request.version == 0
    assert request.actions == (ActionIn("40", 1, 2), ActionIn("7", 3, [1]))
    assert request.parallel_runs
    assert not parse_act_request({**BASE, "single_request": True}).parallel_runs


def test_v1_request_with_every_field() -> None:
    request = parse_act_request(
        {
            **BASE,
            "protocol_version": 1,
            "actions": [{"run": "7", "act_no": 3, "action": {"x": 1}}],
            "parallel_runs": False,
            "to_abandon": ["1", "2"],
            "client": "mine",
            "unknown_fields": "are ignored",
        }
    )
    assert request.version == 1
    assert request.actions == (ActionIn("7", 3, {"x": 1}),)
    assert not request.parallel_runs
    assert request.to_abandon == ("1", "2")
    assert request.client == "mine"


def test_first_request_needs_no_actions() -> None:
    assert parse_act_request({**BASE, "protocol_version": 1}).actions == ()
    assert parse_act_request({**BASE, "actions": []}).actions == ()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"pwd": "p"}, "agent"),
        ({"agent": "a"}, "pwd"),
        ({"agent": 1, "pwd": "p"}, "agent"),
        ({"agent": "a", "pwd": None}, "pwd"),
        ({**BASE, "actions": {}}, "actions"),
        ({**BASE, "actions": [1]}, "actions[0]"),
        ({**BASE, "actions": [{"action": 1}]}, "actions[0].run"),
        ({**BASE, "actions": [{"run": "1#0"}]}, "actions[0].action"),
        ({**BASE, "actions": [{"run": 5, "action": 1}]}, "actions[0].run"),
        ({**BASE, "actions": [{"run": "5", "action": 1}]}, "actions[0].run"),
        ({**BASE, "actions": [{"run": "a#1", "action": 1}]}, "actions[0].run"),
        ({**BASE, "single_request": "maybe"}, "single_request"),
        ({**BASE, "single_request": None}, "single_request"),
    ],
)
def test_v0_malformed_fields_are_named(body: dict[str, Any], field: str) -> None:
    with pytest.raises(MalformedRequestError) as info:
        parse_act_request(body)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")
    assert status_of(info.value, ACT_STATUS) == 400


V1 = {**BASE, "protocol_version": 1}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({**V1, "actions": [{"run": "1", "action": 1}]}, "actions[0].act_no"),
        ({**V1, "actions": [{"run": "1", "act_no": "1e3", "action": 1}]}, "actions[0].act_no"),
        ({**V1, "actions": [{"run": "1", "act_no": None, "action": 1}]}, "actions[0].act_no"),
        ({**V1, "actions": [{"run": "1", "act_no": [0], "action": 1}]}, "actions[0].act_no"),
        ({**V1, "actions": [{"run": "1", "act_no": 1.5, "action": 1}]}, "actions[0].act_no"),
        ({**V1, "actions": [{"run": 1, "act_no": 0, "action": 1}]}, "actions[0].run"),
        ({**V1, "parallel_runs": 2}, "parallel_runs"),
        ({**V1, "client": None}, "client"),
        ({**V1, "to_abandon": "1"}, "to_abandon"),
        ({**V1, "to_abandon": ["1", 2]}, "to_abandon[1]"),
        ({**V1, "client": 3}, "client"),
    ],
)
def test_v1_malformed_fields_are_named(body: dict[str, Any], field: str) -> None:
    with pytest.raises(MalformedRequestError) as info:
        parse_act_request(body)
    assert info.value.field == field


@pytest.mark.parametrize("version", [2, -1, 100, "1", "0", None, 1.5, [1], {}])
def test_unknown_version_is_400(version: Any) -> None:
    with pytest.raises(UnsupportedVersionError, match="protocol_version") as info:
        parse_act_request({**BASE, "protocol_version": version})
    assert status_of(info.value, ACT_STATUS) == 400


# What the original server (pydantic's lax mode) accepted, observed against it, side by side.
LAX_INTS = [
    ("3", 3), (" 3 ", 3), ("\t3\n", 3), ("+3", 3), ("-3", -3), ("03", 3), ("3.0", 3),
    ("3.00", 3), ("1_000", 1000), ("1_000.000", 1000), (3.0, 3), (-0.0, 0), (True, 1),
    (False, 0), (1e18, 10**18), ("99999999999999999999", 10**20 - 1), (-1, -1),
]  # fmt: skip
NOT_INTS = ["3.5", "1e3", "0x10", "", "  ", "1.", ".0", "1__0", "_1", "1_", "3.0_0", "\u0663",
            "  -  3", 1.5, 0.5, 1e19, float("inf"), float("nan"), None, [0], {}]  # fmt: skip
LAX_BOOLS = [
    ("true", True), ("True", True), ("TRUE", True), ("yes", True), ("on", True), ("1", True),
    ("t", True), ("y", True), ("tRuE", True), ("false", False), ("no", False), ("off", False),
    ("0", False), ("f", False), ("n", False), ("FALSE", False), (1, True), (0, False),
    (1.0, True), (0.0, False), (True, True), (False, False),
]  # fmt: skip
NOT_BOOLS = [" true", "", "abc", "1.0", "01", 2, -1, 0.5, None, [True]]


@pytest.mark.parametrize(("value", "expected"), LAX_INTS)
def test_act_no_is_read_as_the_original_reads_it(value: Any, expected: int) -> None:
    body = {**V1, "actions": [{"run": "1", "act_no": value, "action": 1}]}
    assert parse_act_request(body).actions[0].act_no == expected


@pytest.mark.parametrize("value", NOT_INTS)
def test_act_no_still_rejects_what_the_original_rejects(value: Any) -> None:
    body = {**V1, "actions": [{"run": "1", "act_no": value, "action": 1}]}
    with pytest.raises(MalformedRequestError, match=r"^actions\[0\]\.act_no: expected"):
        parse_act_request(body)


@pytest.mark.parametrize(("value", "expected"), LAX_BOOLS)
def test_flags_are_read_as_the_original_reads_them(value: Any, expected: bool) -> None:
    assert parse_act_request({**V1, "parallel_runs": value}).parallel_runs is expected
    assert parse_act_request({**BASE, "single_request": value}).parallel_runs is not expected


@pytest.mark.parametrize("value", NOT_BOOLS)
def test_flags_still_reject_what_the_original_rejects(value: Any) -> None:
    with pytest.raises(MalformedRequestError, match=r"^parallel_runs: expected a boolean"):
        parse_act_request({**V1, "parallel_runs": value})
    with pytest.raises(MalformedRequestError, match=r"^single_request: expected a boolean"):
        parse_act_request({**BASE, "single_request": value})


@pytest.mark.parametrize(("version", "expected"), [(True, 1), (1.0, 1), (False, 0), (0.0, 0)])
def test_versions_equal_to_0_or_1(version: Any, expected: int) -> None:
    assert parse_act_request({**BASE, "protocol_version": version}).version == expected


def test_v0_run_numbers_of_any_length() -> None:
    long = "1" * 30
    action = parse_act_request({**BASE, "actions": [{"run": f"{long}#12", "action": 1}]})
    assert (action.actions[0].run, action.actions[0].act_no) == (long, 12)


def test_body_checks() -> None:
    assert decode_body(b'{"a": 1}', "application/json; charset=utf-8", 100) == {"a": 1}
    assert decode_body(b"[]", "application/vnd.x+json", 100) == []
    with pytest.raises(BodyTooLargeError) as too_big:
        decode_body(b"x" * 101, "application/json", 100)
    assert status_of(too_big.value, ACT_STATUS) == 413
    for content_type in (None, "", "text/plain", "application/x-www-form-urlencoded"):
        with pytest.raises(NotJSONError) as not_json:
            decode_body(b"{}", content_type, 100)
        assert status_of(not_json.value, ACT_STATUS) == 415
    for body in (b"", b"  ", b"{", b"\xff\xfe\x00", b"[1,]"):
        with pytest.raises(MalformedRequestError) as bad:
            decode_body(body, "application/json", 100)
        assert bad.value.field == "body"
    with pytest.raises(MalformedRequestError, match="body: expected a JSON object"):
        parse_act_request([1, 2])


REPLY = ActReply(
    action_requests=[
        ActionRequest("7", 3, RawJSON("10")),
        ActionRequest("9", 0, RawJSON('{"a":[1]}')),
    ],
    active_runs=["7", "9"],
    finished_runs={"5": RawJSON("1")},
    messages=[
        Message("error", "bad", "7"),
        Message("info", "hi", None),
        Message("warning", "w", "9"),
    ],
)


def test_v1_reply() -> None:
    assert json.loads(encode_reply(REPLY, 1)) == {
        "action_requests": [
            {"run": "7", "act_no": 3, "percept": 10},
            {"run": "9", "act_no": 0, "percept": {"a": [1]}},
        ],
        "active_runs": ["7", "9"],
        "finished_runs": {"5": 1},
        "messages": [
            {"type": "error", "content": "bad", "run": "7"},
            {"type": "info", "content": "hi", "run": None},
            {"type": "warning", "content": "w", "run": "9"},
        ],
    }


def test_v0_reply() -> None:
    reply = json.loads(encode_reply(REPLY, 0))
    assert reply["action-requests"] == [
        {"run": "7#3", "percept": 10},
        {"run": "9#0", "percept": {"a": [1]}},
    ]
    assert reply["errors"] == ["run 7: bad"]
    assert reply["messages"] == ["hi", "run 9: w", "run 5: finished, outcome 1"]
    empty = json.loads(encode_reply(ActReply(), 0))
    assert empty == {"action-requests": [], "errors": [], "messages": []}


def test_error_bodies() -> None:
    assert json.loads(error_body(413, "too big")) == {
        "errorcode": 413,
        "errorname": "Request Entity Too Large",
        "description": "too big",
    }
    status, body = error_reply(MalformedRequestError("actions[0].run", "missing"))
    assert status == 400
    assert json.loads(body)["description"] == "actions[0].run: missing"
    assert status_of(error_class_for_code("unauthorized"), ARENA_STATUS) == 401


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=6,
)
fields = st.sampled_from(
    ["agent", "pwd", "actions", "protocol_version", "single_request", "parallel_runs",
     "to_abandon", "client", "run", "act_no", "action"]
)  # fmt: skip


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        fields, json_values | st.lists(st.dictionaries(fields, json_values, max_size=3), max_size=3)
    )
)
def test_garbage_only_ever_gives_protocol_errors(data: dict[str, Any]) -> None:
    with contextlib.suppress(MalformedRequestError, UnsupportedVersionError):
        parse_act_request(data)  # any other exception fails the test


@given(st.binary(max_size=64))
def test_garbage_bytes_only_ever_give_protocol_errors(body: bytes) -> None:
    with contextlib.suppress(MalformedRequestError, UnsupportedVersionError):
        parse_act_request(decode_body(body, "application/json", 1000))
