"""Recording with several workers (``--workers``): one writer per dataset, in worker 0.

Two processes appending to one Minari dataset would each count its episodes apart and overwrite
the other's metadata. So worker 0 alone writes the datasets; every other worker sends each
episode that ends there to worker 0, over worker 0's Unix socket (:mod:`envwire.server.relay`,
in a folder of the server's own), and the send returns once worker 0's writer has taken it:
``--record-overflow wait`` slows the recorded sessions of every worker alike, and an episode
that cannot be sent is counted as dropped (``error``) and logged.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable

from envwire.observe.episodes import DEFAULT_MAX_EPISODE_BYTES, Episode
from envwire.protocols.http.http11 import Request, Response, json_response
from envwire.server.http import OnHang, PlainMount
from envwire.server.relay import fetch

__all__ = ["EPISODES_PATH", "EPISODE_BODY", "EpisodeInbox", "episode_sender"]

log = logging.getLogger("envwire.record")

#: Where worker 0's Unix socket takes the other workers' episodes (never on a TCP port).
EPISODES_PATH = "/envwire-workers/episodes"

#: The largest body of one pickled episode: the largest episode gathered in memory, and room.
EPISODE_BODY = DEFAULT_MAX_EPISODE_BYTES + (1 << 20)


def episode_sender(path: str) -> Callable[[Episode], bool]:
    """A function sending an episode to the worker at ``path`` (its Unix socket): True once
    that worker's writer took it, False when it could not be sent (logged)."""

    def send(episode: Episode) -> bool:
        request = Request(
            "POST",
            EPISODES_PATH,
            headers={"host": "localhost", "content-type": "application/octet-stream"},
            body=pickle.dumps(episode, protocol=pickle.HIGHEST_PROTOCOL),
        )
        try:
            answer = fetch(path, request)
        except OSError as exc:
            log.warning("an episode of %s could not be sent to worker 0: %s", episode.env_id, exc)
            return False
        if answer.status != 200:
            log.warning("worker 0 refused an episode of %s: %s", episode.env_id, answer.body[:200])
            return False
        return True

    return send


class EpisodeInbox(PlainMount):
    """Worker 0's mount, on its Unix socket alone: the episodes the other workers send, handed
    to ``offer`` (the writer's)."""

    def __init__(self, offer: Callable[[Episode], None]) -> None:
        self.offer = offer

    def check(self, head: Request) -> bool | None:
        return True if head.path == EPISODES_PATH else None

    def body_limit(self, request: Request) -> int | None:
        return EPISODE_BODY if request.path == EPISODES_PATH else None

    def respond(self, request: Request, on_hang: OnHang) -> Response | None:
        if request.path != EPISODES_PATH:
            return None
        if request.method != "POST":
            return json_response(405, '{"detail":"Method Not Allowed"}', [("allow", "POST")])
        try:
            # a worker of this server (the socket's folder is the server user's alone)
            episode = pickle.loads(request.body)
        except Exception as exc:
            return json_response(400, f'{{"detail":"not an episode: {type(exc).__name__}"}}')
        if not isinstance(episode, Episode):
            return json_response(400, '{"detail":"not an episode"}')
        self.offer(episode)
        return json_response(200, "{}")
