"""Episodes gathered on the step path stay bounded in memory."""

from __future__ import annotations

from envwire import messages as m
from envwire.observe.episodes import Episode, EpisodeTap
from envwire.registry import parse_env_arg
from envwire.runtime import make_worker
from envwire.session import Session


def _tapped(**bounds: int) -> tuple[Session, list[Episode], list[str]]:
    session = Session(parse_env_arg("CartPole-v1"), worker_factory=make_worker)
    finished: list[Episode] = []
    dropped: list[str] = []
    session.tap = EpisodeTap(session, finished.append, lambda env, why: dropped.append(why),
                             **bounds)  # fmt: skip
    return session, finished, dropped


def _steps(session: Session, n: int) -> None:
    session.handle(m.Reset(seed=0))
    for t in range(n):
        reply = session.handle(m.Step(t % 2))  # alternating: CartPole stays up for a while
        assert isinstance(reply, m.StepReply) and not reply.terminated


def test_an_episode_past_max_steps_is_dropped_not_kept() -> None:
    session, finished, dropped = _tapped(max_steps=5)
    _steps(session, 8)
    assert dropped == ["too_long"] and finished == []
    assert session.tap is not None and session.tap.open == [None]  # type: ignore[attr-defined]
    session.close()


def test_an_episode_past_max_bytes_is_dropped_not_kept() -> None:
    session, finished, dropped = _tapped(max_bytes=4 * 16)  # four float32[4] observations
    _steps(session, 6)
    assert dropped == ["too_long"] and finished == []
    session.close()


def test_a_finished_episode_goes_to_the_sink() -> None:
    session, finished, dropped = _tapped()
    session.handle(m.Reset(seed=0))
    done, steps = False, 0
    while not done:
        reply = session.handle(m.Step(0))
        assert isinstance(reply, m.StepReply)
        done, steps = reply.terminated or reply.truncated, steps + 1
    (episode,) = finished
    assert len(episode) == steps and len(episode.observations) == steps + 1
    assert episode.seed == 0 and not dropped
    session.close()
