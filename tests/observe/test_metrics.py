"""Metrics move as scripted clients step through every front end; scrapes parse with
prometheus-client's own parser."""

from __future__ import annotations

import gc
import json
import threading
import time
import weakref
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import envwire
from envwire import messages as m
from envwire.app import Server
from envwire.errors import UnknownEnvError
from envwire.observe import Observability
from envwire.observe.hub import _FanOut
from envwire.observe.live import Activity
from envwire.registry import parse_env_arg
from envwire.runtime import make_worker
from envwire.session import Session
from envwire.session.contracts import BULK
from tests.arena.web.conftest import make_db
from tests.observe.conftest import samples_of, scrape, start, url, value

CART = "CartPole-v1"


def _play(env: envwire.RemoteEnv, steps: int) -> int:
    """Reset with seed 0 and take ``steps`` steps (resetting at episode ends); episodes ended."""
    env.reset(seed=0)
    ended = 0
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(0)
        if terminated or truncated:
            ended += 1
            env.reset()
    return ended


def _step_until_error(env: envwire.RemoteEnv, limit: int = 10) -> Exception | None:
    """Step with sampled actions until the env fails; the error (None if it never did)."""
    for _ in range(limit):
        try:
            env.step(env.action_space.sample())
        except Exception as exc:
            return exc
    return None


def _until(check: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("front_end", "label", "path"),
    [
        ("gym-socket", "gym-socket", CART),
        ("http", "openenv", f"envs/{CART}"),
        ("grpc", "dm_env_rpc", CART),
    ],
)
def test_steps_sessions_and_episodes_are_counted_per_front_end(
    server: Server, front_end: str, label: str, path: str
) -> None:
    metrics = url(server, "http", "metrics")
    address = url(server, front_end, path)
    if front_end == "http":
        address = "ws" + address[4:]
    env = envwire.make(address)
    try:
        ended = _play(env, 30)  # CartPole pushed left falls within 30 steps
        open_now = scrape(metrics)
        labels = {"front_end": label, "env": CART}
        assert value(open_now, "envwire_sessions", **labels) == 1
        assert value(open_now, "envwire_sessions_opened_total", **labels) >= 1
        assert value(open_now, "envwire_steps_total", **labels) == 30
        assert ended >= 1
        assert value(open_now, "envwire_episodes_total", env=CART) == ended
        step = {"front_end": label, "kind": "step"}
        assert value(open_now, "envwire_requests_total", **step) == 30
        assert value(open_now, "envwire_request_seconds_count", **step) == 30
        assert value(open_now, "envwire_request_seconds_bucket", **step, le="+Inf") == 30
        assert value(open_now, "envwire_request_seconds_sum", **step) > 0
        assert value(open_now, "envwire_requests_total", front_end=label, kind="reset") >= 1
    finally:
        env.close()
    _until(lambda: value(scrape(metrics), "envwire_sessions", **labels) == 0)


def test_a_vector_step_counts_every_copy(server: Server) -> None:
    vec = envwire.make_vec(url(server, "gym-socket", CART), 3)
    try:
        vec.reset(seed=0)
        for _ in range(5):
            vec.step(np.zeros(3, dtype=np.int64))
    finally:
        vec.close()
    samples = scrape(url(server, "http", "metrics"))
    assert value(samples, "envwire_steps_total", front_end="gym-socket", env=CART) == 15
    assert value(samples, "envwire_requests_total", front_end="gym-socket", kind="step") == 5


def test_errors_and_env_crashes_are_counted(server: Server) -> None:
    env = envwire.make(url(server, "gym-socket", CART))
    try:
        env.reset(seed=0)
        with pytest.raises(envwire.EnvwireError):
            env.step(7)  # not in Discrete(2)
    finally:
        env.close()
    for front_end, failing in (("gym-socket", "test/Raise-v0"), ("grpc", "test/Crash-v0")):
        env = envwire.make(url(server, front_end, failing))
        try:
            env.reset(seed=0)
            assert isinstance(_step_until_error(env), envwire.EnvwireError)
        finally:
            env.close()
    with pytest.raises(envwire.EnvwireError):
        envwire.make(url(server, "gym-socket", "NoSuchEnv-v0"))
    samples = scrape(url(server, "http", "metrics"))
    assert (
        value(samples, "envwire_errors_total", front_end="gym-socket", code="invalid_action") == 1
    )
    assert value(samples, "envwire_errors_total", front_end="gym-socket", code="env_error") == 1
    assert value(samples, "envwire_errors_total", front_end="gym-socket", code="unknown_env") == 1
    assert value(samples, "envwire_env_crashes_total", env="test/Raise-v0", reason="exception") == 1
    assert value(samples, "envwire_env_crashes_total", env="test/Crash-v0", reason="crash") == 1
    assert value(samples, "envwire_errors_total", front_end="dm_env_rpc", code="env_crashed") == 1


def test_labels_stay_bounded(server: Server) -> None:
    """No session ids, peers or client-chosen names become label values."""
    for name in ("Nope-v0", "Nada-v1", "x" * 40):
        with pytest.raises(envwire.EnvwireError):
            envwire.make(url(server, "gym-socket", name))
    env = envwire.make(url(server, "gym-socket", CART))
    env.close()
    samples = scrape(url(server, "http", "metrics"))
    envwire_labels = {
        (k, v) for (name, labels), _ in samples.items() if name.startswith("envwire_")
        for k, v in labels
    }  # fmt: skip
    assert {v for k, v in envwire_labels if k == "env"} <= {CART, "test/Raise-v0", ""}
    assert not {k for k, _ in envwire_labels} - {"front_end", "env", "kind", "code", "reason", "le"}


def test_the_process_collector_is_exported(server: Server) -> None:
    samples = scrape(url(server, "http", "metrics"))
    assert value(samples, "process_cpu_seconds_total") > 0
    assert value(samples, "process_resident_memory_bytes") > 0


def test_standalone_metrics_listener_when_http_is_off(tmp_path: Path) -> None:
    running = start(gym_socket=0, http=None, grpc=None, metrics=0)
    try:
        assert "http" not in running.addresses
        env = envwire.make(url(running, "gym-socket", CART))
        try:
            _play(env, 4)
        finally:
            env.close()
        host, port = running.addresses["metrics"]
        samples = scrape(f"http://{host}:{port}/metrics")
        assert value(samples, "envwire_steps_total", front_end="gym-socket", env=CART) == 4
    finally:
        running.shutdown()


def test_arena_actions_and_sessions_are_counted(tmp_path: Path) -> None:
    db = tmp_path / "arena.sqlite3"
    _, configs = make_db(db)
    running = start(gym_socket=None, http=0, grpc=None, arena_db=str(db))
    try:
        config = configs["dave"]  # plays "cart" (CartPole-v1)
        act = url(running, "http", "act/cart")
        body = {"protocol_version": 1, "agent": "dave", "pwd": config["pwd"]}
        reply = httpx.put(act, json=body, timeout=30).json()
        actions = [{"run": r["run"], "act_no": r["act_no"], "action": 0}
                   for r in reply["action_requests"]]  # fmt: skip
        assert actions
        reply = httpx.put(act, json={**body, "actions": actions}, timeout=30)
        assert reply.status_code == 200, reply.text
        samples = scrape(url(running, "http", "metrics"))
        assert value(samples, "envwire_arena_actions_total", env="cart") == len(actions)
        assert value(samples, "envwire_sessions_opened_total", front_end="arena", env=CART) >= 1
        assert value(samples, "envwire_steps_total", front_end="arena", env=CART) >= len(actions)
    finally:
        running.shutdown()


def test_front_end_errors_are_counted_once(server: Server) -> None:
    """Errors a session raised and errors the front end found itself, each counted once."""
    base = url(server, "http", f"envs/{CART}")
    reset = httpx.post(f"{base}/reset", json={"seed": 0}, timeout=30)
    session = {"envwire-session": reset.headers["envwire-session"]}
    bad_action = httpx.post(f"{base}/step", json={"action": {"action": 7}}, headers=session,
                               timeout=30)  # fmt: skip
    assert bad_action.status_code == 422
    malformed = httpx.post(f"{base}/step", content=b"{not json", headers=session, timeout=30)
    assert malformed.status_code == 422
    samples = scrape(url(server, "http", "metrics"))
    assert value(samples, "envwire_errors_total", front_end="openenv", code="invalid_action") == 1
    assert value(samples, "envwire_errors_total", front_end="openenv", code="invalid_argument") == 1


def test_recent_errors_keep_client_strings_short() -> None:
    """A 15 MB id once cost its whole size per error kept, and came back in the live JSON."""
    activity = Activity()
    huge = "x" * 15_000_000
    for _ in range(48):
        activity.note_error("grpc", huge, UnknownEnvError(f"no env {huge}"))
    kept = list(activity.errors)
    assert len(kept) == 48
    assert sum(len(json.dumps(entry)) for entry in kept) < 48 * 600


def test_the_fan_outs_steady_is_the_metrics_taps_own() -> None:
    """The session tells a step that ends no episode to the metrics tap directly (the live
    activity hears only the ends), in bulk; the counts are the same as through the fan-out
    once a reader asks for them."""
    observability = Observability()
    session = Session(
        parse_env_arg("CartPole-v1"), worker_factory=make_worker, observer=observability
    )
    assert session.tap is not None
    steady = session.tap.steady  # type: ignore[attr-defined]
    assert type(steady.__self__).__name__ == "_MetricsTap"
    assert session.tap.bulk_steady.__self__ is steady.__self__  # type: ignore[attr-defined]
    session.handle(m.Reset(seed=0))
    steps = episodes = 0
    for _ in range(60):
        reply = session.handle(m.Step(1))
        steps += 1
        assert isinstance(reply, m.StepReply)
        if reply.terminated or reply.truncated:
            episodes += 1
            session.handle(m.Reset())
    observability.tell_kept()
    counts = steady.__self__.counts
    assert (counts.steps, counts.episodes) == (steps, episodes)
    assert counts.kind("step").count == steps
    session.close()


def _vector_episodes(
    session: Session, mode: str
) -> tuple[int, int, list[tuple[int, float, int]], np.ndarray[Any, Any]]:
    """Two rounds (a reset, 150 batches of random actions) of a vector ``session``: the
    batches, the episodes ended, each ended episode's copy, return and length from the
    replies, and the copies' returns at the end."""
    n = session.num_envs
    rng = np.random.default_rng(1)
    batches = ended = 0
    returns, lengths = np.zeros(n), np.zeros(n, int)
    want: list[tuple[int, float, int]] = []
    for round_ in range(2):
        session.handle(m.Reset(seed=round_))
        returns[:], lengths[:] = 0, 0
        restart = np.zeros(n, bool)  # NextStep: the copy's next step is its reset
        for _ in range(150):
            reply = session.handle(m.Step(rng.integers(0, 2, n)))
            assert isinstance(reply, m.VectorStepReply)
            batches += 1
            returns += np.where(restart, 0.0, reply.rewards)
            lengths += ~restart
            done = np.logical_or(reply.terminations, reply.truncations) & ~restart
            for i in np.flatnonzero(done).tolist():
                want.append((i, float(returns[i]), int(lengths[i])))
                returns[i], lengths[i] = 0, 0
            ended += int(done.sum())
            restart = done if mode == "NextStep" else restart
    return batches, ended, want, returns


@pytest.mark.parametrize("summed", [3, 64])
@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_a_vector_sessions_counts_and_returns_are_exact(
    summed: int, mode: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Batches that end no episode reach the metrics and the live activity by their
    ``steady`` (the live activity adds their rewards every ``SUMMED`` batches, or when an
    episode ends), the others by their ``ended``: the step and episode counts and each ended
    episode's return and length are exactly those of the replies, across resets."""
    from envwire.observe import live

    monkeypatch.setattr(live, "SUMMED", summed)
    caplog.set_level("INFO", logger="envwire.events")
    n = 4
    session = Session(
        parse_env_arg("CartPole-v1"),
        worker_factory=make_worker,
        num_envs=n,
        autoreset_mode=mode,
        observer=Observability(),
    )
    assert session.tap is not None
    batches, ended, want, _ = _vector_episodes(session, mode)
    got = [
        (r.copy, r.episode_return, r.length)  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "event", "") == "episode_ended"
    ]
    assert got == want and len(want) > 20
    metrics = next(t for t in session.tap.taps if type(t).__name__ == "_MetricsTap")  # type: ignore[attr-defined]
    assert (metrics.counts.steps, metrics.counts.episodes) == (n * batches, ended)
    assert metrics.counts.kind("step").count == batches
    session.close()


def test_the_fan_out_tells_a_batchs_ended_copies_to_each_taps_ended_or_its_handled() -> None:
    """A tap with ``ended`` hears the copies; one without it hears the batch by ``handled``."""
    told: list[tuple[str, Any]] = []

    class Plain:
        def handled(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
            told.append(("handled", seconds))

    class Counting(Plain):
        def ended(
            self, request: m.Request, reply: m.Reply, seconds: float, copies: list[int]
        ) -> None:
            told.append(("ended", copies))

    reply = m.VectorStepReply(np.zeros(2), np.zeros(2), np.ones(2, bool), np.zeros(2, bool), {})
    request = m.Step(np.zeros(2, np.int64))
    for taps, want in (
        ((Counting(), Plain()), [("ended", [0, 1]), ("handled", 0.5)]),
        ((Plain(),), [("handled", 0.5)]),
        ((Counting(),), [("ended", [0, 1])]),
    ):
        told.clear()
        _FanOut(taps).ended(request, reply, 0.5, [0, 1])  # type: ignore[arg-type]
        assert told == want


def test_a_read_of_the_counts_tells_the_steps_kept_until_their_replies_were_sent() -> None:
    """A front end that has its sessions tell their taps once each reply is sent
    (``step(tell=False)``) leaves a step uncounted for a moment: ``tell_kept``, which the
    metrics and dashboard routes call before they read, counts it; it passes over a session
    whose lock a request holds (that request tells the kept step as it begins)."""
    observability = Observability()
    sessions = [
        Session(parse_env_arg("CartPole-v1"), worker_factory=make_worker, observer=observability)
        for _ in range(2)
    ]

    def steps() -> float:
        samples = samples_of(observability.metrics.render())
        return value(samples, "envwire_steps_total", front_end="", env=CART)

    for session in sessions:
        session.handle(m.Reset(seed=0))
        session.step(m.Step(1), tell=False)
    assert steps() == 0
    busy = sessions[1]
    assert busy._lock.acquire(timeout=5)  # a request in progress
    try:
        started = time.monotonic()
        observability.tell_kept()
        assert time.monotonic() - started < 1.0  # it did not wait for the busy session
        assert steps() == 1
    finally:
        busy._lock.release()
    observability.tell_kept()
    assert steps() == 2
    observability.tell_kept()  # nothing kept: nothing more counted
    assert steps() == 2
    for session in sessions:
        session.close()
    gone = [weakref.ref(session) for session in sessions]
    del sessions, session, busy
    gc.collect()
    # the observer holds no session alive, and forgets those that are gone
    assert all(ref() is None for ref in gone)
    assert not observability._sessions
    observability.tell_kept()
    assert steps() == 2


@pytest.mark.parametrize(
    ("front_end", "path"), [("gym-socket", CART), ("http", f"envs/{CART}"), ("grpc", CART)]
)
def test_a_step_reaches_the_tap_after_its_reply_is_sent(front_end: str, path: str) -> None:
    """A step over gym-socket, OpenEnv's WebSocket or dm_env_rpc is answered before its tap
    is told (``step(tell=False)``, then ``tell()``): a tap that waits on a step does not
    hold its reply back. Were the tap told first, the client's step would wait out the
    tap's 10 s."""
    running = start()
    release = threading.Event()
    waited: list[bool] = []
    opened = running.observe.opened

    class Waiting:
        def __init__(self, tap: Any) -> None:
            self.tap = tap

        def handled(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
            if isinstance(request, m.Step):
                waited.append(release.wait(10))
            self.tap.handled(request, reply, seconds)

        def failed(self, request: m.Request, error: Exception, seconds: float) -> None:
            self.tap.failed(request, error, seconds)

        def closed(self) -> None:
            self.tap.closed()

    running.observe.opened = lambda session: Waiting(opened(session))  # type: ignore[method-assign]
    try:
        address = url(running, front_end, path)
        env = envwire.make("ws" + address[4:] if front_end == "http" else address)
        try:
            env.reset(seed=0)
            env.step(0)
            assert waited == []  # answered; its tap still waits
            release.set()
            _until(lambda: waited == [True])
        finally:
            env.close()
    finally:
        release.set()
        running.shutdown()


_FRAMES = "frames=envwire.testing.envs:FramesEnv@inline"


def test_steady_steps_are_told_in_bulk_after_their_replies() -> None:
    """As the gym-socket front end steps (the tap told once the reply is out), steps that end
    no episode reach the metrics tap BULK at a time, and all of them as soon as a reader asks
    (``Observability.tell_kept``, which every dashboard and /metrics request calls first)."""
    observability = Observability()
    session = Session(parse_env_arg(_FRAMES), worker_factory=make_worker, observer=observability)
    assert session.tap is not None
    counts = session.tap.steady.__self__.counts  # type: ignore[attr-defined]
    session.handle(m.Reset(seed=0))

    dues: list[bool] = []

    def step() -> None:
        session.step(m.Step(np.int64(0)), tell=False)
        dues.append(session.due)
        if session.due:  # (as the front end asks)
            session.tell()

    for _ in range(BULK - 1):
        step()
    assert counts.steps == 0 == counts.kind("step").count  # kept for the bulk
    step()
    assert dues == [False] * (BULK - 1) + [True]  # the bulk is due at its last step
    assert counts.steps == BULK == counts.kind("step").count
    assert sum(counts.kind("step").buckets) == BULK and counts.kind("step").seconds > 0
    for _ in range(5):
        step()
    assert counts.steps == BULK
    observability.tell_kept()
    assert counts.steps == BULK + 5 == counts.kind("step").count
    session.close()


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_a_vector_sessions_batches_told_in_bulk_are_exact(
    mode: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """With session events not logged (the default), a vector session's batches reach the
    metrics and the live activity in bulk: nothing of the last ones before a reader asks
    (``tell_kept``), then the same counts, returns and lengths of each ended episode as told
    one batch at a time, across resets."""
    from envwire.observe import live

    caplog.set_level("WARNING", logger="envwire.events")
    told: list[tuple[int, float, int]] = []
    episode = live._LiveTap._episode

    def recorded(tap: Any, i: int, length: int, episode_return: float) -> None:
        told.append((i, episode_return, length))
        episode(tap, i, length, episode_return)

    monkeypatch.setattr(live._LiveTap, "_episode", recorded)
    n = 4
    observability = Observability()
    session = Session(
        parse_env_arg("CartPole-v1"),
        worker_factory=make_worker,
        num_envs=n,
        autoreset_mode=mode,
        observer=observability,
    )
    assert session.tap is not None and session.tap.bulk_batches is not None  # type: ignore[attr-defined]
    batches, ended, want, returns = _vector_episodes(session, mode)
    taps = session.tap.taps  # type: ignore[attr-defined]
    metrics = next(t for t in taps if type(t).__name__ == "_MetricsTap")
    activity = next(t for t in taps if type(t).__name__ == "_LiveTap")
    assert metrics.counts.steps < n * batches and len(told) < len(want)  # kept for the bulk
    observability.tell_kept()
    assert told == want and len(want) > 20
    assert (metrics.counts.steps, metrics.counts.episodes) == (n * batches, ended)
    assert metrics.counts.kind("step").count == batches
    assert activity.episodes == len(want) and activity.last_return == want[-1][1]
    assert activity.returns.tolist() == returns.tolist()
    session.close()


class _BulkTap:
    """A tap whose ``bulk_steady`` raises after it has counted."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self.handled_ = 0

    def handled(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
        self.handled_ += 1

    steady = handled

    def bulk_steady(self, seconds: list[float]) -> None:
        self.seconds += seconds
        raise RuntimeError("a broken observer")

    def failed(self, request: m.Request, error: Any, seconds: float) -> None:
        pass

    def closed(self) -> None:
        pass


def test_a_bulk_tap_that_raises_is_logged_and_the_session_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tap = _BulkTap()

    class Observer:
        def opened(self, session: Session) -> _BulkTap:
            return tap

        def refused(self, front_end: str, env_id: str, error: Any) -> None:
            pass

    session = Session(parse_env_arg(_FRAMES), worker_factory=make_worker, observer=Observer())
    session.handle(m.Reset(seed=0))
    for t in range(2 * BULK + 3):
        reply = session.step(m.Step(np.int64(0)), tell=False)
        session.tell()
        assert isinstance(reply, m.StepReply)
        assert np.asarray(reply.observation)[0, 0, 0] == (t + 1) % 4
    assert len(tap.seconds) == 2 * BULK and tap.handled_ == 1  # (the reset's)
    session.tell(blocking=False)  # a reader's: the rest
    assert len(tap.seconds) == 2 * BULK + 3
    assert caplog.text.count("a session's observer failed on steps") == 3
    session.close()
