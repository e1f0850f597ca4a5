"""The HTTP table: the status of every envwire error, looked up along the class's MRO."""

from __future__ import annotations

from envwire import errors
from envwire.arena.errors import AuthenticationError
from envwire.protocols.http.status import STATUS, status_of
from tests.protocols.errortables import check_table

#: The status of every error class as it was when classes carried ``http_status`` themselves
#: (the two session classes split what one class decided per instance: 400 or 404).
BEFORE = {
    "errors.EnvwireError": 500,
    "errors.ProtocolError": 400,
    "errors.TooLargeError": 413,
    "errors.UsageError": 400,
    "errors.UnknownEnvError": 404,
    "errors.InvalidActionError": 422,
    "errors.InvalidArgumentError": 422,
    "errors.StateError": 409,
    "errors.CapacityError": 503,
    "errors.EnvCapacityError": 503,
    "errors.RateLimitedError": 429,
    "errors.UnauthenticatedError": 401,
    "errors.ForbiddenError": 403,
    "errors.UnsupportedError": 501,
    "errors.EnvError": 500,
    "errors.EnvCrashedError": 500,
    "errors.EnvTimeoutError": 504,
    "errors.ConfigError": 500,
    "optional.MissingExtraError": 500,
    "errors.TransportError": 500,
    "errors.RemoteError": 500,
    "protocols.arena.MalformedRequestError": 400,
    "protocols.arena.UnsupportedVersionError": 400,
    "protocols.arena.BodyTooLargeError": 413,
    "protocols.arena.NotJSONError": 415,
    "protocols.dmenvrpc.status.UnknownWorldError": 404,
    "protocols.dmenvrpc.status.UnknownPropertyError": 404,
    "protocols.dmenvrpc.status.PropertyPermissionError": 403,
    "frontends.openenv.bindings.ActionRejected": 422,
    "frontends.openenv.mcp.UnknownToolError": 422,
    "frontends.openenv.routes._SessionMissing": 400,
    "frontends.openenv.routes._SessionUnknown": 404,
    "arena.errors.ForbiddenError": 403,
    "arena.errors.UnknownArenaEnvError": 400,
    "arena.errors.AuthenticationError": 401,
    "arena.errors.NotFoundError": 404,
    "observe.datasets.RecordError": 500,  # a recording that failed: the server's fault
    "arena.errors.ConflictError": 409,
    "arena.errors.ArenaBusyError": 503,
    "arena.web.routes._NotAllowed": 405,
    "client.arena.connection.ArenaRequestError": 500,
    "adapters.training.sb3.RemoteAttributeError": 501,
}


def test_every_error_keeps_its_status() -> None:
    check_table(BEFORE, status_of)


def test_instances_answer_as_their_class() -> None:
    assert status_of(errors.EnvTimeoutError("slow")) == 504
    assert status_of(errors.EnvCapacityError("Echo-v0", 2, 2)) == 503


def test_a_new_subclass_answers_with_its_parents_status() -> None:
    # No code of their own: a test's class must not become what error_class_for_code finds.
    class Stale(errors.StateError):
        pass

    class Staler(Stale):
        pass

    class Locked(AuthenticationError):  # a parent whose row its own module added
        pass

    assert Stale not in STATUS and Staler not in STATUS
    assert status_of(Stale("x")) == status_of(Staler) == 409
    assert status_of(Locked("x")) == 401
