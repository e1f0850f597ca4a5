"""The route table: methods, 404s and 405s come from its rows, in both modes; strict mode's
stateless HTTP runs the same handlers on a fresh env per request."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from envwire.app import Server
from envwire.frontends.openenv.mount import OpenEnvMount
from envwire.frontends.openenv.routes import ENDPOINTS, ROUTES, Router
from envwire.protocols.http.http11 import Request
from envwire.registry import Catalog, parse_env_arg
from envwire.settings import Settings


@pytest.fixture(scope="module", params=["default", "strict"])
def router(request: pytest.FixtureRequest) -> Iterator[Router]:
    catalog = Catalog([parse_env_arg("envwire/Echo-v0")])
    settings = Settings.of(
        gym_socket=None, http=0, grpc=None, monitor_root=None, openenv_compat=request.param
    )
    with Server(catalog, settings) as server:
        [front] = server.front_ends
        [mount] = [m for m in front.mounts if isinstance(m, OpenEnvMount)]  # type: ignore[attr-defined]
        yield mount.router


def _ask(
    router: Router, method: str, path: str, body: object = None, **headers: str
) -> tuple[int, dict[str, str], bytes]:
    raw = b"" if body is None else json.dumps(body).encode()
    response = router.handle(Request(method, path, headers=headers, body=raw))
    return response.status, dict(response.headers), response.body


def test_the_endpoints_and_their_methods_are_the_tables() -> None:
    assert ENDPOINTS["session"] == ("POST", "GET", "DELETE")
    assert list(ENDPOINTS)[:3] == ["reset", "step", "state"]
    assert {(r.endpoint, r.method) for r in ROUTES if not r.server} == {
        (name, method) for name, methods in ENDPOINTS.items() for method in methods
    }


def test_methods_head_and_unknown_paths(router: Router) -> None:
    strict = not router.service.compat.extensions
    status, headers, _ = _ask(router, "POST", "/health")
    assert (status, headers.get("allow")) == (405, "GET")
    assert _ask(router, "HEAD", "/health")[0] == 200
    assert _ask(router, "HEAD", "/reset")[0] == 405
    assert _ask(router, "GET", "/nowhere")[0] == 404
    # envwire's own paths: 404 in strict mode whatever the method, 405 otherwise
    assert _ask(router, "PUT", "/session")[0] == (404 if strict else 405)
    assert _ask(router, "HEAD", "/envs")[0] == (404 if strict else 405)
    assert _ask(router, "GET", "/envs")[0] == (404 if strict else 200)
    assert _ask(router, "GET", "/status")[0] == (404 if strict else 200)


def test_reset_step_state_in_both_modes(router: Router) -> None:
    strict = not router.service.compat.stateful_http
    status, headers, body = _ask(router, "POST", "/reset", {"seed": 1})
    assert status == 200 and json.loads(body)["done"] is False
    assert ("envwire-session" in headers) is not strict
    token = {} if strict else {"envwire-session": headers["envwire-session"]}
    status, _, body = _ask(router, "POST", "/step", {"action": {"message": "hey"}}, **token)
    if strict:  # a fresh env, not reset: envwire's own envs refuse the step
        assert (status, json.loads(body)["openenv_code"]) == (409, "SESSION_ERROR")
    else:
        assert status == 200 and json.loads(body)["observation"]["echoed_message"] == "hey"
    status, _, body = _ask(router, "GET", "/state", **token)
    assert status == 200 and json.loads(body)["step_count"] == (0 if strict else 1)
    # strict: every request's env was closed after it; default: the session stays open
    assert router.service.counts()["http"] == (0 if strict else 1)
    if not strict:
        assert _ask(router, "DELETE", "/session", **token)[0] == 200
    assert _ask(router, "POST", "/step", {"action": {"message": "x"}})[0] == (
        409 if strict else 400
    )


def test_the_openapi_document_lists_the_documented_routes(router: Router) -> None:
    status, _, body = _ask(router, "GET", "/openapi.json")
    assert status == 200
    paths = json.loads(body)["paths"]
    documented = {(f"/{r.endpoint}", r.method.lower()) for r in ROUTES if r.doc is not None}
    assert {(p, m) for p, ops in paths.items() for m in ops} == documented
    assert paths["/step"]["post"]["requestBody"]["required"] is True
    assert set(paths["/reset"]["post"]["responses"]) == {"200", "422"}
