"""``envwire arena export``: finished runs as a Minari dataset equal to the stored runs."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium
import minari
import numpy as np
import pytest

from envwire.arena.store import Store
from envwire.cli import main
from envwire.client import arena
from tests.arena.web.conftest import make_db
from tests.observe.conftest import start, url


def test_exported_runs_load_with_minari_and_replay_the_stored_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "arena.sqlite3"
    _, configs = make_db(db)
    server = start(gym_socket=None, http=0, grpc=None, arena_db=str(db))
    try:
        config = {**configs["dave"], "url": url(server, "http")}  # plays "cart" (CartPole-v1)
        arena.run(config, lambda percept: 0, run_limit=3, parallel_runs=False)
    finally:
        server.shutdown()
    out = tmp_path / "datasets"
    assert main(["arena", "export", "cart", str(out), "--db", str(db)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["exported"] == 3 and report["dataset"] == "arena/cart-v0"
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(out))
    dataset = minari.load_dataset("arena/cart-v0")
    store = Store(db)
    try:
        done = [r for r in store.runs("cart", finished=True) if r.how == "done"]
        runs = sorted(done, key=lambda r: r.id)
        assert dataset.total_episodes == len(runs) == 3
        for run, episode in zip(runs, dataset.iterate_episodes(), strict=True):
            steps = store.steps(run.id)
            assert len(episode) == len(steps)
            assert [json.loads(s.action) for s in steps] == list(episode.actions)
            np.testing.assert_allclose(episode.rewards, [s.reward for s in steps])
            local = gymnasium.make("CartPole-v1")
            obs, _ = local.reset(seed=run.seed)
            np.testing.assert_array_equal(episode.observations[0], obs)
            assert episode.terminations[-1] or episode.truncations[-1]
    finally:
        store.close()
