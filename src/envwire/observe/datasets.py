"""Finished episodes written as Minari datasets, off the step path (needs the ``minari`` extra).

One dataset per env id under the recording directory, at ``DIR/<dataset id>/data`` (the
layout ``minari.load_dataset`` reads with ``MINARI_DATASETS_PATH=DIR``). A writer thread takes
episodes from a bounded queue; :meth:`DatasetWriter.offer` never blocks, and an episode that
does not fit (queue full, disk budget spent) is dropped and counted.

Crash safety: each episode is encoded by Minari's own storage into a staging directory, moved
into the dataset with one ``rename``, and only then counted in the dataset's ``metadata.json``,
which is replaced atomically. A process killed at any moment leaves every finished episode
loadable; at most the episodes still in the queue or being written are lost.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import concatenate, create_empty_array

from envwire.observe.episodes import DEFAULT_MAX_BYTES, DEFAULT_QUEUE_SIZE, Episode
from envwire.optional import requires

with requires("minari", "envwire.observe.datasets (recording)"):
    import minari
    from minari.data_collector.episode_buffer import EpisodeBuffer
    from minari.dataset.minari_storage import MinariStorage
    from minari.serialization import serialize_space

__all__ = [
    "DatasetWriter",
    "dataset_id",
    "directory_size",
    "list_episodes",
    "load_episode",
]

log = logging.getLogger("envwire.record")

_VERSION = re.compile(r"-v\d+$")
_NOT_ID = re.compile(r"[^-\w/]")
_METADATA = "metadata.json"
_STOP = object()


def dataset_id(env_id: str) -> str:
    """The Minari dataset id recording ``env_id`` ('CartPole-v1' stays as it is;
    'pkg.mod:Class' becomes 'pkg_mod_Class-v0')."""
    name = _NOT_ID.sub("_", env_id).strip("/") or "env"
    name = re.sub(r"/+", "/", name)
    return name if _VERSION.search(name) else name + "-v0"


def directory_size(path: Path) -> int:
    """Bytes of the files under ``path``."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` atomically: a reader (or a crash) sees the old file or the new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
    with os.fdopen(fd, "w") as file:
        json.dump(data, file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(tmp, path)


def _stack(space: spaces.Space[Any], items: list[Any]) -> object:
    """The samples ``items`` of ``space`` as one batch (what Minari's episode buffers hold)."""
    out = create_empty_array(space, n=len(items))
    # None for spaces without a batched form, which concatenate takes (and gives a tuple),
    # though gymnasium's annotation of it leaves None out.
    return concatenate(space, items, out)  # type: ignore[arg-type]


def _infos(infos: list[dict[str, Any]], frames: list[Any] | None) -> dict[str, Any] | None:
    """The infos Minari can store: keys every step has, with numbers, strings or same-shaped
    arrays; the frames, when kept, as ``render``."""
    keys = set(infos[0]).intersection(*infos[1:]) if infos else set()
    out: dict[str, Any] = {}
    for key in sorted(keys):
        values = [info[key] for info in infos]
        # Scalars go as lists: Minari stores an array per step with its shape, and cannot
        # read back the empty shape of a scalar.
        values = [v.item() if isinstance(v, np.ndarray | np.generic) and v.ndim == 0 else v
                  for v in values]  # fmt: skip
        if all(isinstance(v, bool | int | float | str) for v in values):
            if len({type(v) for v in values}) == 1:
                out[key] = values
        elif all(isinstance(v, np.ndarray) for v in values) and (
            len({(v.shape, v.dtype) for v in values}) == 1
        ):
            out[key] = np.stack(values)
    if frames is not None and len(frames) == len(infos):
        out["render"] = np.stack([np.asarray(f) for f in frames])
    return out or None


class _Dataset:
    """One env's dataset: its storage path and how many episodes it holds."""

    def __init__(self, root: Path, episode: Episode, author: str) -> None:
        self.id = dataset_id(episode.env_id)
        self.path = root / self.id / "data"
        self.staging = root / ".staging" / self.id
        self.observation_space = episode.observation_space
        self.action_space = episode.action_space
        if not (self.path / _METADATA).exists():
            self._create(episode, author)
        self.metadata = MinariStorage.read_raw_metadata(self.path)
        self.episodes = int(self.metadata["total_episodes"])
        self._staged = 0
        self.steps = int(self.metadata["total_steps"])
        for child in self.path.iterdir():  # an episode moved in before a crash, never counted
            if child.is_dir() and child.name.isdigit() and int(child.name) >= self.episodes:
                shutil.rmtree(child, ignore_errors=True)

    def _create(self, episode: Episode, author: str) -> None:
        """Make the dataset in a temporary directory and rename it into place."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = Path(tempfile.mkdtemp(dir=self.path.parent, prefix=".new-"))
        MinariStorage.new(
            fresh,
            observation_space=self.observation_space,
            action_space=self.action_space,
            data_format="arrow",
            jpeg_encoding=False,
        )
        metadata = MinariStorage.read_raw_metadata(fresh)
        metadata.update(
            dataset_id=self.id,
            minari_version=minari.__version__,
            author=[author],
            algorithm_name="envwire recording",
            description=f"Episodes of {episode.env_id} served by envwire.",
        )
        _write_json(fresh / _METADATA, metadata)
        os.replace(fresh, self.path)

    def stage(self, episode: Episode) -> int:
        """Encode ``episode`` into the staging directory; return its size in bytes.
        :meth:`commit` adds it to the dataset; :meth:`stage` again discards it.

        Raises:
            Exception: whatever Minari raised encoding it (the dataset is unchanged).
        """
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staging.mkdir(parents=True)
        storage = MinariStorage.new(
            self.staging,
            observation_space=self.observation_space,
            action_space=self.action_space,
            data_format="arrow",
            jpeg_encoding=False,
        )
        buffer = EpisodeBuffer(
            id=self.episodes,
            seed=episode.seed,
            observations=_stack(self.observation_space, episode.observations),
            actions=_stack(self.action_space, episode.actions),
            rewards=list(episode.rewards),
            terminations=list(episode.terminations),
            truncations=list(episode.truncations),
            infos=_infos(episode.infos, episode.frames),
        )
        storage.update_episodes([buffer])
        self._staged = len(episode)
        return directory_size(self.staging / str(self.episodes))

    def commit(self) -> None:
        """Move the staged episode into the dataset, then count it in the metadata."""
        os.replace(self.staging / str(self.episodes), self.path / str(self.episodes))
        self.episodes += 1
        self.steps += self._staged
        self.metadata.update(
            total_episodes=self.episodes,
            total_steps=self.steps,
            dataset_size=round(directory_size(self.path) / 1e6, 1),
        )
        _write_json(self.path / _METADATA, self.metadata)


class DatasetWriter:
    """Writes finished episodes into Minari datasets under ``root`` from a thread of its own.

    Args:
        root: the recording directory (``MINARI_DATASETS_PATH`` for readers).
        on_written: told the env id of each episode written.
        on_drop: told ``(env_id, reason)`` of each episode dropped: ``queue_full``,
            ``disk_full``, ``unsupported`` (Minari cannot store its spaces) or ``error``.
        queue_size: finished episodes that may wait for the writer.
        max_bytes: bytes ``root`` may hold; an episode that would pass it is dropped.
        author: the datasets' author field.
        progress_every: seconds between two progress lines (INFO, logger ``envwire.record``:
            episodes written and dropped so far, bytes held), logged after a write once that
            long has passed; :meth:`close` logs a last one when anything was written or dropped.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        on_written: Callable[[str], None] = lambda env: None,
        on_drop: Callable[[str, str], None] = lambda env, reason: None,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        max_bytes: int = DEFAULT_MAX_BYTES,
        author: str = "envwire",
        progress_every: float = 10.0,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.on_written = on_written
        self.on_drop = on_drop
        self.max_bytes = max_bytes
        self.author = author
        self.used = directory_size(self.root)
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._datasets: dict[str, _Dataset] = {}
        self._unsupported: set[str] = set()
        self._idle = threading.Condition()
        self._busy = 0
        self.written = self.dropped = 0  # counted for the progress lines
        self.progress_every = progress_every
        self._reported = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="envwire-record", daemon=True)
        self._thread.start()

    @staticmethod
    def supports(observation_space: spaces.Space[Any], action_space: spaces.Space[Any]) -> bool:
        """Whether Minari can store episodes with these spaces."""
        try:
            serialize_space(observation_space)
            serialize_space(action_space)
        except (NotImplementedError, TypeError, ValueError, AttributeError):
            return False
        return True

    def offer(self, episode: Episode) -> None:
        """Queue ``episode`` for writing, or drop it (``queue_full``) at once."""
        with self._idle:
            self._busy += 1
        try:
            self._queue.put_nowait(episode)
        except queue.Full:
            self._done()
            self._drop(episode.env_id, "queue_full")

    def _done(self) -> None:
        with self._idle:
            self._busy -= 1
            self._idle.notify_all()

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every queued episode is written or dropped; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: self._busy == 0, timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued (up to ``timeout`` seconds), then stop the thread."""
        self.flush(timeout)
        if self.written or self.dropped:
            log.info("%s (closed)", self.progress_line())
        try:
            self._queue.put(_STOP, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            episode = self._queue.get()
            if episode is _STOP:
                return
            try:
                if self._write(episode):
                    self.on_written(episode.env_id)
            finally:
                self._done()
            self._tick()

    def write(self, episode: Episode) -> bool:
        """Write ``episode`` now, in the calling thread (exports: do not mix with
        :meth:`offer`); whether it was written (drops go to ``on_drop`` as usual)."""
        written = self._write(episode)
        if written:
            self.on_written(episode.env_id)
        self._tick()
        return written

    def progress_line(self) -> str:
        """Episodes written and dropped so far, and the bytes the directory holds."""
        return (f"recording {self.root}: {self.written} episodes written, {self.dropped} "
                f"dropped, {self.used / 1e6:.1f} MB held")  # fmt: skip

    def _tick(self) -> None:
        now = time.monotonic()
        if now - self._reported >= self.progress_every and log.isEnabledFor(logging.INFO):
            self._reported = now
            log.info("%s", self.progress_line())

    def _drop(self, env_id: str, reason: str) -> None:
        with self._idle:  # offer() drops from the callers' threads
            self.dropped += 1
        self.on_drop(env_id, reason)

    def _write(self, episode: Episode) -> bool:
        env_id = episode.env_id
        if env_id in self._unsupported:
            self._drop(env_id, "unsupported")
            return False
        if self.used >= self.max_bytes:
            self._drop(env_id, "disk_full")
            return False
        try:
            dataset = self._datasets.get(env_id)
            if dataset is None:
                dataset = self._datasets[env_id] = _Dataset(self.root, episode, self.author)
                self.used = directory_size(self.root)
            size = dataset.stage(episode)
            if self.used + size > self.max_bytes:
                shutil.rmtree(dataset.staging, ignore_errors=True)
                self._drop(env_id, "disk_full")
                return False
            dataset.commit()
        except (NotImplementedError, TypeError) as exc:
            log.warning("cannot record %s as a Minari dataset: %s", env_id, exc)
            self._unsupported.add(env_id)
            self._drop(env_id, "unsupported")
            return False
        except Exception:  # a disk or encoding failure must not end the writer
            log.exception("recording an episode of %s failed", env_id)
            self._drop(env_id, "error")
            return False
        self.used += size
        self.written += 1
        return True


def list_episodes(root: Path, limit: int = 100) -> dict[str, list[dict[str, Any]]]:
    """The recorded episodes under ``root``: per dataset id, the last ``limit`` episodes'
    ``id`` and ``steps``."""
    found: dict[str, list[dict[str, Any]]] = {}
    for metadata_path in sorted(root.glob("**/data/" + _METADATA)):
        if any(part.startswith(".") for part in metadata_path.relative_to(root).parts):
            continue
        try:
            metadata = MinariStorage.read_raw_metadata(metadata_path.parent)
        except (OSError, ValueError):
            continue
        total = int(metadata.get("total_episodes", 0))
        rows = []
        for n in range(max(0, total - limit), total):
            try:
                info = json.loads((metadata_path.parent / str(n) / _METADATA).read_text())
            except (OSError, ValueError):
                continue
            rows.append({"id": n, "steps": int(info.get("total_steps", 0))})
        found[str(metadata.get("dataset_id", metadata_path.parent.parent.name))] = rows
    return found


def load_episode(root: Path, dataset: str, number: int) -> dict[str, Any]:
    """One recorded episode as Minari reads it: ``observations``, ``actions``, ``rewards``,
    ``terminations``, ``truncations`` and ``infos``.

    Raises:
        KeyError: no such dataset or episode under ``root``.
    """
    path = (root / dataset / "data").resolve()
    if root.resolve() not in path.parents or not (path / _METADATA).exists():
        raise KeyError(dataset)
    storage = MinariStorage.read(path)
    if not 0 <= number < storage.total_episodes:
        raise KeyError(number)
    return dict(next(iter(storage.get_episodes([number]))))
