"""One env's recorded episodes on disk, in the layout Minari's Arrow storage reads (needs the
``minari`` extra).

A dataset is ``DIR/<dataset id>/data``: a ``metadata.json`` that counts the episodes
(``total_episodes``, ``total_steps``) and names the spaces, and a folder per episode,
``<n>/part-0.arrow`` (one Arrow IPC record batch: observations, actions, rewards, terminations,
truncations, infos) with ``<n>/metadata.json`` (its id, steps and seed). Minari reads episodes
``0 .. total_episodes - 1`` and nothing else.

Adding an episode writes its folder under the next number, uncounted: a reader, or a server
killed at that moment, does not see it. :meth:`Dataset.commit` then counts every episode added
since the last commit with one atomic replace of ``metadata.json``, so many episodes cost one
metadata write. A folder that was written but never counted (a crash between the two) is
removed when the dataset is opened again, and its number reused. A write that fails (a full
disk) removes what it wrote before it raises: the episode's folder, the temporary folder of a
dataset being created, the temporary metadata file; so a full disk costs the episodes that
came while it was full, and recording resumes by itself once there is room again.

The columns are encoded by Minari's own Arrow encoders, so what is written is what
``minari.load_dataset`` reads, for every space Minari stores.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import concatenate, create_empty_array

from envwire.observe.episodes import Episode
from envwire.optional import requires

with requires("minari", "envwire.observe.storage (recording)"):
    import minari
    import pyarrow as pa
    from minari.dataset._storages.arrow_storage import _encode_info, _encode_space
    from minari.dataset.minari_storage import MinariStorage

__all__ = ["Dataset", "dataset_id", "directory_size", "remove_leftovers", "write_json"]

_VERSION = re.compile(r"-v\d+$")
_NOT_ID = re.compile(r"[^-\w/]")
_METADATA = "metadata.json"
#: The prefixes of a dataset being created and of a metadata file being replaced.
_NEW, _TMP = ".new-", ".tmp-"
#: The file name Minari's Arrow storage gives an episode's record batch.
_PART = "part-0.arrow"


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


def remove_leftovers(root: Path) -> int:
    """Remove what writers killed mid-write left under ``root`` (datasets being created,
    metadata being replaced); how many were removed. Failed writes clean up after themselves;
    only a killed process leaves these."""
    removed = 0
    for pattern in (f"**/{_NEW}*", f"**/{_TMP}*.json"):
        for path in root.glob(pattern):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed += 1
    return removed


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Replace ``path`` atomically: a reader (or a crash) sees the old file or the new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_TMP, suffix=".json")
    try:
        with os.fdopen(fd, "w") as file:
            json.dump(data, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _stack(space: spaces.Space[Any], items: list[Any]) -> object:
    """The samples ``items`` of ``space`` as one batch (what Minari's encoders take)."""
    out = create_empty_array(space, n=len(items))
    # None for spaces without a batched form, which concatenate takes (and gives a tuple),
    # though gymnasium's annotation of it leaves None out.
    return concatenate(space, items, out)  # type: ignore[arg-type]


def _infos(infos: list[dict[str, Any]], frames: list[Any] | None) -> dict[str, Any]:
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
    return out


#: Spaces Minari stores as one fixed-size list of numbers per row.
_FIXED = spaces.Box | spaces.MultiDiscrete | spaces.MultiBinary


def _column(space: spaces.Space[Any], items: list[Any], rows: int) -> Any:
    """``items`` (samples of ``space``) as Minari's Arrow column of ``rows`` rows, zeros after
    the items (Minari pads actions to the observations' length with zeros).

    Box, MultiDiscrete, MultiBinary and Discrete, the spaces of most envs, are laid out here
    as Minari lays them out (a fixed-size list of the space's dtype per row; a plain array of
    it), without Minari's per-column padding copies; every other space goes to Minari's own
    encoder.
    """
    if isinstance(space, _FIXED | spaces.Discrete):
        width = int(np.prod(space.shape)) if isinstance(space, _FIXED) else 1
        values = np.zeros((rows, width), dtype=space.dtype)
        if items:
            values[: len(items)] = np.asarray(items).reshape(len(items), width)
        arrow_type = pa.from_numpy_dtype(space.dtype)
        if isinstance(space, spaces.Discrete):
            return pa.array(values.reshape(-1), type=arrow_type)
        list_type = pa.list_(arrow_type, list_size=width)
        return pa.FixedSizeListArray.from_arrays(values.reshape(-1), type=list_type)
    return _encode_space(space, _stack(space, items), pad=rows - len(items), jpeg_encoding=False)


def _padded(values: list[Any], rows: int, dtype: type[Any]) -> np.ndarray[Any, Any]:
    out = np.zeros(rows, dtype=dtype)
    out[: len(values)] = values
    return out


def encode(episode: Episode) -> bytes:
    """The episode as the Arrow IPC file Minari's Arrow storage reads (``part-0.arrow``).

    Observations and infos have one row per step plus the reset's; actions, rewards,
    terminations and truncations are padded with zeros to that length, as Minari pads them.

    Raises:
        Exception: whatever numpy, Minari or Arrow raise for data they cannot encode.
    """
    rows = len(episode.observations)
    columns: dict[str, Any] = {
        "observations": _column(episode.observation_space, episode.observations, rows),
        "actions": _column(episode.action_space, episode.actions, rows),
        "rewards": _padded(episode.rewards, rows, np.float64),
        "terminations": _padded(episode.terminations, rows, np.bool_),
        "truncations": _padded(episode.truncations, rows, np.bool_),
    }
    infos = _infos(episode.infos, episode.frames)
    if infos:
        columns["infos"] = _encode_info(infos)
    batch = pa.RecordBatch.from_pydict(columns)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue())


@dataclass
class _Added:
    """An episode written to its folder, not yet counted."""

    steps: int
    size: int


class Dataset:
    """One env's dataset under the recording directory (created with the first episode's
    spaces when it does not exist; appended to when it does).

    Args:
        root: the recording directory (absolute).
        episode: an episode of the env (its id and spaces).
        author: the dataset's author field, when it is created.
        env_spec: the env's Gymnasium spec as JSON, stored when the dataset is created (None:
            Minari's ``recover_environment()`` cannot make the env).

    Raises:
        OSError: the dataset cannot be created or read.
    """

    def __init__(
        self, root: Path, episode: Episode, author: str, env_spec: str | None = None
    ) -> None:
        self.id = dataset_id(episode.env_id)
        self.path = root / self.id / "data"
        if not (self.path / _METADATA).exists():
            self._create(episode, author, env_spec)
        self.metadata = MinariStorage.read_raw_metadata(self.path)
        self.episodes = int(self.metadata["total_episodes"])
        self.steps = int(self.metadata["total_steps"])
        for child in self.path.iterdir():  # written before a crash, never counted
            if child.is_dir() and child.name.isdigit() and int(child.name) >= self.episodes:
                shutil.rmtree(child, ignore_errors=True)
        self.size = directory_size(self.path)
        self._added: list[_Added] = []

    def _create(self, episode: Episode, author: str, env_spec: str | None) -> None:
        """Make the dataset in a temporary directory and rename it into place."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = Path(tempfile.mkdtemp(dir=self.path.parent, prefix=_NEW))
        try:
            MinariStorage.new(
                fresh,
                observation_space=episode.observation_space,
                action_space=episode.action_space,
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
            if env_spec is not None:  # Minari's recover_environment() makes the env from it
                metadata["env_spec"] = env_spec
            write_json(fresh / _METADATA, metadata)
            os.replace(fresh, self.path)
        except BaseException:  # a full disk, say: leave nothing that keeps it full
            shutil.rmtree(fresh, ignore_errors=True)
            raise

    @property
    def pending(self) -> int:
        """Episodes added since the last :meth:`commit`."""
        return len(self._added)

    @property
    def pending_bytes(self) -> int:
        """Bytes of the episodes added since the last :meth:`commit`."""
        return sum(a.size for a in self._added)

    def add(self, episode: Episode, data: bytes) -> int:
        """Write ``episode`` (``data`` is :func:`encode`'s) into the next episode folder,
        uncounted until :meth:`commit`; return the bytes written.

        Raises:
            OSError: writing failed (the folder is removed again).
        """
        number = self.episodes + len(self._added)
        folder = self.path / str(number)
        meta: dict[str, Any] = {"id": number, "total_steps": len(episode)}
        if episode.seed is not None:
            meta["seed"] = episode.seed
        text = json.dumps(meta).encode()
        try:
            try:
                folder.mkdir()
            except FileExistsError:  # a leftover under this number, never counted
                shutil.rmtree(folder)
                folder.mkdir()
            (folder / _PART).write_bytes(data)
            (folder / _METADATA).write_bytes(text)
        except OSError:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        size = len(data) + len(text)
        self._added.append(_Added(len(episode), size))
        return size

    def commit(self) -> int:
        """Count the episodes added since the last commit (one atomic metadata write); return
        how many.

        Raises:
            OSError: the metadata could not be written: those episodes are forgotten (their
                folders removed, their numbers reused), and the dataset holds what it held.
        """
        added, self._added = self._added, []
        if not added:
            return 0
        episodes = self.episodes + len(added)
        steps = self.steps + sum(a.steps for a in added)
        size = self.size + sum(a.size for a in added)
        metadata = dict(self.metadata)
        metadata.update(
            total_episodes=episodes, total_steps=steps, dataset_size=round(size / 1e6, 1)
        )
        try:
            write_json(self.path / _METADATA, metadata)
        except OSError:
            for number in range(self.episodes, episodes):
                shutil.rmtree(self.path / str(number), ignore_errors=True)
            raise
        self.metadata, self.episodes, self.steps, self.size = metadata, episodes, steps, size
        return len(added)
