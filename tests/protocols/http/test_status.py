"""The HTTP tables: the status of every envwire error, looked up along the class's MRO in the
table of what answers it; every table built once, whatever was imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

from envwire import errors
from envwire.arena.errors import ARENA_STATUS, AuthenticationError
from envwire.arena.web import routes as arena_routes
from envwire.frontends.openenv import answers as openenv_answers
from envwire.protocols.http.status import STATUS, status_of, statuses
from tests.protocols.errortables import check_table

#: The status of every error class as it was when classes carried ``http_status`` themselves
#: (the two session classes split what one class decided per instance: 400 or 404), but for
#: dm_env_rpc's own three, which no HTTP front end answers: their parent's, UsageError's.
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
    "protocols.dmenvrpc.status.UnknownWorldError": 400,
    "protocols.dmenvrpc.status.UnknownPropertyError": 400,
    "protocols.dmenvrpc.status.PropertyPermissionError": 400,
    "frontends.openenv.bindings.ActionRejected": 422,
    "frontends.openenv.tools.UnknownToolError": 422,
    "frontends.openenv.httpsessions.SessionMissing": 400,
    "frontends.openenv.httpsessions.SessionUnknown": 404,
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
    # Each class in the table of what answers it: the arena's routes, OpenEnv's, or the core's.
    answered = statuses(arena_routes._STATUS, openenv_answers.STATUS)
    check_table(BEFORE, lambda cls: status_of(cls, answered))


#: Run in a fresh interpreter: import the HTTP codec alone, read its table, then import every
#: module that defines an error; the tables must be what they were, and read-only.
_ALONE = """
import importlib, sys
from envwire.protocols.http import status
from envwire.protocols import openenv
before = (dict(status.STATUS), dict(openenv.ERROR_TABLE))
from tests.protocols.errortables import error_classes
error_classes()  # imports every module that defines an error class
import envwire.frontends.openenv.routes, envwire.arena.web.routes
assert (dict(status.STATUS), dict(openenv.ERROR_TABLE)) == before, "a table changed on import"
for table in (status.STATUS, openenv.ERROR_TABLE):
    try:
        table[KeyError] = 0
    except TypeError:
        pass
    else:
        raise AssertionError("a table can be changed")
print(len(before[0]), len(before[1]))
"""


@pytest.mark.process
def test_tables_are_built_once_whatever_is_imported() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _ALONE], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(len(STATUS)), "9"]


@pytest.mark.process
def test_the_arena_codec_alone_answers_its_errors() -> None:
    # Only the act protocol's codec imported: its errors answer with their own statuses.
    code = (
        "import sys\n"
        "from envwire.protocols.arena import NotJSONError, BodyTooLargeError, error_reply\n"
        "assert 'envwire.arena' not in sys.modules, sorted(sys.modules)\n"
        "print(error_reply(NotJSONError('x'))[0], error_reply(BodyTooLargeError('x'))[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["415", "413"]


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
    assert status_of(Locked("x"), ARENA_STATUS) == 401
