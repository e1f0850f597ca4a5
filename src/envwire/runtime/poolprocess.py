""":class:`PoolProcess`: the server's side of one worker process of a
:class:`~envwire.runtime.pool.WorkerPool` (its pipes, who reads them, its calls in flight, and
what its death means for them). The process runs :func:`~envwire.runtime.poolmain.pool_main`;
the frames on its pipes are described there.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pickle
import select
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from envwire.errors import EnvCrashedError, EnvError, EnvTimeoutError, EnvwireError
from envwire.runtime.pipe import FrameReader, dumps, frame, pipes, write_all
from envwire.runtime.poolmain import REPLY, REQUEST, pool_main
from envwire.runtime.process import worker_context
from envwire.watchdog import Watchdog

__all__ = ["STOP_GRACE", "WATCHDOG", "PoolProcess"]

#: Seconds a worker process has to finish its queue and close its envs when the pool closes.
STOP_GRACE = 5.0

#: Watches the call each pool process is running (one thread for every pool of this process).
WATCHDOG = Watchdog(name="envwire-pool-watchdog")


class _Call:
    """One request in flight. Its caller either waits on ``done`` (``blocked``: whoever settles
    the call releases it) or reads the pipe itself (``lead``); a call nobody waits for
    (``free``, ``stop``) is neither."""

    __slots__ = (
        "blocked",
        "done",
        "env_id",
        "lead",
        "method",
        "ok",
        "settled",
        "started",
        "timeout",
        "value",
    )

    def __init__(self, env_id: str, method: str, timeout: float | None) -> None:
        self.env_id, self.method, self.timeout = env_id, method, timeout
        self.started: float | None = None  # when the process began it (None: still queued)
        self.ok = False
        self.value: object = None
        self.settled = False
        self.blocked = False  # its caller waits on `done`
        self.lead = False  # its caller holds the reading role
        self.done = threading.Lock()
        self.done.acquire()

    def settle(self, ok: bool, value: object) -> None:
        self.ok, self.value, self.settled = ok, value, True
        if self.blocked:
            self.blocked = False
            self.done.release()


class PoolProcess:
    """One worker process of a pool, with its pipes, its calls in flight and the thread that
    watches it.

    Sending combines: a caller queues its frame and its call under ``_lock``; if no thread is
    writing, it becomes the writer and writes whatever is queued (its frame and those queued
    meanwhile by others, in one system call) until nothing is left. So no caller waits for the
    request pipe while another writes, a busy pipe takes many frames a write, and the pipe's
    order is the queue's. ``_lock`` guards the queue, the outbox, the slots, the reading role and
    ``lost`` and is never held across a read or a write, so a reader can always settle calls
    while the writer waits on a full pipe.

    Reading is a role that one thread holds at a time (``_reading``), and preferably a caller:
    one that finds nobody reading reads the replies itself, settling the calls of others as
    their replies come, until its own has come. Then it passes the role to the oldest call
    whose caller waits (waking that caller to read), or, when only calls nobody waits for are
    left, to the process's own thread. So a session alone on its process gets its reply in
    its own thread, with no hand-off between threads (one wake-up and one switch of the
    interpreter lock less a call), and under load each reply still wakes only its own caller.
    The process's thread also watches for the process's death, which it reports to every
    call in flight (and, through the pool, takes the process out of placement) even while no
    call is in flight.
    """

    def __init__(
        self,
        index: int,
        on_exit: Callable[[PoolProcess], None],
        protected: tuple[str, ...] = (),
    ) -> None:
        ctx = worker_context()
        self._conn, self._requests, child_requests, child_replies = pipes(ctx)
        self.process = ctx.Process(
            target=pool_main,
            args=(child_requests, child_replies, protected),
            daemon=True,
            name=f"envwire-pool-{index}",
        )
        self.process.start()
        child_requests.close()
        child_replies.close()
        self.pid = self.process.pid
        self.slots: dict[int, str] = {}  # slot -> env id, of the sessions hosted
        self.lost: str | None = None  # why the process is gone, once it is
        self._fd = self._conn.fileno()  # the replies' (read)
        self._out = self._requests.fileno()  # the requests' (write)
        self._reader = FrameReader(self._fd)  # used by the holder of the reading role only
        self._calls: OrderedDict[int, _Call] = OrderedDict()
        self._outbox: list[bytes] = []
        self._writing = False  # a caller is writing the outbox
        self._reading = False  # some thread holds the reading role
        self._watcher_turn = False  # the role is the watching thread's
        self._exit_seen = False  # the pipe hit EOF: the pipe may close once no one writes
        self._stopping = False  # stop() sent its request: an exit with code 0 is no crash
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._on_exit = on_exit
        self._wake_read, self._wake_write = os.pipe()
        watcher = threading.Thread(target=self._watch, name=f"envwire-pool-{index}", daemon=True)
        watcher.start()
        WATCHDOG.watch(self)

    @property
    def load(self) -> int:
        """Sessions hosted."""
        return len(self.slots)

    def call(
        self, slot: int, env_id: str, method: str, args: tuple[object, ...], timeout: float | None
    ) -> Any:
        """Send a request and wait for its reply (``timeout`` None: as long as it takes).

        Raises:
            EnvwireError: what the call raised in the process; EnvCrashedError when the process
                is gone or dies meanwhile; EnvTimeoutError when this call hung.
        """
        call = self._send(slot, env_id, method, args, timeout, attended=True)
        if not call.lead:
            # released once: by whoever settles the call, or by a reader passing it the role
            call.done.acquire()
        if call.lead:
            self._read_while(lambda: not call.settled)
        if call.ok:
            return call.value
        assert isinstance(call.value, BaseException)
        raise call.value

    def _send(
        self,
        slot: int,
        env_id: str,
        method: str,
        args: tuple[object, ...],
        timeout: float | None,
        *,
        attended: bool = False,
    ) -> _Call:
        try:
            payload = dumps((method, args))
        except Exception as exc:
            message = f"{env_id}: {method}'s arguments cannot be sent to the env: {exc}"
            raise EnvError(message) from exc
        call = _Call(env_id, method, timeout)
        wake = False
        with self._lock:
            if self.lost is not None:
                message = f"{env_id}: the pool worker process hosting this env {self.lost}"
                raise EnvCrashedError(message)
            call_id = next(self._ids)
            if not self._calls:  # an idle process starts it at once
                call.started = time.monotonic()
            self._calls[call_id] = call
            if not self._reading:  # nobody reads: the caller will, else the watching thread
                self._reading = True
                call.lead = attended
                wake = self._watcher_turn = not attended
            elif attended:
                call.blocked = True
            self._outbox.append(frame(REQUEST.pack(call_id, slot), payload))
            writer = not self._writing
            self._writing = True
        if wake:
            self._wake()
        if writer:
            self._write()
        return call

    def _write(self) -> None:
        """Write the outbox until it is empty (the one writer; see the class docstring)."""
        while True:
            with self._lock:
                frames, self._outbox = self._outbox, []
                if not frames or self.lost is not None:
                    self._writing = False
                    if self.lost is not None:
                        self._close_pipe()
                    return
            # if the process is gone, the reader sees EOF and settles the calls
            with contextlib.suppress(OSError):
                write_all(self._out, frames[0] if len(frames) == 1 else b"".join(frames))

    def _close_pipe(self) -> None:
        """Close the parent's end once the process is lost and no one writes or reads (under
        ``_lock``)."""
        if not self._writing and not self._reading and self._exit_seen and not self._conn.closed:
            self._conn.close()
            self._requests.close()

    def host(self, slot: int, env_id: str) -> None:
        """Count ``slot`` as hosted here (placement reserves it before the env is made)."""
        with self._lock:
            self.slots[slot] = env_id

    def free(self, slot: int, timeout: float | None) -> None:
        """Close the env in ``slot`` without waiting; its session no longer counts. Never raises."""
        with self._lock:
            env_id = self.slots.pop(slot, None)
            if env_id is None or self.lost is not None:
                return
        with contextlib.suppress(EnvwireError):  # the process died meanwhile: the env is gone
            self._send(slot, env_id, "free", (), timeout)

    def count(self, timeout: float = 30.0) -> int:
        """How many envs the process holds now (after every request sent before this one)."""
        return int(self.call(0, "", "count", (), timeout))

    # --- reading (one thread at a time: the holder of the reading role) ---------------------

    def _read_while(self, more: Callable[[], bool]) -> None:
        """Read and settle replies while ``more()`` (and until EOF), then pass the role on."""
        try:
            while more() and self._read_once():
                pass
        finally:
            self._pass_role()

    def _pass_role(self) -> None:
        """Give up the reading role: to the oldest call whose caller waits, else (calls nobody
        waits for are in flight) to the watching thread, else to nobody."""
        wake = False
        with self._lock:
            if not self._exit_seen:
                for waiting in self._calls.values():
                    if waiting.blocked:
                        waiting.blocked, waiting.lead = False, True
                        waiting.done.release()
                        return
                wake = self._watcher_turn = bool(self._calls)
            if not wake:
                self._reading = False
                self._close_pipe()
        if wake:
            self._wake()

    def _read_once(self) -> bool:
        """Read the replies that have come (waiting for one) and settle their calls; at EOF,
        settle every call left as lost and return False."""
        try:
            replies = self._reader.read()
        except OSError:
            replies = []
        if not replies:
            self._exited()
            return False
        values = []
        for reply in replies:
            call_id, ok = REPLY.unpack_from(reply)
            try:
                value = pickle.loads(memoryview(reply)[REPLY.size :])
            except Exception as exc:
                message = f"a reply from the env's pool worker process is unreadable: {exc}"
                ok, value = False, EnvError(message)
            values.append((call_id, ok, value))
        now = time.monotonic()
        with self._lock:
            settled = [(self._calls.pop(i, None), ok, value) for i, ok, value in values]
            if self._calls:  # the process goes on with the next call in the queue now
                head = next(iter(self._calls.values()))
                if head.started is None:
                    head.started = now
        for call, ok, value in settled:
            if call is not None:
                call.settle(ok, value)
        return True

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # the watching thread has ended: nothing to wake
            os.write(self._wake_write, b"\0")

    def _watch(self) -> None:
        """The process's own thread: read when the role is passed to it, and when the process
        dies, read what is left and settle every call."""
        poller = select.poll()
        sentinel = self.process.sentinel
        poller.register(sentinel, select.POLLIN)
        poller.register(self._wake_read, select.POLLIN)
        try:
            while True:
                ready = {fd for fd, _ in poller.poll()}
                if self._wake_read in ready:
                    os.read(self._wake_read, 4096)
                with self._lock:
                    turn, self._watcher_turn = self._watcher_turn, False
                if turn:  # only calls nobody waits for are in flight: read while that lasts
                    self._read_while(self._unattended)
                if sentinel in ready:
                    self._read_to_the_end()
                    return
        finally:
            os.close(self._wake_read)
            os.close(self._wake_write)

    def _unattended(self) -> bool:
        """Whether calls are in flight and none has a caller waiting (who should read)."""
        with self._lock:
            return bool(self._calls) and not any(c.blocked for c in self._calls.values())

    def _read_to_the_end(self) -> None:
        """The process has ended: take the role when it is free and read to EOF (a caller
        holding it reads to EOF itself)."""
        while True:
            with self._lock:
                if self._exit_seen:
                    return
                if not self._reading or self._watcher_turn:
                    self._reading, self._watcher_turn = True, False
                    break
            time.sleep(0.01)  # a caller reads: it meets the EOF and settles everything
        self._read_while(lambda: True)

    def _exited(self) -> None:
        """The pipe hit EOF: the process ended (it crashed, or :meth:`expire`, :meth:`stop` or
        :meth:`kill` ended it). Settle every call still in flight as lost (once)."""
        self.process.join(timeout=5)
        how = _exit_reason(self.process.exitcode)
        with self._lock:
            if self._exit_seen:
                return
            if self.lost is None and self._stopping and self.process.exitcode == 0:
                # it ended as stop() asked, before stop() heard the reply
                self.lost = _STOPPED
            crashed = self.lost is None
            calls = list(self._calls.values())
            self._calls.clear()
            running = calls[0] if crashed and calls else None
            if crashed:
                self.lost = how
                if running is not None:
                    self.lost += f" while {running.env_id} ran {running.method}"
            self._exit_seen = True
        for call in calls:
            if call is running:  # the call it was running: the env that crashed it
                message = f"the env's pool worker process {how} during {call.method}"
            else:
                message = f"the pool worker process hosting this env {self.lost}"
            call.settle(False, EnvCrashedError(f"{call.env_id}: {message}"))
        self._on_exit(self)

    def overdue(self, now: float) -> bool:
        """Whether the call the process is running has overrun its timeout (for the watchdog)."""
        with self._lock:
            return self._overdue(now)

    def _overdue(self, now: float) -> bool:
        if self.lost is not None or not self._calls:
            return False
        head = next(iter(self._calls.values()))
        # A call without a timeout (OpenEnv's own envs) is never overdue.
        timeout = head.timeout
        return head.started is not None and timeout is not None and now - head.started > timeout

    def expire(self) -> None:
        """The running call hung: kill the process; settle that call as timed out and the others
        as lost (called by the watchdog)."""
        with self._lock:
            if not self._overdue(time.monotonic()):
                return
            calls = list(self._calls.values())
            self._calls.clear()
            hung = calls[0]
            others = len(self.slots) - 1
            self.lost = (
                f"was killed because {hung.env_id}'s {hung.method} did not return within "
                f"{hung.timeout:g} s"
            )
        self.process.kill()
        hung.settle(
            False,
            EnvTimeoutError(
                f"{hung.env_id}: {hung.method} did not return within {hung.timeout:g} s; its "
                f"pool worker process was killed, with the {others} other session(s) it hosted"
            ),
        )
        for call in calls[1:]:
            message = f"{call.env_id}: the pool worker process hosting this env {self.lost}"
            call.settle(False, EnvCrashedError(message))

    def stop(self) -> None:
        """Ask the process to close its envs and end, after the requests already sent; calls
        sent later fail as lost."""
        with self._lock:
            self._stopping = True
        try:
            self._send(0, "", "stop", (), STOP_GRACE)
        except EnvwireError:
            return
        with self._lock:
            self.lost = self.lost or _STOPPED

    def kill(self) -> None:
        """End the process now (its envs are not closed)."""
        with self._lock:
            self.lost = self.lost or _STOPPED
        self.process.kill()


#: What a process that the pool ended had (``lost``), as an error message says it.
_STOPPED = "was stopped with the worker pool"


def _exit_reason(code: int | None) -> str:
    """How a process ended, as an error message says it."""
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"
