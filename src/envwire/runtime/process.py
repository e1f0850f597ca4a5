"""Process workers: the env host in a child process of its own, over a pipe each way.

A call that overruns its timeout kills the child (:class:`~envwire.errors.EnvTimeoutError`); a
child that dies (segfault, ``os._exit``) is reported as
:class:`~envwire.errors.EnvCrashedError`. The server goes on either way, and a Reset makes a
fresh worker.

Calls and replies cross the pipes as the pool's frames (:mod:`envwire.runtime.pipe`): a
:func:`~envwire.runtime.pipe.dumps` pickle (arrays as their bytes) behind its length, one
``write`` each way and one ``read`` for a whole reply. ``Connection.send`` built a
``ForkingPickler`` per message (copying copyreg's dispatch table), NumPy's own reduction costs
microseconds an array, and ``Connection.recv`` reads a message in two system calls: a vector
session split over workers paid all of it several times a batch.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import pickle
import select
import signal
import threading
from collections.abc import Callable
from multiprocessing.context import ForkServerContext, SpawnContext
from multiprocessing.process import BaseProcess

from envwire.errors import EnvCrashedError, EnvError, EnvTimeoutError, EnvwireError
from envwire.registry import EnvSpec
from envwire.runtime.hosts import make_host
from envwire.runtime.pipe import FrameReader, dumps, frame, pipes, write_all
from envwire.runtime.stepframes import (
    STEP_CALL,
    STEP_REPLY,
    read_step_call,
    read_step_reply,
    step_call,
    step_reply,
)

__all__ = ["ProcessWorker", "portable_error", "worker_context"]


def _child_main(
    call_pipe: multiprocessing.connection.Connection,
    reply_pipe: multiprocessing.connection.Connection,
    spec: EnvSpec,
    num_envs: int,
    mode: str | None,
) -> None:
    """The worker process: make the host, then answer calls until told to stop or EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides when workers end
    fd = reply_pipe.fileno()
    try:
        # every result is pickled before the next call: no copy of each batch is needed
        host = make_host(spec, num_envs, mode, copy=False)
    except BaseException as exc:
        write_all(fd, frame(b"", dumps(("err", portable_error(exc)))))
        return
    write_all(fd, frame(b"", dumps(("ok", None))))
    lean = mode is not None  # a vector host: its steps' results may travel as fixed frames
    reader = FrameReader(call_pipe.fileno())
    while True:
        try:
            calls = reader.read()
        except OSError:
            calls = []
        if not calls:  # EOF: the server is gone
            host.close()
            return
        for call in calls:  # one at a time: the server waits for each reply
            if call[0] == STEP_CALL:  # a vector step's fixed frame (the server sends it so)
                method, args = "step", (read_step_call(call),)
            else:
                method, args = pickle.loads(call)
            try:
                result = host.call(method, args)
                reply = (step_reply(result) if method == "step" and lean else None) or frame(
                    b"", dumps(("ok", result))
                )
            except BaseException as exc:  # the call failed, or its result does not pickle
                reply = frame(b"", dumps(("err", portable_error(exc))))
            try:
                write_all(fd, reply)
            except OSError:  # the server is gone
                host.close()
                return
            if method == "close":
                return


def portable_error(exc: BaseException) -> EnvwireError:
    """An exception that survives pickling across the pipe (envwire errors pickle as is)."""
    if isinstance(exc, EnvwireError):
        return exc
    return EnvError(f"{type(exc).__name__}: {exc}")


def worker_context() -> ForkServerContext | SpawnContext:
    """How worker processes (per session, and the pool's) are started.

    forkserver where the platform has it: a clean parent (no threads) forks each worker, with
    the heavy imports already done; spawn elsewhere.
    """
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(
            ["envwire.runtime.process", "envwire.runtime.poolprocess", "gymnasium", "numpy"]
        )
        return ctx
    return multiprocessing.get_context("spawn")


class ProcessWorker:
    """The host in a child process; crashes and hangs cost only this worker.

    Raises (from the constructor): what making the env raised, or :class:`EnvTimeoutError` /
    :class:`EnvCrashedError` when the child does not come up.
    """

    def __init__(self, spec: EnvSpec, num_envs: int = 1, mode: str | None = None) -> None:
        self.spec = spec
        self.on_hang: Callable[[EnvTimeoutError], None] | None = None
        ctx = worker_context()
        self._conn, self._calls, child_calls, child_replies = pipes(ctx)
        self._process: BaseProcess = ctx.Process(
            target=_child_main,
            args=(child_calls, child_replies, spec, num_envs, mode),
            daemon=True,
            name=f"envwire-worker[{spec.id}]",
        )
        self._process.start()
        child_calls.close()
        child_replies.close()
        self._lock = threading.Lock()
        # set by _kill: a plain attribute, read on every call (Connection.closed is a property)
        self._gone = False
        self._fd = self._conn.fileno()  # the replies' (read)
        self._out = self._calls.fileno()  # the calls' (write)
        self._reader = FrameReader(self._fd)
        self._vector = mode is not None  # steps travel as fixed frames (stepframes)
        # One poll object for the worker's life: Connection.poll builds a selector per call.
        self._poller = select.poll()
        self._poller.register(self._fd, select.POLLIN)
        try:
            self._receive(spec.make_timeout, "make", False)
        except BaseException:
            self._kill()
            raise

    def call(self, method: str, *args: object, timeout: float | None) -> object:
        with self._lock:
            self.send(method, *args)
            return self._receive(timeout, method, False)

    def send(self, method: str, *args: object) -> None:
        """Start a call without waiting (pair with :meth:`finish`; used to fan out).

        A vector worker's step of a plain array travels as a fixed frame
        (:mod:`~envwire.runtime.stepframes`); everything else is pickled.
        """
        if self._gone:
            raise EnvCrashedError(f"{self.spec.id}: the env's worker process is gone")
        message = step_call(args[0]) if method == "step" and self._vector else None
        if message is None:
            message = frame(b"", dumps((method, args)))  # an argument that does not pickle raises
        self._write(method, message)

    def send_frame(self, message: bytes) -> None:
        """Start a step whose call is already a whole frame (a group's: its
        :class:`~envwire.runtime.stepframes.StepPlan` cuts them)."""
        if self._gone:
            raise EnvCrashedError(f"{self.spec.id}: the env's worker process is gone")
        try:
            written = os.write(self._out, message)  # nearly always all of it: it fits the pipe
        except (OSError, ValueError):
            raise self._crashed("step") from None
        if written != len(message):
            self._write("step", message[written:])

    def _write(self, method: str, message: bytes) -> None:
        try:
            write_all(self._out, message)
        except (OSError, ValueError):
            raise self._crashed(method) from None

    def finish(self, method: str, timeout: float | None) -> object:
        """The result of the call :meth:`send` started (None: wait as long as it takes)."""
        return self._receive(timeout, method, False)

    def _receive(self, timeout: float | None, method: str = "step", raw: bool = True) -> object:
        """The reply to the call in flight: its result, or its error raised (a reply that came
        as a fixed frame, with ``raw``, left as its bytes: a bytearray without the frame's
        length)."""
        if self._gone:
            raise EnvCrashedError(f"{self.spec.id}: the env's worker process is gone")
        # None waits as long as the call takes; POLLHUP and POLLERR also end the wait (a dead
        # child), and the read below then reports the crash.
        if not self._poller.poll(None if timeout is None else max(0, timeout * 1000)):
            raise self._overran(method, timeout)
        return self._reply(method, raw)

    def _overran(self, method: str, timeout: float | None) -> EnvTimeoutError:
        self._kill()
        return EnvTimeoutError(
            f"{self.spec.id}: {method} did not return within {timeout:g} s; "
            "its worker process was killed"
        )

    def _reply(self, method: str, raw: bool) -> object:
        """The reply, once it is coming: see :meth:`_receive`."""
        try:
            replies = self._reader.read()
        except OSError:
            replies = []
        if not replies:  # EOF: the child died
            raise self._crashed(method) from None
        reply = replies[0]  # one call in flight: one reply
        if reply[0] == STEP_REPLY:
            return reply if raw else read_step_reply(reply)
        status, value = pickle.loads(reply)
        if status == "err":
            raise value
        return value

    #: :meth:`finish` of a step, with a reply that came as a fixed frame left as its bytes, for
    #: a group to join (the receive itself: one call less on every batch)
    finish_step = _receive

    def finish_into(
        self, views: list[memoryview], size: int, prefix: bytes, timeout: float | None
    ) -> object:
        """:meth:`finish_step`, reading the reply straight into ``views`` (a group's
        :meth:`~envwire.runtime.stepframes.StepPlan.staged`: each part of the frame where the
        joined batch needs it), in one system call: None when the reply came so, ``size``
        bytes that begin with ``prefix`` (the frame's length and head); else the reply as
        :meth:`finish_step` gives it (another layout, infos, an error: raised)."""
        if self._gone or self._reader.buffered:  # (never buffered: one reply per call)
            return self._receive(timeout)
        if not self._poller.poll(None if timeout is None else max(0, timeout * 1000)):
            raise self._overran("step", timeout)
        try:
            got = os.readv(self._fd, views)
        except OSError:
            got = 0
        if got == size:
            if views[0] == prefix:
                return None
        elif got >= len(prefix) and views[0] == prefix:  # the frame in pieces (a large one)
            self._read_rest(views, got, size)
            return None
        if not got:  # EOF: the child died
            raise self._crashed("step") from None
        self._reader.feed(b"".join(views)[:got])  # the frame's start, in its own order
        return self._reply("step", True)

    def _read_rest(self, views: list[memoryview], got: int, size: int) -> None:
        """Read the rest of a frame of ``size`` bytes, of which ``got`` came into ``views``
        (the rest is coming: the child is writing it, as :meth:`FrameReader.read` waits)."""
        while got < size:
            rest, skip = [], got
            for view in views:
                if skip >= len(view):
                    skip -= len(view)
                else:
                    rest.append(view[skip:])
                    skip = 0
            try:
                more = os.readv(self._fd, rest)
            except OSError:
                more = 0
            if not more:
                raise self._crashed("step")
            got += more

    def _crashed(self, method: str) -> EnvCrashedError:
        self._process.join(timeout=5)
        code = self._process.exitcode
        self._kill()
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        return EnvCrashedError(f"{self.spec.id}: the env's worker process {how} during {method}")

    def _kill(self) -> None:
        self._gone = True
        self._conn.close()
        self._calls.close()
        if self._process.is_alive():
            self._process.kill()
        self._process.join(timeout=5)

    def close(self) -> None:
        if self._conn.closed:
            return
        try:
            with self._lock:
                write_all(self._out, frame(b"", dumps(("close", ()))))
                self._conn.poll(2.0)
        except (OSError, ValueError):
            pass
        self._kill()
