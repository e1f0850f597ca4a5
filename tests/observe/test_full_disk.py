"""The recorder on a disk that fills up: a small tmpfs, filled by a file of someone else's.
Failed writes leave nothing behind that keeps the disk full, and recording resumes by itself
once there is room again."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import gymnasium
import minari
import numpy as np
import pytest

from envwire.observe.datasets import DatasetWriter
from envwire.observe.episodes import Episode
from envwire.observe.storage import dataset_id

ENV = "CartPole-v1"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs (mounting needs root, or the capability)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)],
        check=False,
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip() or 'not root'}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def write_until_full(file: BinaryIO, size: int) -> int:
    """Write ``size`` bytes at a time until a write fails; that failure's errno."""
    while True:
        try:
            file.write(b"x" * size)
        except OSError as exc:
            return exc.errno or 0


def fill(disk: Path) -> Path:
    """Fill ``disk`` with a file until it has no room left."""
    filler = disk / "someone-else's-file"
    with open(filler, "wb", buffering=0) as file:
        for size in (65536, 512):  # then the last pages, in smaller writes
            assert write_until_full(file, size) == errno.ENOSPC
    return filler


def episode(steps: int = 50) -> Episode:
    space = gymnasium.spaces.Box(-1, 1, (64,), np.float32)
    played = Episode(ENV, space, gymnasium.spaces.Discrete(2))
    played.observations = [np.zeros(64, np.float32) for _ in range(steps + 1)]
    played.infos = [{} for _ in range(steps + 1)]
    played.actions = [0] * steps
    played.rewards = [1.0] * steps
    played.terminations = [False] * (steps - 1) + [True]
    played.truncations = [False] * steps
    return played


def leftovers(disk: Path, counted: int) -> list[str]:
    """What failed writes left: temporary folders and files, uncounted episode folders."""
    found = [str(p.relative_to(disk)) for p in disk.rglob(".*")]
    data = disk / dataset_id(ENV) / "data"
    if data.exists():
        found += [p.name for p in data.iterdir() if p.name.isdigit() and int(p.name) >= counted]
    return found


def loaded(disk: Path) -> int:
    os.environ["MINARI_DATASETS_PATH"] = str(disk)
    try:
        return int(minari.load_dataset(ENV).total_episodes)
    finally:
        del os.environ["MINARI_DATASETS_PATH"]


def test_a_full_disk_leaves_nothing_behind_and_recording_resumes(small_disk: Path) -> None:
    reasons: list[str] = []
    written: list[str] = []
    writer = DatasetWriter(
        small_disk, on_drop=lambda env, reason: reasons.append(reason), on_written=written.append
    )
    try:
        # The disk is full before the dataset exists: each creation fails.
        filler = fill(small_disk)
        free = os.statvfs(small_disk).f_bfree
        for _ in range(12):
            writer.offer(episode())
            assert writer.flush(60)
        assert reasons == ["error"] * 12 and not written
        assert leftovers(small_disk, 0) == []
        assert os.statvfs(small_disk).f_bfree == free  # nothing kept the disk fuller

        # Room again: every later episode is recorded.
        filler.unlink()
        for _ in range(20):
            writer.offer(episode())
        assert writer.flush(60)
        assert len(written) == 20 and len(reasons) == 12

        # Full again once the dataset exists: episodes' folders and commits fail, then resume.
        filler = fill(small_disk)
        for _ in range(5):
            writer.offer(episode())
            assert writer.flush(60)
        assert reasons == ["error"] * 17 and len(written) == 20
        assert leftovers(small_disk, 20) == []
        filler.unlink()
        for _ in range(5):
            writer.offer(episode())
        assert writer.flush(60)
        assert len(written) == 25
    finally:
        writer.close()
    assert loaded(small_disk) == 25


def test_leftovers_of_a_killed_writer_are_removed_at_start(tmp_path: Path) -> None:
    """A process killed while it created a dataset or replaced its metadata leaves a
    temporary folder or file: the next writer on that directory removes them."""
    (tmp_path / ".new-abc123" / "data").mkdir(parents=True)
    (tmp_path / ".new-abc123" / "data" / "metadata.json").write_text("{}")
    (tmp_path / "CartPole-v1" / "data").mkdir(parents=True)
    (tmp_path / "CartPole-v1" / "data" / ".tmp-xyz.json").write_text("{")
    DatasetWriter(tmp_path).close()
    assert [p.name for p in tmp_path.rglob(".*")] == []
