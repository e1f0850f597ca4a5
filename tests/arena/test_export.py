"""``envwire arena export``: finished runs as a Minari dataset equal to the stored runs."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import gymnasium
import minari
import numpy as np
import pytest

from envwire.arena.admin import ArenaAdmin
from envwire.arena.aisys.database import read_database
from envwire.arena.aisys.migrate import migrate
from envwire.arena.export import export_runs
from envwire.arena.progress import LOGGER
from envwire.arena.store import Store
from envwire.cli import main
from envwire.client import arena
from envwire.runtime import make_worker
from tests.arena.aisys.original_db import OriginalDB
from tests.arena.web.conftest import make_db
from tests.observe.conftest import start, url


def played(tmp_path: Path, runs: int = 3) -> Path:
    """An arena database where dave played ``runs`` runs of "cart" (CartPole-v1)."""
    db = tmp_path / "arena.sqlite3"
    _, configs = make_db(db)
    server = start(gym_socket=None, http=0, grpc=None, arena_db=str(db))
    try:
        config = {**configs["dave"], "url": url(server, "http")}
        arena.run(config, lambda percept: 0, run_limit=runs, parallel_runs=False)
    finally:
        server.shutdown()
    return db


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_exported_runs_load_with_minari_and_replay_the_stored_runs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    relative: bool,
) -> None:
    db = played(tmp_path)
    out = tmp_path / "datasets"
    if relative:  # a relative folder once wrote nothing (every path doubled) and exited 0
        monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert main(["arena", "export", "cart", "datasets" if relative else str(out),
                     "--db", str(db)]) == 0  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert report["exported"] == 3 and report["dataset"] == "arena/cart-v0"
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert lines[-1].startswith("export cart: 3/3 runs replayed (100%), 3 episodes written")
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


def test_runs_carried_over_from_another_server_are_not_exported(tmp_path: Path) -> None:
    """Their seeds are not known: a replay would not be the run that was played."""
    original = OriginalDB(tmp_path / "aisysprojserver.db")
    original.env("nim", "simple_nim.environment:Environment", {"strong": True})
    original.account("nim", "alice", "pw-a")
    original.finish(1, "nim", "alice", {"remaining": 0}, [(2, 3), (1, 1), (3, None)],
                    outcome=1, window=10)  # fmt: skip
    original.close()
    store = Store(tmp_path / "arena.sqlite3")
    admin = ArenaAdmin(store)
    migrate(read_database(original.path), store, env_map={"nim": "envwire/Nim-v0"},
            make_mapped_env=lambda env, env_id: admin.env_row(env.name, env_id))  # fmt: skip
    assert store.run(1) is not None
    assert export_runs(store, "nim", tmp_path / "datasets", worker_factory=make_worker) == 0
    store.close()


def test_an_episode_that_cannot_be_written_makes_the_export_exit_non_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = played(tmp_path, runs=2)

    def broken(episode: object) -> bytes:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("envwire.observe.datasets.encode", broken)
    assert main(["arena", "export", "cart", str(tmp_path / "ds"), "--db", str(db)]) == 2
    captured = capsys.readouterr()
    assert "No space left on device" in captured.err and "cart" in captured.err
    assert captured.out == ""  # no report claiming an export


def test_a_file_in_place_of_the_directory_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = played(tmp_path, runs=1)
    (tmp_path / "ds").write_text("not a folder")
    assert main(["arena", "export", "cart", str(tmp_path / "ds"), "--db", str(db)]) == 2
    assert "cannot write datasets under" in capsys.readouterr().err
