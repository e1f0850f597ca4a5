"""envwire's deliberate differences from openenv-core, and the switch that turns them off.

The OpenEnv front end answers as openenv-core 0.3.0 does. Where envwire differs on purpose
(``docs/protocols/openenv.md``, "Differences from openenv-core, on purpose"), each difference is
one flag of :class:`Compat`; ``--openenv-compat strict`` (server option ``openenv_compat =
"strict"``) clears them all, for users whose code depends on openenv-core's behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MODES", "Compat"]

MODES = ("default", "strict")


@dataclass(frozen=True, slots=True)
class Compat:
    """Which deliberate differences are on (all of them by default, none in strict mode).

    Attributes:
        stateful_http: HTTP ``/reset`` opens a session that ``/step`` and ``/state`` continue
            (strict: every HTTP request gets a fresh env, as in openenv-core).
        extensions: envwire's own endpoints and messages (``/session``, ``/sample``,
            ``/envs``, ``/status``, ``spaces``/``sample`` messages, MCP ``initialize`` and
            ``ping``); strict answers them as openenv-core would (404, ``UNKNOWN_TYPE``,
            ``-32601``).
        check_ws_seed: a negative seed on the WebSocket is a ``VALIDATION_ERROR`` (strict:
            passed to the env, as openenv-core does; HTTP checks it in both modes).
        malformed_continues: a WebSocket message that is JSON but not an object is a
            ``VALIDATION_ERROR`` and the session goes on (strict: ``SESSION_ERROR`` in
            openenv-core's words, ``'list' object has no attribute 'get'``, and it ends).
        refusal_waits: a refused WebSocket session answers the client's first message before
            closing (strict: the error is sent at once).
        named_refusals: a refused WebSocket session closes with 1013 (capacity) or 1011 and the
            error's class as the reason, and its capacity message names the env (strict: close
            1000 with no reason, after openenv-core's own ``Server at capacity: 1/1 sessions
            active. Cannot accept new connections.``).
        empty_tools: ``tools/list`` of an env without tools is an empty list (strict: the
            ``-32603`` "Environment does not support MCP" error).
        many_sessions: envwire's own envs and Gymnasium envs take any number of sessions
            (strict: one per env, openenv-core's default). OpenEnv envs get the
            ``max_concurrent_envs`` their app module chose in both modes.
        named_env_errors: an env's exception is reported naming the env and the call
            (``oe/X-v0: step raised ValueError: ...``), over HTTP as a JSON 500 with
            envwire's codes (strict: the exception's own text on the WebSocket, and over HTTP
            the plain-text ``Internal Server Error`` 500 of openenv-core's server).
        json_bodies_only: a ``/reset`` or ``/step`` body declared as anything but JSON
            (a form, ``text/plain``) is a 415 naming the content type to send (strict:
            FastAPI's 422, which takes such a body for a string, not an object). ``/mcp``
            refuses such bodies in both modes (a cross-site form must not call tools).
    """

    stateful_http: bool = True
    extensions: bool = True
    check_ws_seed: bool = True
    malformed_continues: bool = True
    refusal_waits: bool = True
    named_refusals: bool = True
    empty_tools: bool = True
    many_sessions: bool = True
    named_env_errors: bool = True
    json_bodies_only: bool = True

    @property
    def strict(self) -> bool:
        """True when every difference is off."""
        return self == STRICT

    @classmethod
    def of(cls, mode: str) -> Compat:
        """The mode the ``openenv_compat`` setting names (``default`` or ``strict``)."""
        return STRICT if mode == "strict" else cls()


STRICT = Compat(**dict.fromkeys(Compat.__dataclass_fields__, False))
