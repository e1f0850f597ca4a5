"""The gRPC table: the ``google.rpc.Code`` of every envwire error, looked up along the MRO."""

from __future__ import annotations

from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb

from envwire import errors
from envwire.protocols.dmenvrpc import CODES, UnknownWorldError, code_of, error_response
from tests.protocols.errortables import check_table

#: The code of every error class as it was when classes carried ``grpc_code`` themselves.
#: 3 INVALID_ARGUMENT, 4 DEADLINE_EXCEEDED, 5 NOT_FOUND, 7 PERMISSION_DENIED,
#: 8 RESOURCE_EXHAUSTED, 9 FAILED_PRECONDITION, 12 UNIMPLEMENTED, 13 INTERNAL, 14 UNAVAILABLE,
#: 16 UNAUTHENTICATED.
BEFORE = {
    "errors.EnvwireError": 13,
    "errors.ProtocolError": 3,
    "errors.TooLargeError": 8,
    "errors.UsageError": 3,
    "errors.UnknownEnvError": 5,
    "errors.InvalidActionError": 3,
    "errors.InvalidArgumentError": 3,
    "errors.StateError": 9,
    "errors.CapacityError": 8,
    "errors.EnvCapacityError": 8,
    "errors.RateLimitedError": 8,
    "errors.UnauthenticatedError": 16,
    "errors.ForbiddenError": 7,
    "errors.UnsupportedError": 12,
    "errors.EnvError": 13,
    "errors.EnvCrashedError": 14,
    "errors.EnvTimeoutError": 4,
    "errors.ConfigError": 13,
    "optional.MissingExtraError": 13,
    "errors.TransportError": 14,
    "errors.RemoteError": 14,
    "protocols.arena.MalformedRequestError": 3,
    "protocols.arena.UnsupportedVersionError": 3,
    "protocols.arena.BodyTooLargeError": 3,
    "protocols.arena.NotJSONError": 3,
    "protocols.dmenvrpc.status.UnknownWorldError": 5,
    "protocols.dmenvrpc.status.UnknownPropertyError": 5,
    "protocols.dmenvrpc.status.PropertyPermissionError": 7,
    "frontends.openenv.bindings.ActionRejected": 3,
    "frontends.openenv.tools.UnknownToolError": 3,
    "frontends.openenv.httpsessions.SessionMissing": 13,
    "frontends.openenv.httpsessions.SessionUnknown": 13,
    "arena.errors.ForbiddenError": 7,
    "arena.errors.UnknownArenaEnvError": 3,
    "arena.errors.AuthenticationError": 3,
    "arena.errors.NotFoundError": 3,
    "observe.datasets.RecordError": 13,  # a recording that failed: the server's fault
    "arena.errors.ConflictError": 3,
    "arena.errors.ArenaBusyError": 3,
    "arena.web.routes._NotAllowed": 13,
    "client.arena.connection.ArenaRequestError": 14,
    "adapters.training.sb3.RemoteAttributeError": 12,
}


def test_every_error_keeps_its_code() -> None:
    check_table(BEFORE, code_of)


def test_the_status_carries_the_tables_code() -> None:
    response = pb.EnvironmentResponse.FromString(
        error_response(errors.EnvCrashedError("died")).SerializeToString()
    )
    assert response.error.code == 14 and response.error.message == "died"


def test_a_new_subclass_reports_its_parents_code() -> None:
    # No code of their own: a test's class must not become what error_class_for_code finds.
    class Gone(errors.EnvCrashedError):
        pass

    class Elsewhere(UnknownWorldError):  # a parent with a row beside the table's core rows
        pass

    assert Gone not in CODES and Elsewhere not in CODES
    assert code_of(Gone("x")) == code_of(Gone) == 14
    assert code_of(Elsewhere("x")) == 5
