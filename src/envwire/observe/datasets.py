"""Finished episodes written as Minari datasets by a thread of their own (needs the ``minari``
extra); the datasets read back for the dashboard.

One dataset per env id under the recording directory (:mod:`envwire.observe.storage`), whose
path is made absolute once, when the writer is made. Sessions hand finished episodes to
:meth:`DatasetWriter.offer`; the writer thread takes every episode waiting at once and writes
them as one batch: each episode into its folder, then one metadata write per dataset counts
them all.

When episodes finish faster than the disk takes them, ``overflow`` decides:

- ``"wait"`` (the default): :meth:`DatasetWriter.offer` waits for room in the queue, so the
  recorded sessions slow down to the writer's pace and no episode handed over is lost, as long
  as the writer makes room within ``wait_timeout`` seconds (:data:`DEFAULT_WAIT_TIMEOUT`); a
  writer stuck longer (a hung disk) does not hold the session's step: the episode is dropped,
  counted (``wait_timeout``) and a WARNING says how many (at most one line per
  ``DROP_LOG_INTERVAL``);
- ``"drop"``: the episode is dropped and counted (``queue_full``), the session never waits,
  and a WARNING says how many were dropped (at most one line per ``DROP_LOG_INTERVAL``).

Episodes that cannot be written (the disk failed, the encoding failed) are counted in
:attr:`DatasetWriter.failed` and logged (the first with its traceback, later ones as counts),
so that a command can end with a non-zero status; :meth:`DatasetWriter.write`, the exports'
synchronous path, raises :class:`RecordError` instead.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gymnasium import spaces

from envwire.errors import EnvwireError
from envwire.observe.episodes import (
    DEFAULT_MAX_BYTES,
    DEFAULT_QUEUE_SIZE,
    DEFAULT_WAIT_TIMEOUT,
    Episode,
)
from envwire.optional import requires

with requires("minari", "envwire.observe.datasets (recording)"):
    from minari.dataset.minari_storage import MinariStorage
    from minari.serialization import serialize_space

    from envwire.observe.storage import Dataset, directory_size, encode, remove_leftovers

__all__ = [
    "DROP_LOG_INTERVAL",
    "OVERFLOW",
    "DatasetWriter",
    "RecordError",
    "list_episodes",
    "load_episode",
]

log = logging.getLogger("envwire.record")

#: What :meth:`DatasetWriter.offer` does when the queue is full (see the module docstring).
OVERFLOW = ("wait", "drop")
#: Seconds between two log lines about dropped or failed episodes.
DROP_LOG_INTERVAL = 10.0
_METADATA = "metadata.json"


class RecordError(EnvwireError):
    """An episode could not be written to its dataset (the disk, its budget, the encoding)."""

    code = "record_failed"


class _Tally:
    """Counts of episodes lost, per env, told to the log at most every ``interval`` seconds
    (the first at once), and what is left untold by :meth:`flush`."""

    def __init__(self, level: int, what: str, interval: float = DROP_LOG_INTERVAL) -> None:
        self.level, self.what, self.interval = level, what, interval
        self.total = 0
        self._untold: Counter[str] = Counter()
        self._last = -interval
        self._lock = threading.Lock()

    def note(self, env_id: str, told: bool = False) -> None:
        """Count one of ``env_id``'s; ``told``: the caller logged this one itself."""
        with self._lock:
            self.total += 1
            now = time.monotonic()
            if told:
                self._last = now
                return
            self._untold[env_id] += 1
            if now - self._last < self.interval:
                return
            self._last = now
            untold, self._untold = self._untold, Counter()
        self._tell(untold)

    def flush(self) -> None:
        with self._lock:
            untold, self._untold = self._untold, Counter()
        if untold:
            self._tell(untold)

    def _tell(self, untold: Counter[str]) -> None:
        counts = ", ".join(f"{n} of {env}" for env, n in sorted(untold.items()))
        log.log(self.level, "%s: %s (%d in all so far)", self.what, counts, self.total)


class DatasetWriter:
    """Writes finished episodes into Minari datasets under ``root`` from a thread of its own.

    Args:
        root: the recording directory (``MINARI_DATASETS_PATH`` for readers); relative to the
            working directory now.
        on_written: told the env id of each episode written (once it is counted on disk).
        on_drop: told ``(env_id, reason)`` of each episode not written: ``queue_full``
            (overflow ``drop`` only), ``wait_timeout`` (overflow ``wait``: no room came within
            ``wait_timeout``), ``disk_full``, ``unsupported`` (Minari cannot store its
            spaces), ``error`` (writing failed) or ``stopped`` (offered after :meth:`close`).
        queue_size: finished episodes that may wait for the writer.
        max_bytes: bytes ``root`` may hold; an episode that would pass it is dropped.
        author: the datasets' author field.
        overflow: ``"wait"`` or ``"drop"``: what a full queue does to :meth:`offer`.
        wait_timeout: seconds :meth:`offer` waits for room (overflow ``wait``) before it drops
            the episode.
        progress_every: seconds between two progress lines (INFO, logger ``envwire.record``:
            episodes written and dropped so far, bytes held), logged after a write once that
            long has passed; :meth:`close` logs a last one when anything was written or dropped.

    Raises:
        ValueError: a bound or ``overflow`` is out of range.
        OSError: ``root`` cannot be made, or is not writable.
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
        overflow: str = "wait",
        wait_timeout: float = DEFAULT_WAIT_TIMEOUT,
        progress_every: float = 10.0,
    ) -> None:
        if overflow not in OVERFLOW:
            raise ValueError(f"overflow must be one of {OVERFLOW}, got {overflow!r}")
        if not wait_timeout > 0:
            raise ValueError(f"the queue's wait timeout must be above 0, got {wait_timeout}")
        if queue_size < 1:
            raise ValueError(f"queue size must be at least 1, got {queue_size}")
        # Once, now: every later path is absolute, whatever the working directory becomes.
        self.root = Path(os.path.abspath(root))
        self.root.mkdir(parents=True, exist_ok=True)
        os.close(tempfile.mkstemp(dir=self.root, prefix=".probe-")[0])  # writable, or OSError
        for probe in self.root.glob(".probe-*"):
            probe.unlink(missing_ok=True)
        remove_leftovers(self.root)
        self.on_written = on_written
        self.on_drop = on_drop
        self.queue_size = queue_size
        self.max_bytes = max_bytes
        self.author = author
        self.overflow = overflow
        self.wait_timeout = wait_timeout
        #: Each env's Gymnasium spec as JSON (``envwire.observe.gymspec``), stored in its
        #: dataset when the dataset is made, for Minari's ``recover_environment()``.
        self.env_specs: dict[str, str] = {}
        self.used = directory_size(self.root)
        #: Episodes offered that had to wait for room in the queue (overflow ``wait``).
        self.waited = 0
        #: Episodes written, and episodes not written whatever the reason (progress lines).
        self.written = self.dropped = 0
        self.progress_every = progress_every
        self._reported = time.monotonic()
        self._failures = _Tally(logging.ERROR, "recording failed")
        self._drops = _Tally(logging.WARNING, "recording is behind; episodes dropped")
        self._timeouts = _Tally(
            logging.WARNING,
            f"the recorder's writer made no room within {wait_timeout:g} s; episodes dropped",
        )
        self.first_failure: str | None = None
        self._datasets: dict[str, Dataset] = {}
        self._unsupported: set[str] = set()
        self._queue: deque[Episode] = deque()
        self._cond = threading.Condition()
        self._busy = 0  # episodes offered and not yet written or dropped
        self._closing = self._stopped = False
        self._thread = threading.Thread(target=self._run, name="envwire-record", daemon=True)
        self._thread.start()

    @property
    def failed(self) -> int:
        """Episodes that could not be written (counted as ``error``)."""
        return self._failures.total

    @property
    def queue_full(self) -> int:
        """Episodes dropped because the queue was full (overflow ``drop``)."""
        return self._drops.total

    @property
    def wait_timeouts(self) -> int:
        """Episodes dropped because no room came within ``wait_timeout`` (overflow ``wait``)."""
        return self._timeouts.total

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
        """Queue ``episode`` for writing. When the queue is full, wait for room (overflow
        ``wait``, up to ``wait_timeout`` seconds: then the episode is dropped) or drop the
        episode at once (``drop``)."""
        reason = ""
        with self._cond:
            if len(self._queue) >= self.queue_size and not self._stopped:
                if self.overflow == "drop":
                    reason = "queue_full"
                else:
                    self.waited += 1
                    if not self._cond.wait_for(
                        lambda: len(self._queue) < self.queue_size or self._stopped,
                        self.wait_timeout,
                    ):
                        reason = "wait_timeout"
            if not reason and self._stopped:
                reason = "stopped"
            if not reason:
                self._queue.append(episode)
                self._busy += 1
                self._cond.notify_all()
        if reason:
            if reason == "queue_full":
                self._drops.note(episode.env_id)
            elif reason == "wait_timeout":
                self._timeouts.note(episode.env_id)
            else:
                log.warning("an episode of %s ended after the recorder stopped", episode.env_id)
            self._drop(episode.env_id, reason)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every queued episode is written or dropped; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._busy == 0, timeout)

    def close(self, timeout: float = 30.0) -> None:
        """Write what is queued (up to ``timeout`` seconds), then stop the thread; log the
        drops and failures not told yet."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout)
        self._drops.flush()
        self._timeouts.flush()
        self._failures.flush()
        if self.written or self.dropped:
            log.info("%s (closed)", self.progress_line())

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._queue) or self._closing)
                if not self._queue:
                    self._stopped = True
                    self._cond.notify_all()
                    return
                batch = list(self._queue)
                self._queue.clear()
                self._cond.notify_all()  # room for the sessions waiting to offer
            try:
                self._write_batch(batch)
            except BaseException:  # a bug of ours: the writer must go on
                log.exception("the recorder's writer failed on a batch of %d", len(batch))
            finally:
                with self._cond:
                    self._busy -= len(batch)
                    self._cond.notify_all()
            self._tick()

    def _write_batch(self, batch: list[Episode]) -> None:
        """Write the episodes, then count them in their datasets (one metadata write each)."""
        added: dict[str, list[str]] = {}
        for episode in batch:
            reason, error = self._add(episode)
            if error is not None and reason == "error":
                self._failed(episode.env_id, error)
            elif error is not None:
                log.warning("cannot record %s as a Minari dataset: %s", episode.env_id, error)
            if reason:
                self._drop(episode.env_id, reason)
            else:
                added.setdefault(self._datasets[episode.env_id].id, []).append(episode.env_id)
        for dataset in {d.id: d for d in self._datasets.values()}.values():
            envs = added.get(dataset.id, [])
            if not envs:
                continue
            pending = dataset.pending_bytes
            try:
                dataset.commit()
            except OSError as exc:  # those episodes' folders are gone again
                self.used -= pending
                for env_id in envs:
                    self._failed(env_id, exc)
                    self._drop(env_id, "error")
                continue
            for env_id in envs:
                self._written(env_id)

    def write(self, episode: Episode) -> None:
        """Write ``episode`` now, in the calling thread, and count it (exports: do not mix
        with :meth:`offer`); ``on_written`` is told.

        Raises:
            RecordError: it could not be written (saying why), or would pass ``max_bytes``.
        """
        env_id = episode.env_id
        reason, error = self._add(episode)
        if reason == "disk_full":
            raise RecordError(
                f"{self.root} holds {self.used} bytes: an episode of {env_id} would pass the "
                f"recording budget of {self.max_bytes} bytes"
            )
        if reason == "unsupported":
            raise RecordError(f"Minari cannot store episodes of {env_id}: {error}")
        if reason:
            raise RecordError(f"recording an episode of {env_id} failed: {error}") from error
        dataset = self._datasets[env_id]
        try:
            dataset.commit()
        except OSError as exc:
            raise RecordError(f"{dataset.id}: cannot write {dataset.path}: {exc}") from exc
        self._written(env_id)
        self._tick()

    def progress_line(self) -> str:
        """Episodes written and dropped so far, and the bytes the directory holds."""
        return (f"recording {self.root}: {self.written} episodes written, {self.dropped} "
                f"dropped, {self.used / 1e6:.1f} MB held")  # fmt: skip

    def _tick(self) -> None:
        now = time.monotonic()
        if now - self._reported >= self.progress_every and log.isEnabledFor(logging.INFO):
            self._reported = now
            log.info("%s", self.progress_line())

    def _written(self, env_id: str) -> None:
        self.written += 1  # the writer's thread (or the exporting one) alone counts these
        self.on_written(env_id)

    def _drop(self, env_id: str, reason: str) -> None:
        with self._cond:  # offer() drops from the sessions' threads
            self.dropped += 1
        self.on_drop(env_id, reason)

    def _add(self, episode: Episode) -> tuple[str, BaseException | None]:
        """Write ``episode``'s folder, uncounted: ('', None), or the reason it was not written
        (``unsupported``, ``disk_full``, ``error``) and the exception that said so."""
        env_id = episode.env_id
        if env_id in self._unsupported:
            return "unsupported", None
        if self.used >= self.max_bytes:
            return "disk_full", None
        try:
            dataset = self._datasets.get(env_id)
            if dataset is None:
                spec = self.env_specs.get(env_id)
                dataset = self._datasets[env_id] = Dataset(self.root, episode, self.author, spec)
                self.used = directory_size(self.root)
            data = encode(episode)
            if self.used + len(data) > self.max_bytes:
                return "disk_full", None
            self.used += dataset.add(episode, data)
        except (NotImplementedError, TypeError) as exc:  # spaces Minari cannot encode
            self._unsupported.add(env_id)
            return "unsupported", exc
        except Exception as exc:  # a disk or encoding failure must not end the writer
            return "error", exc
        return "", None

    def _failed(self, env_id: str, exc: BaseException) -> None:
        """Count a failure; the first is logged with its traceback, later ones as counts."""
        first = self.first_failure is None
        if first:
            self.first_failure = f"{type(exc).__name__}: {exc}"
            log.error("recording an episode of %s failed", env_id, exc_info=exc)
        self._failures.note(env_id, told=first)


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
