"""The exception tree names no protocol, and :func:`envwire.errors.lookup` reads the protocols'
tables along the MRO."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envwire import errors

# The attribute names come first so that a hit names the whole attribute.
_PROTOCOL_WORDS = re.compile(
    r"http_status|grpc_code|openenv_code|http|grpc|openenv|rpc|websocket|status", re.IGNORECASE
)


def protocol_words(text: str) -> list[str]:
    """The words of ``text`` that name a protocol or a protocol's codes, lowercased, once each."""
    return sorted({match.group(0).lower() for match in _PROTOCOL_WORDS.finditer(text)})


def test_the_tree_names_no_protocol() -> None:
    source = Path(errors.__file__).read_text(encoding="utf-8")
    assert protocol_words(source) == []


@pytest.mark.parametrize(
    ("line", "words"),
    [  # lines of errors.py from before each protocol kept its own table
        ("    http_status = 404", ["http_status"]),
        ("    grpc_code = _NOT_FOUND", ["grpc_code"]),
        ('    openenv_code = "FACTORY_ERROR"', ["openenv_code"]),
        (
            "        http_status: the HTTP status an HTTP front end answers with.",
            ["http", "http_status", "status"],
        ),
        (
            "the ``google.rpc.Code`` a gRPC front end puts in its ``Status``",
            ["grpc", "rpc", "status"],
        ),
        ("one env is at its own limit (OpenEnv's max_concurrent_envs)", ["openenv"]),
    ],
)
def test_the_check_finds_protocol_words(line: str, words: list[str]) -> None:
    assert protocol_words(line) == words


def test_lookup_takes_the_nearest_row() -> None:
    table = {errors.EnvwireError: "base", errors.UsageError: "usage", errors.StateError: "state"}

    class Later(errors.StateError):
        pass

    assert errors.lookup(table, errors.StateError("x")) == "state"
    assert errors.lookup(table, Later) == errors.lookup(table, Later("x")) == "state"
    assert errors.lookup(table, errors.CapacityError) == "usage"
    assert errors.lookup(table, errors.EnvCrashedError("x")) == "base"


def test_lookup_without_a_row_names_the_class() -> None:
    with pytest.raises(KeyError, match="EnvCrashedError"):
        errors.lookup({errors.UsageError: 1}, errors.EnvCrashedError("x"))


def test_an_env_error_keeps_the_envs_own_text_and_clients_can_rebuild_it() -> None:
    wrapped = errors.EnvError.wrapping("e: step raised ValueError: bad", ValueError("bad"))
    assert (str(wrapped), wrapped.env_message) == ("e: step raised ValueError: bad", "bad")
    assert errors.EnvTimeoutError("late").env_message == "late"
    # Clients rebuild errors from code and message: the env errors stay constructible so.
    for cls in (errors.EnvError, errors.EnvTimeoutError, errors.EnvCrashedError):
        assert errors.error_class_for_code(cls.code) is cls
