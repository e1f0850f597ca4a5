"""The OpenEnv table: openenv-core's error code for every envwire error, looked up along the
MRO, and the error messages built from it."""

from __future__ import annotations

import json

from envwire import errors
from envwire.arena.errors import NotFoundError
from envwire.frontends.openenv import answers as openenv_answers
from envwire.protocols.openenv import ERROR_TABLE, ErrorCode, code_of, error_data, message
from tests.protocols.errortables import check_table

_EXECUTION, _INVALID_JSON = "EXECUTION_ERROR", "INVALID_JSON"
_VALIDATION, _SESSION = "VALIDATION_ERROR", "SESSION_ERROR"

#: The code of every error class as it was when classes carried ``openenv_code`` themselves.
BEFORE = {
    "errors.EnvwireError": _EXECUTION,
    "errors.ProtocolError": _INVALID_JSON,
    "errors.TooLargeError": _INVALID_JSON,
    "errors.UsageError": _VALIDATION,
    "errors.UnknownEnvError": "FACTORY_ERROR",
    "errors.InvalidActionError": _VALIDATION,
    "errors.InvalidArgumentError": _VALIDATION,
    "errors.StateError": _SESSION,
    "errors.CapacityError": "CAPACITY_REACHED",
    "errors.EnvCapacityError": "CAPACITY_REACHED",
    "errors.RateLimitedError": "CAPACITY_REACHED",
    "errors.UnauthenticatedError": _SESSION,
    "errors.ForbiddenError": _SESSION,
    "errors.UnsupportedError": _VALIDATION,
    "errors.EnvError": _EXECUTION,
    "errors.EnvCrashedError": _EXECUTION,
    "errors.EnvTimeoutError": _EXECUTION,
    "errors.ConfigError": _EXECUTION,
    "optional.MissingExtraError": _EXECUTION,
    "errors.TransportError": _EXECUTION,
    "errors.RemoteError": _EXECUTION,
    "protocols.arena.MalformedRequestError": _INVALID_JSON,
    "protocols.arena.UnsupportedVersionError": _INVALID_JSON,
    "protocols.arena.BodyTooLargeError": _INVALID_JSON,
    "protocols.arena.NotJSONError": _INVALID_JSON,
    "protocols.dmenvrpc.status.UnknownWorldError": _VALIDATION,
    "protocols.dmenvrpc.status.UnknownPropertyError": _VALIDATION,
    "protocols.dmenvrpc.status.PropertyPermissionError": _VALIDATION,
    "frontends.openenv.bindings.ActionRejected": _VALIDATION,
    "frontends.openenv.tools.UnknownToolError": _VALIDATION,
    "frontends.openenv.httpsessions.SessionMissing": _SESSION,
    "frontends.openenv.httpsessions.SessionUnknown": _SESSION,
    "arena.errors.ForbiddenError": _SESSION,
    "arena.errors.UnknownArenaEnvError": _VALIDATION,
    "arena.errors.AuthenticationError": _VALIDATION,
    "arena.errors.NotFoundError": _VALIDATION,
    "observe.datasets.RecordError": _EXECUTION,  # a recording that failed: the server's fault
    "arena.errors.ConflictError": _VALIDATION,
    "arena.errors.ArenaBusyError": _VALIDATION,
    "arena.web.routes._NotAllowed": _EXECUTION,
    "client.arena.connection.ArenaRequestError": _EXECUTION,
    "adapters.training.sb3.RemoteAttributeError": _VALIDATION,
}


def test_every_error_keeps_its_code() -> None:
    # OpenEnv's routes answer with their own table: the core's rows and the sessions'.
    check_table(BEFORE, lambda cls: code_of(cls, openenv_answers.CODES))


def test_every_code_in_the_table_is_one_of_openenv_cores() -> None:
    assert all(isinstance(code, ErrorCode) for code in ERROR_TABLE.values())


def test_error_messages_carry_the_tables_code_as_text() -> None:
    text = message("error", error_data(errors.EnvCapacityError("Echo-v0", 1, 1)))
    data = json.loads(text)["data"]
    assert data["code"] == "CAPACITY_REACHED" and data["envwire_code"] == "capacity_reached"
    assert data["message"].startswith("Server at capacity: 1/1 sessions of Echo-v0")


def test_a_new_subclass_reports_its_parents_code() -> None:
    # No code of their own: a test's class must not become what error_class_for_code finds.
    class Refused(errors.ForbiddenError):
        pass

    class Missing(NotFoundError):  # a class outside the core: its parent's row is UsageError's
        pass

    assert Refused not in ERROR_TABLE and Missing not in ERROR_TABLE
    assert code_of(Refused("x")) == code_of(Refused) == "SESSION_ERROR"
    assert code_of(Missing("x")) == "VALIDATION_ERROR"
