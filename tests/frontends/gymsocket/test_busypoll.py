"""Busy polling on gym-socket: the same replies, a bounded number of spinning threads, clear
errors for settings that cannot work."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import gymnasium
import numpy as np
import pytest

import envwire
from envwire.app import Server
from envwire.client.gymsocket import GymSocketTransport
from envwire.errors import ConfigError, InvalidArgumentError
from envwire.frontends.gymsocket import GymSocketFrontEnd
from envwire.registry import Catalog, EnvSpec
from envwire.settings import Settings
from envwire.sockets import MAX_BUSY_POLL_US, busy_poll, busy_poll_seconds


def serve(options: dict[str, Any]) -> Server:
    catalog = Catalog([EnvSpec("CartPole-v1", "gym:CartPole-v1")])
    config = Settings.of(gym_socket=0, http=None, grpc=None, monitor_root=None, **options)
    return Server(catalog, config)


@pytest.fixture
def front() -> Iterator[GymSocketFrontEnd]:
    with serve({"busy_poll_us": MAX_BUSY_POLL_US}) as server:
        [gym] = server.front_ends
        assert isinstance(gym, GymSocketFrontEnd)
        yield gym


def url(front: GymSocketFrontEnd) -> str:
    return f"gym-socket://{front.host}:{front.port}/CartPole-v1"


def episode(env: gymnasium.Env[Any, Any], pause: float = 0.0) -> list[Any]:
    """Observations of one seeded episode, with ``pause`` seconds before some steps."""
    obs, _ = env.reset(seed=3)
    seen = [obs]
    for t in range(500):
        if pause and t % 7 == 0:
            time.sleep(pause)  # longer than the window: the server stops polling, then resumes
        obs, _, terminated, truncated, _ = env.step(t % 2)
        seen.append(obs)
        if terminated or truncated:
            break
    return seen


def test_polling_on_both_ends_gives_the_same_episode(front: GymSocketFrontEnd) -> None:
    local = gymnasium.make("CartPole-v1")
    expected = episode(local)
    for pause in (0.0, 0.03):
        env = envwire.make(url(front), busy_poll_us=MAX_BUSY_POLL_US)
        try:
            got = episode(env, pause)
        finally:
            env.close()
        assert len(got) == len(expected) > 10
        np.testing.assert_array_equal(np.stack(got), np.stack(expected))


class Counted:
    """A stand-in for the front end's polling places that counts how they are used."""

    def __init__(self, places: int) -> None:
        self.places = threading.BoundedSemaphore(places)
        self.holding = self.most = self.taken = 0
        self.lock = threading.Lock()

    def acquire(self, blocking: bool = True) -> bool:
        if not self.places.acquire(blocking=blocking):
            return False
        with self.lock:
            self.holding += 1
            self.taken += 1
            self.most = max(self.most, self.holding)
        return True

    def release(self) -> None:
        with self.lock:
            self.holding -= 1
        self.places.release()


def test_at_most_the_pollers_bound_polls_at_once(front: GymSocketFrontEnd) -> None:
    """With one polling place, four clients stepping at once never have two threads polling."""
    counted = Counted(1)
    front.pollers = counted  # type: ignore[assignment]
    results: list[int] = []

    def client() -> None:
        env = envwire.make(url(front))
        env.reset(seed=0)
        steps = 0
        for t in range(300):
            _, _, terminated, truncated, _ = env.step(t % 2)
            steps += 1
            if terminated or truncated:
                env.reset()
        env.close()
        results.append(steps)

    threads = [threading.Thread(target=client) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == [300] * 4
    assert counted.taken > 0  # connections did poll
    assert counted.most == 1


def test_a_silent_client_is_not_polled_for(front: GymSocketFrontEnd) -> None:
    """After a wait longer than the window, the connection sleeps in recv without polling (or
    holding a polling place); once requests come quickly again, it polls again."""
    counted = Counted(4)
    front.pollers = counted  # type: ignore[assignment]
    env = envwire.make(url(front))
    env.reset(seed=0)
    env.step(0)
    time.sleep(0.05)  # the connection polls for 10 ms, finds nothing, then sleeps: a miss
    env.step(1)
    time.sleep(0.05)
    missed = counted.taken
    env.step(0)  # the wait before this one was long: the wait after it does not poll
    time.sleep(0.05)
    assert counted.taken == missed
    assert counted.holding == 0  # a place is never held while sleeping
    for t in range(20):  # quick requests again: soon the waits poll again
        env.step(t % 2)
        if counted.taken > missed:
            break
    assert counted.taken > missed
    env.close()


@pytest.mark.parametrize("value", [-1, MAX_BUSY_POLL_US + 1, "50", True, None])
def test_bad_windows_are_refused(value: object) -> None:
    with pytest.raises(InvalidArgumentError, match="busy_poll_us"):
        busy_poll_seconds(value)
    with pytest.raises(ConfigError, match="busy_poll_us"), serve({"busy_poll_us": value}):
        pass


def test_the_client_refuses_bad_windows_and_tls(front: GymSocketFrontEnd) -> None:
    with pytest.raises(InvalidArgumentError, match="busy_poll_us"):
        envwire.make(url(front), busy_poll_us=-5)
    import ssl

    with pytest.raises(InvalidArgumentError, match="not TLS"):
        GymSocketTransport(
            front.host, front.port, "CartPole-v1", tls=ssl.create_default_context(), busy_poll_us=10
        )


def test_busy_poll_returns_what_came_within_the_window_or_none() -> None:
    left, right = socket.socketpair()
    try:
        right.sendall(b"ready")
        assert busy_poll(lambda flags: left.recv(16, flags), 0.001) == b"ready"  # polled
        began = time.perf_counter()
        assert busy_poll(lambda flags: left.recv(16, flags), 0.002) is None  # nothing came
        assert 0.002 <= time.perf_counter() - began < 1.0
        right.close()
        assert busy_poll(lambda flags: left.recv(16, flags), 0.001) == b""  # EOF while polling
    finally:
        left.close()
