"""One worker process of a :class:`~envwire.runtime.pool.WorkerPool`: the loop it runs, and
:class:`PoolProcess`, the server's side of it (its pipe, its reader thread, its calls in
flight, and what its death means for them).

The pipe carries frames (:mod:`.pipe`): a request is a call id, a slot (a session's env in
the process; 0 for the process itself) and the pickled method and arguments; a reply is the
call id, whether the call succeeded, and the pickled result or error. The process answers in
the order the requests came, so the oldest unanswered call is the one it is running, and a
hang is that call past its own timeout.
"""

from __future__ import annotations

import contextlib
import itertools
import pickle
import signal
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from envwire.errors import EnvCrashedError, EnvError, EnvTimeoutError, EnvwireError
from envwire.runtime.hosts import EnvHost, VectorHost, make_host
from envwire.runtime.pipe import FrameReader, dumps, frame, write_all
from envwire.runtime.process import portable_error, worker_context
from envwire.watchdog import Watchdog

__all__ = ["STOP_GRACE", "WATCHDOG", "PoolProcess"]

#: A request's header: call id, slot (0: the process itself).
_REQUEST = struct.Struct("<QQ")
#: A reply's header: call id, whether the call succeeded (else the payload is the error).
_REPLY = struct.Struct("<Q?")

#: Seconds a worker process has to finish its queue and close its envs when the pool closes.
STOP_GRACE = 5.0

#: Watches the call each pool process is running (one thread for every pool of this process).
WATCHDOG = Watchdog(name="envwire-pool-watchdog")


# --- the worker process ---------------------------------------------------------------------


def _serve(hosts: dict[int, EnvHost | VectorHost], slot: int, method: str, args: Any) -> object:
    """Carry out one request in the worker process: the slot operations, else a host call."""
    match method:
        case "make":
            spec, num_envs, mode = args
            hosts[slot] = make_host(spec, num_envs, mode)
            return None
        case "free":
            host = hosts.pop(slot, None)
            if host is not None:
                host.close()
            return None
        case "count":
            return len(hosts)
        case "stop":
            return None
    host = hosts.get(slot)
    if host is None:
        raise EnvError(f"the pool worker process holds no env in slot {slot}")
    return host.call(method, args)


def _answer(hosts: dict[int, EnvHost | VectorHost], request: bytearray) -> tuple[bytes, str]:
    """One request's reply frame, and its method."""
    call_id, slot = _REQUEST.unpack_from(request)
    method = "?"
    try:
        method, args = pickle.loads(memoryview(request)[_REQUEST.size :])
        value, ok = _serve(hosts, slot, method, args), True
    except BaseException as exc:  # an env's SystemExit must not end its neighbours
        value, ok = portable_error(exc), False
    try:
        payload = dumps(value)
    except Exception as exc:  # an unpicklable result fails its own call only
        ok = False
        payload = dumps(EnvError(f"{method}'s result cannot leave the env's process: {exc}"))
    return frame(_REPLY.pack(call_id, ok), payload), method


def _pool_main(conn: Connection) -> None:
    """The worker process: answer requests one at a time, in order, until EOF or ``stop``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides when workers end
    fd = conn.fileno()
    reader = FrameReader(fd)
    hosts: dict[int, EnvHost | VectorHost] = {}
    try:
        while True:
            try:
                requests = reader.read()
            except OSError:
                return
            if not requests:
                return  # EOF: the server is gone
            for request in requests:
                # Each reply goes out at once: holding it to batch with the next would make a
                # quick call wait for a slow neighbour's. The server reads replies in bulk.
                reply, method = _answer(hosts, request)
                write_all(fd, reply)
                if method == "stop":
                    return
    except OSError:
        return  # the server is gone
    finally:
        for host in hosts.values():
            host.close()


# --- the parent's side of one worker process -----------------------------------------------


class _Call:
    """One request in flight: the caller waits on ``done`` (released by whoever settles it)."""

    __slots__ = ("done", "env_id", "method", "ok", "started", "timeout", "value")

    def __init__(self, env_id: str, method: str, timeout: float | None) -> None:
        self.env_id, self.method, self.timeout = env_id, method, timeout
        self.started: float | None = None  # when the process began it (None: still queued)
        self.ok = False
        self.value: object = None
        self.done = threading.Lock()
        self.done.acquire()

    def settle(self, ok: bool, value: object) -> None:
        self.ok, self.value = ok, value
        self.done.release()


class PoolProcess:
    """One worker process of a pool, with its pipe, its reader thread and its calls in flight.

    Sending combines: a caller queues its frame and its call under ``_lock``; if no thread is
    writing, it becomes the writer and writes whatever is queued (its frame and those queued
    meanwhile by others, in one system call) until nothing is left. So no caller waits for the
    pipe while another writes, a busy pipe takes many frames a write, and the pipe's order is
    the queue's. ``_lock`` guards the queue, the outbox, the slots and ``lost`` and is never
    held across a read or a write, so the reader can always settle calls while the writer
    waits on a full pipe.
    """

    def __init__(self, index: int, on_exit: Callable[[PoolProcess], None]) -> None:
        ctx = worker_context()
        self._conn, child = ctx.Pipe()
        self.process = ctx.Process(
            target=_pool_main, args=(child,), daemon=True, name=f"envwire-pool-{index}"
        )
        self.process.start()
        child.close()
        self.pid = self.process.pid
        self.slots: dict[int, str] = {}  # slot -> env id, of the sessions hosted
        self.lost: str | None = None  # why the process is gone, once it is
        self._fd = self._conn.fileno()
        self._calls: OrderedDict[int, _Call] = OrderedDict()
        self._outbox: list[bytes] = []
        self._writing = False  # a caller is writing the outbox
        self._exit_seen = False  # the reader saw EOF: the pipe may close once no one writes
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._on_exit = on_exit
        reader = threading.Thread(target=self._read, name=f"envwire-pool-{index}", daemon=True)
        reader.start()
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
        call = self._send(slot, env_id, method, args, timeout)
        call.done.acquire()
        if call.ok:
            return call.value
        assert isinstance(call.value, BaseException)
        raise call.value

    def _send(
        self, slot: int, env_id: str, method: str, args: tuple[object, ...], timeout: float | None
    ) -> _Call:
        try:
            payload = dumps((method, args))
        except Exception as exc:
            message = f"{env_id}: {method}'s arguments cannot be sent to the env: {exc}"
            raise EnvError(message) from exc
        call = _Call(env_id, method, timeout)
        with self._lock:
            if self.lost is not None:
                message = f"{env_id}: the pool worker process hosting this env {self.lost}"
                raise EnvCrashedError(message)
            call_id = next(self._ids)
            if not self._calls:  # an idle process starts it at once
                call.started = time.monotonic()
            self._calls[call_id] = call
            self._outbox.append(frame(_REQUEST.pack(call_id, slot), payload))
            if self._writing:
                return call  # the writer takes it along
            self._writing = True
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
                write_all(self._fd, frames[0] if len(frames) == 1 else b"".join(frames))

    def _close_pipe(self) -> None:
        """Close the parent's end once the process is lost and no one writes (under ``_lock``)."""
        if not self._writing and not self._conn.closed and self._exit_seen:
            self._conn.close()

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

    def _read(self) -> None:
        """Settle each call as its reply comes; on EOF, settle the rest as lost."""
        reader = FrameReader(self._fd)
        while True:
            try:
                replies = reader.read()
            except OSError:
                replies = []
            if not replies:
                break
            values = []
            for reply in replies:
                call_id, ok = _REPLY.unpack_from(reply)
                try:
                    value = pickle.loads(memoryview(reply)[_REPLY.size :])
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
        self._exited()

    def _exited(self) -> None:
        """The pipe hit EOF: the process ended (it crashed, or :meth:`expire`, :meth:`stop` or
        :meth:`kill` ended it). Settle every call still in flight as lost."""
        self.process.join(timeout=5)
        how = _exit_reason(self.process.exitcode)
        with self._lock:
            crashed = self.lost is None
            calls = list(self._calls.values())
            self._calls.clear()
            running = calls[0] if crashed and calls else None
            if crashed:
                self.lost = how
                if running is not None:
                    self.lost += f" while {running.env_id} ran {running.method}"
            self._exit_seen = True
            self._close_pipe()
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
        try:
            self._send(0, "", "stop", (), STOP_GRACE)
        except EnvwireError:
            return
        with self._lock:
            self.lost = self.lost or "was stopped with the worker pool"

    def kill(self) -> None:
        """End the process now (its envs are not closed)."""
        with self._lock:
            self.lost = self.lost or "was stopped with the worker pool"
        self.process.kill()


def _exit_reason(code: int | None) -> str:
    """How a process ended, as an error message says it."""
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"
