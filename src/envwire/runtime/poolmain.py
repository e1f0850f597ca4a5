"""The loop each worker process of a :class:`~envwire.runtime.pool.WorkerPool` runs, and the
frames its pipes carry (:mod:`.pipe`, one each way): a request is a call id, a slot (a
session's env in the process; 0 for the process itself) and the pickled method and arguments;
a reply is the call id, whether the call succeeded, and the pickled result or error. The
process answers in the order the requests came, so the oldest unanswered call is the one it is
running, and a hang is that call past its own timeout.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import struct
from multiprocessing.connection import Connection
from typing import Any

from envwire.errors import EnvError
from envwire.runtime.confine import confine
from envwire.runtime.hosts import EnvHost, VectorHost, make_host
from envwire.runtime.pipe import FrameReader, dumps, frame, write_all
from envwire.runtime.process import portable_error

__all__ = ["REPLY", "REQUEST", "pool_main"]

#: A request's header: call id, slot (0: the process itself).
REQUEST = struct.Struct("<QQ")
#: A reply's header: call id, whether the call succeeded (else the payload is the error).
REPLY = struct.Struct("<Q?")


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
    call_id, slot = REQUEST.unpack_from(request)
    method = "?"
    try:
        method, args = pickle.loads(memoryview(request)[REQUEST.size :])
        value, ok = _serve(hosts, slot, method, args), True
    except BaseException as exc:  # an env's SystemExit must not end its neighbours
        value, ok = portable_error(exc), False
    try:
        payload = dumps(value)
    except Exception as exc:  # an unpicklable result fails its own call only
        ok = False
        payload = dumps(EnvError(f"{method}'s result cannot leave the env's process: {exc}"))
    return frame(REPLY.pack(call_id, ok), payload), method


def pool_main(
    request_pipe: Connection, reply_pipe: Connection, protected: tuple[str, ...] = ()
) -> None:
    """The worker process: give up what it does not need (:func:`~.confine.confine`; the
    ``protected`` files become unreachable where Landlock allows), then answer requests one
    at a time, in order, until EOF or ``stop``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides when workers end
    fd = reply_pipe.fileno()
    held = confine([request_pipe.fileno(), fd], protected)
    if protected and not held["protected"]:
        logging.getLogger("envwire.pool").warning(
            "pool worker %d: this host cannot keep %s from pooled envs (no Landlock)",
            os.getpid(),
            ", ".join(protected),
        )
    reader = FrameReader(request_pipe.fileno())
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
