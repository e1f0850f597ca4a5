"""``/metrics`` and ``/dashboard`` on the HTTP front end, framework-free (a request in, a
response out; None for paths that are not theirs, like the arena's routes).

==================================================  ========================================
``GET /metrics``                                    Prometheus' text format
``GET /dashboard``                                  the live page (HTML and a small script)
``GET /dashboard/api/live``                         sessions, throughput, errors, crashes
``GET /dashboard/api/episodes``                     recorded episodes per dataset
``GET /dashboard/api/episode/<dataset>/<n>``        one episode: actions, rewards, frames
==================================================  ========================================

A replay sends at most ``MAX_REPLAY_STEPS`` steps (frames as PNG data URLs).

With tokens on (``--token-file``), every one of these paths needs a token, like the OpenEnv
routes: ``Authorization: Bearer TOKEN`` (Prometheus' ``authorization.credentials_file``), or
``Basic`` with the token as the password, which a browser asks for when the dashboard answers
401. ``public_metrics`` (``--public-metrics``) lets ``/metrics`` alone be scraped without one.
"""

from __future__ import annotations

import base64
import io
import json
import logging
from importlib import resources
from typing import Any, Protocol, TypeAlias

import numpy as np
import numpy.typing as npt
from PIL import Image

from envwire.observe import CONTENT_TYPE, Observability
from envwire.protocols.http.http11 import Request, Response, json_response
from envwire.server.http import OnHang, PlainMount
from envwire.server.security.tokens import TokenSet

__all__ = ["MAX_REPLAY_STEPS", "PAGE", "ObserveWeb", "token_refusal"]

log = logging.getLogger("envwire.http")

#: The page: HTML and a small script, no build step, no CDN (``dashboard.html`` beside this).
PAGE = resources.files("envwire.observe").joinpath("dashboard.html").read_bytes()

#: The most steps one replay response carries.
MAX_REPLAY_STEPS = 1000


def _json(data: object, status: int = 200) -> Response:
    return json_response(status, json.dumps(data, default=_plain))


def _plain(value: object) -> object:
    """``json.dumps`` hook: numpy values as numbers and lists, anything else as its text."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def token_refusal(tokens: TokenSet | None, header: str | None, path: str) -> Response | None:
    """401 when ``tokens`` are set and the ``Authorization`` header carries none of them; the
    dashboard's challenge is ``Basic`` (a browser then asks for the token as the password),
    the others' ``Bearer``. None when the request may pass."""
    if tokens is None or tokens.check_header(header):
        return None
    given = "no token" if not header else "a token not accepted"
    response = _json(
        {
            "detail": "this server requires a token (Authorization: Bearer TOKEN, or Basic "
            f"with the token as the password); the request carried {given}",
            "code": "unauthenticated",
        },
        401,
    )
    scheme = "Basic" if path.startswith("/dashboard") else "Bearer"
    response.headers.append(("www-authenticate", f'{scheme} realm="envwire"'))
    return response


def _png(frame: npt.ArrayLike) -> str:
    buffer = io.BytesIO()
    Image.fromarray(np.asarray(frame, dtype=np.uint8)).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def _short(value: object) -> str:
    text = json.dumps(value, default=_plain)
    return text if len(text) <= 120 else text[:117] + "..."


class _Steps(Protocol):
    """A field's values indexed by step (an array, as Minari reads them back)."""

    def __getitem__(self, index: int, /) -> object: ...


#: A Minari episode's field: per-step values, or dicts and tuples of fields (Dict, Tuple spaces).
_Field: TypeAlias = "dict[str, _Field] | tuple[_Field, ...] | _Steps"


def _items(values: _Field, n: int) -> list[object]:
    """Per-step items of a Minari episode's field (arrays, dicts of arrays, tuples)."""
    if isinstance(values, dict):
        parts = {k: _items(v, n) for k, v in values.items()}
        return [{k: parts[k][i] for k in parts} for i in range(n)]
    if isinstance(values, tuple):
        parts_t = [_items(v, n) for v in values]
        return [[p[i] for p in parts_t] for i in range(n)]
    return [values[i] for i in range(n)]


class ObserveWeb(PlainMount):
    """Answers ``/metrics`` and ``/dashboard...`` from a server's :class:`Observability` (a
    mount of the HTTP front end).

    Args:
        observe: the server's metrics, live activity and recorder.
        tokens: the server's tokens (None: no authentication).
        public_metrics: ``/metrics`` answers without a token even when ``tokens`` are set.
        dashboard: serve the dashboard too (off: ``/metrics`` alone).
    """

    def __init__(
        self,
        observe: Observability,
        tokens: TokenSet | None = None,
        public_metrics: bool = False,
        *,
        dashboard: bool = True,
    ) -> None:
        self.observe = observe
        self.tokens = tokens
        self.public_metrics = public_metrics
        self.dashboard = dashboard

    def _ours(self, path: str) -> bool:
        return path == "/metrics" or (
            self.dashboard and (path == "/dashboard" or path.startswith("/dashboard/"))
        )

    def check(self, head: Request) -> Response | bool | None:
        """The token rule, on a request's head (before any body is read)."""
        path = head.path
        if not self._ours(path):
            return None
        if self.public_metrics and path == "/metrics":
            return True
        refused = token_refusal(self.tokens, head.header("authorization"), path)
        return True if refused is None else refused

    def respond(self, request: Request, on_hang: OnHang | None = None) -> Response | None:
        """The response, or None when the path is not ours. Never raises."""
        path = request.path
        if not self._ours(path):
            return None
        if not (self.public_metrics and path == "/metrics"):
            refused = token_refusal(self.tokens, request.header("authorization"), path)
            if refused is not None:
                return refused
        if request.method not in ("GET", "HEAD"):
            response = _json({"detail": "Method Not Allowed"}, 405)
            response.headers.append(("allow", "GET"))
            return response
        try:
            return self._route(path)
        except Exception:
            log.exception("%s failed", path)
            return _json({"detail": "internal server error; see the log"}, 500)

    def _route(self, path: str) -> Response:
        self.observe.tell_kept()  # (the steps whose replies are out, counted)
        if path == "/metrics":
            return Response(200, self.observe.metrics.render(), CONTENT_TYPE)
        if path in ("/dashboard", "/dashboard/"):
            return Response(200, PAGE, "text/html; charset=utf-8")
        if path == "/dashboard/api/live":
            snapshot = self.observe.activity.snapshot()
            snapshot["recording"] = self.observe.recorder is not None
            return _json(snapshot)
        recorder = self.observe.recorder
        if path == "/dashboard/api/episodes":
            return _json({"episodes": recorder.episodes() if recorder is not None else {}})
        if path.startswith("/dashboard/api/episode/") and recorder is not None:
            dataset, _, number = path[len("/dashboard/api/episode/") :].rpartition("/")
            try:
                episode = recorder.episode(dataset, int(number))
            except (KeyError, ValueError):
                return _json({"detail": f"no episode {number!r} in {dataset!r}"}, 404)
            return _json(self._replay(episode))
        return _json({"detail": "Not Found"}, 404)

    @staticmethod
    def _replay(episode: dict[str, Any]) -> dict[str, Any]:
        rewards = np.asarray(episode["rewards"], dtype=float)
        steps = min(len(rewards), MAX_REPLAY_STEPS)
        actions = _items(episode["actions"], steps)
        observations = _items(episode["observations"], steps + 1)
        frames = episode.get("infos", {}).get("render")
        return {
            "id": int(episode["id"]),
            "steps": len(rewards),
            "rewards": rewards[:steps].tolist(),
            "actions": [_short(a) for a in actions],
            "observations": [_short(o) for o in observations],
            "terminated": bool(np.asarray(episode["terminations"])[-1]) if steps else False,
            "frames": [_png(f) for f in frames[: steps + 1]] if frames is not None else [],
        }
