"""A vector session over several workers: :class:`VectorGroup` splits its N copies into
slices, one per worker (each a :class:`~envwire.runtime.hosts.VectorHost` of its slice, stepped
concurrently), and joins the slices back, so one session can use every core; seeds are offset
so the group equals one ``SyncVectorEnv``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from envwire.errors import EnvError, EnvTimeoutError, EnvwireError, InvalidArgumentError
from envwire.runtime.stepframes import StepPlan, join_infos, read_step_reply

__all__ = ["Slice", "VectorGroup", "split_sizes"]


class Slice(Protocol):
    """A worker holding one slice of a group's copies (a process or Ray worker hosting a
    ``VectorHost``): calls are started on every slice, then finished, so the slices step
    concurrently."""

    def send(self, method: str, *args: object) -> None:
        """Start ``host.method(*args)`` without waiting."""
        ...

    def finish(self, method: str, timeout: float | None) -> Any:
        """The result of the call :meth:`send` started: the host method's own, whose type
        depends on ``method`` (a pair of spaces, a reset pair, a step's five batches)."""
        ...

    def close(self) -> None:
        """Free the slice's envs and worker. Never raises."""
        ...


S = TypeVar("S", bound=Slice)


def split_sizes(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal positive sizes (fewer if total < parts)."""
    parts = max(1, min(parts, total))
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _slices(
    space: gymnasium.Space[Any], value: object, sizes: list[int], bounds: list[tuple[int, int]]
) -> list[object]:
    """Split a batch along its first axis into batches of ``sizes`` (``bounds``: each one's
    first and past-the-last index, worked out once per group).

    Arrays are split by view (basic slicing: no copy, no NumPy dispatch); other batches (dicts,
    tuples, texts) go through Gymnasium's own ``iterate``/``concatenate`` for the space.
    """
    total = bounds[-1][1]
    if isinstance(value, np.ndarray):
        if value.ndim == 0 or value.shape[0] != total:
            raise InvalidArgumentError(
                f"a batch needs a leading dimension of {total}, got shape {value.shape}"
            )
        return [value[start:stop] for start, stop in bounds]
    items = list(iterate(batch_space(space, total), value))
    parts: list[object] = []
    for (start, stop), size in zip(bounds, sizes, strict=True):
        parts.append(_batch(space, items[start:stop], size))
    return parts


def _batch(space: gymnasium.Space[Any], items: list[object], size: int) -> object:
    """``size`` samples of ``space`` as one batch, by Gymnasium's ``concatenate``."""
    # Gymnasium's annotations disagree: create_empty_array returns None for some spaces, and
    # concatenate takes that None without declaring it.
    empty: Any = create_empty_array(space, size)
    return concatenate(space, items, empty)


def _join(space: gymnasium.Space[Any], parts: list[object], sizes: list[int]) -> object:
    """The inverse of :func:`_slices`.

    Arrays are concatenated; the batches of ``Dict`` and ``Tuple`` spaces (dicts and tuples of
    their subspaces' batches: dm_control's observations) key by key, so that only leaves that
    are not arrays (texts, graphs, sequences) take Gymnasium's item-by-item way, which costs
    about a millisecond a batch for a two-key ``Dict`` of 8 copies.
    """
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts)  # type: ignore[arg-type]
    if isinstance(space, spaces.Dict) and all(
        isinstance(p, dict) and p.keys() == space.spaces.keys() for p in parts
    ):
        return {
            key: _join(sub, [p[key] for p in parts], sizes)  # type: ignore[index]
            for key, sub in space.spaces.items()
        }
    if isinstance(space, spaces.Tuple) and all(
        isinstance(p, tuple) and len(p) == len(space.spaces) for p in parts
    ):
        return tuple(
            _join(sub, [p[i] for p in parts], sizes)  # type: ignore[index]
            for i, sub in enumerate(space.spaces)
        )
    items = [
        item
        for part, size in zip(parts, sizes, strict=True)
        for item in iterate(batch_space(space, size), part)
    ]
    return _batch(space, items, sum(sizes))


class VectorGroup(Generic[S]):
    """N copies split over several workers (:class:`Slice`), stepped concurrently.

    Implements the worker interface (``call``/``close``). Seeds follow ``SyncVectorEnv``: copy
    ``i`` of the whole group gets ``seed + i``, so a group equals one ``SyncVectorEnv``.
    """

    def __init__(self, workers: list[S], sizes: list[int], timeout: float | None = 120.0) -> None:
        self.workers = workers
        self.sizes = sizes
        self.on_hang: Callable[[EnvTimeoutError], None] | None = None
        self._offsets = [int(o) for o in np.cumsum([0, *sizes[:-1]])]
        self._bounds = [(o, o + size) for o, size in zip(self._offsets, sizes, strict=True)]
        # for masked resets that skip a slice: its last observations, or None when they are
        # those slices of the last step's joined observations
        self._last_obs: list[object] | None = [None] * len(workers)
        self._last_joined: Any = None
        # a step's reply of a worker process may stay bytes until the slices are joined
        self._finishers: list[Callable[[float | None], Any]] = [
            getattr(w, "finish_step", None) or functools.partial(w.finish, "step") for w in workers
        ]
        # worker processes (every slice's) take a step's fixed frames as they are, cut from the
        # actions' bytes, and their replies are joined by offsets worked out once: the plan
        self._senders: list[Callable[[bytes], None]] | None = None
        self._plan: StepPlan | None = None
        senders = [getattr(w, "send_frame", None) for w in workers]
        if all(senders) and all(hasattr(w, "finish_into") for w in workers):
            self._senders = senders  # type: ignore[assignment]
            self._plan = StepPlan(sizes)
        # ... and read the replies of the layout the plan learned straight into their places
        self._readers: list[Any] = [getattr(w, "finish_into", None) for w in workers]
        workers[0].send("spaces")
        self.action_space: gymnasium.Space[Any]
        self.observation_space: gymnasium.Space[Any]
        self.action_space, self.observation_space = workers[0].finish("spaces", timeout)

    def call(self, method: str, *args: object, timeout: float | None) -> object:
        if method == "step" and len(args) == 1:
            return self.call_step(args[0], timeout=timeout)
        try:
            return self._call(method, args, timeout)
        except EnvwireError:
            raise
        except Exception as exc:  # joining or splitting batches of a malformed shape
            raise EnvError(f"vector {method} failed: {type(exc).__name__}: {exc}") from exc

    def call_step(self, actions: object, *, timeout: float | None) -> object:
        """``call("step", actions, timeout=timeout)`` without the dispatch by name (a
        session's every step)."""
        try:
            return self._step(actions, timeout)
        except EnvwireError:
            raise
        except Exception as exc:  # as call's
            raise EnvError(f"vector step failed: {type(exc).__name__}: {exc}") from exc

    def _call(self, method: str, args: tuple[object, ...], timeout: float | None) -> object:
        obs_space, sizes = self.observation_space, self.sizes
        match method, args:
            case "spaces", _:
                return self.action_space, self.observation_space
            case "reset", (seed, dict() | None as options):
                sent = []
                for i, (worker, offset, size) in enumerate(
                    zip(self.workers, self._offsets, sizes, strict=True)
                ):
                    part = _slice_options(options, offset, size)
                    if part and "reset_mask" in part and not np.any(part["reset_mask"]):
                        continue  # a masked reset that spares this whole slice
                    worker.send("reset", _slice_seed(seed, offset, size), part)
                    sent.append(i)
                infos: list[dict[str, Any]] = [{} for _ in self.workers]
                last = self._last_obs
                if last is None:
                    last = [self._last_joined[start:stop] for start, stop in self._bounds]
                else:
                    last = list(last)
                for i, (obs, info) in self._finish("reset", sent, timeout).items():
                    last[i], infos[i] = obs, info
                self._last_obs = last
                return _join(obs_space, last, sizes), join_infos(infos, sizes)
            case "close", _:
                self.close()
                return None
        raise InvalidArgumentError(f"unknown vector host method {method!r}")

    def _step(self, actions: object, timeout: float | None) -> object:
        plan, sizes = self._plan, self.sizes
        frames = plan.calls(actions) if plan is not None else None
        if frames is None:
            parts = _slices(self.action_space, actions, sizes, self._bounds)
            for worker, batch in zip(self.workers, parts, strict=True):
                worker.send("step", batch)
        else:
            assert self._senders is not None and plan is not None
            for send, frame in zip(self._senders, frames):  # noqa: B905 (as StepPlan.join's)
                send(frame)
            staged = plan.staged()
            if staged is not None:
                steps = self._finish_staged(staged, timeout)
                if steps.count(None) == len(steps):  # every reply read whole into its place
                    joined = plan.take()
                    self._last_obs, self._last_joined = None, joined[0]
                    return joined
                return self._joined(
                    [plan.frame(i) if s is None else s for i, s in enumerate(steps)]
                )
        return self._joined(self._finish_steps(timeout))

    def _joined(self, steps: list[Any]) -> object:
        """The slices' step replies (fixed frames or results) as one step's result."""
        plan, sizes = self._plan, self.sizes
        joined = plan.join(steps) if plan is not None else None
        if joined is not None:
            self._last_obs, self._last_joined = None, joined[0]
            return joined
        results = [read_step_reply(s) if type(s) is bytearray else s for s in steps]
        self._last_obs = [r[0] for r in results]
        return (
            _join(self.observation_space, [r[0] for r in results], sizes),
            np.concatenate([r[1] for r in results]),
            np.concatenate([r[2] for r in results]),
            np.concatenate([r[3] for r in results]),
            join_infos([r[4] for r in results], sizes),
        )

    def _finish(
        self,
        method: str,
        started: Sequence[int],
        timeout: float | None,
        finishers: list[Callable[[float | None], Any]] | None = None,
    ) -> dict[int, Any]:
        """Finish the calls started on ``started`` slices, last to first (a slice stepped in
        the caller's thread is last: it steps while the others' calls are under way), every
        one even after one failed, so no slice is left with an answer unread; by the slices'
        ``finishers`` when given (a step's), else by their ``finish``.

        Raises:
            EnvwireError: the first slice's error, in slice order.
        """
        results: dict[int, Any] = {}
        errors: dict[int, EnvwireError] = {}
        for i in reversed(started):
            try:
                if finishers is None:
                    results[i] = self.workers[i].finish(method, timeout)
                else:
                    results[i] = finishers[i](timeout)
            except EnvwireError as exc:
                errors[i] = exc
        if errors:
            raise errors[min(errors)]
        return results

    def _finish_steps(self, timeout: float | None) -> list[Any]:
        """:meth:`_finish` of a step started on every slice, as a list in slice order (the
        path of every batch: no index dict to build and read back).

        Raises:
            EnvwireError: the first slice's error, in slice order.
        """
        finishers = self._finishers
        steps: list[Any] = [None] * len(finishers)
        error: EnvwireError | None = None
        for i in range(len(finishers) - 1, -1, -1):  # last to first, as _finish
            try:
                steps[i] = finishers[i](timeout)
            except EnvwireError as exc:
                error = exc  # the lowest slice's error wins: it comes last
        if error is not None:
            raise error
        return steps

    def _finish_staged(
        self, staged: list[tuple[list[memoryview], int, bytes]], timeout: float | None
    ) -> list[Any]:
        """:meth:`_finish_steps` by the slices' ``finish_into`` (None for a reply read whole
        into the plan's staging buffer)."""
        readers = self._readers
        steps: list[Any] = [None] * len(readers)
        error: EnvwireError | None = None
        for i in range(len(readers) - 1, -1, -1):  # last to first, as _finish
            views, size, prefix = staged[i]
            try:
                steps[i] = readers[i](views, size, prefix, timeout)
            except EnvwireError as exc:
                error = exc  # the lowest slice's error wins: it comes last
        if error is not None:
            raise error
        return steps

    def hung(self, error: EnvTimeoutError) -> None:
        """A slice stepped in the caller's thread overran its timeout: tell the session."""
        if self.on_hang is not None:
            self.on_hang(error)

    def close(self) -> None:
        for worker in self.workers:
            worker.close()


def _slice_seed(seed: object, offset: int, size: int) -> int | list[int | None] | None:
    """One slice's seeds: ``seed + offset`` for one seed, its part of a list of per-copy seeds.

    Raises:
        InvalidArgumentError: neither a seed, a list of seeds nor None.
    """
    if seed is None:
        return None
    if isinstance(seed, int):
        return seed + offset
    if isinstance(seed, Sequence):
        return list(seed)[offset : offset + size]
    raise InvalidArgumentError(f"a seed must be an integer, a list of them or null, got {seed!r}")


def _slice_options(options: dict[str, Any] | None, offset: int, size: int) -> dict[str, Any] | None:
    """Reset options for one slice: Gymnasium's per-copy ``reset_mask`` is sliced too."""
    if not options or "reset_mask" not in options:
        return options
    mask = np.asarray(options["reset_mask"])
    return {**options, "reset_mask": mask[offset : offset + size]}
