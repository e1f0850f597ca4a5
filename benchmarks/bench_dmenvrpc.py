"""dm_env_rpc: envwire's gRPC front end beside a minimal reference servicer, in the same run.

Run ``python benchmarks/bench_dmenvrpc.py [--seconds S] [--runs R] [--window W] [--quick]
[--json FILE]``. With CartPole-v1 everywhere, :func:`bench_grpc_cases` (which the suite runs
too) measures:

- the official ``Connection`` (one StepRequest at a time) against a minimal reference servicer
  (:class:`ReferenceServicer`, in a process of its own: the least a dm_env_rpc server can do,
  with no validation, worlds or properties) and against ``envwire serve --grpc``: the ratio is
  the price of envwire's checks and worlds;
- envwire's client (``envwire.make("grpc://...")``) one step at a time, and pipelined with
  ``step_async``/``step_wait`` and ``window`` steps in flight (the official clients cannot
  pipeline), both against the official ``Connection`` on envwire (target: 1.5x). Pipelined steps
  that land after the end of an episode are refused by the client and not counted;
- a vector world of N = 256 copies (``envwire.make_vec("grpc://...", 256)``) against Gymnasium's
  in-process ``SyncVectorEnv`` of 256 copies (target: 0.9), with the server's copies in one
  process and split over two worker processes;

and, beside them, the official ``DmEnvAdaptor`` (a ``dm_env.Environment``) against each server.
Every figure is the median of ``--runs`` measurements of ``--seconds``, taken in rounds (see
:func:`bench_grpc_cases`). ``python benchmarks/bench_dmenvrpc.py --serve-reference`` runs the
reference servicer alone (it prints its port).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
import gymnasium
import numpy as np
from dm_env_rpc.v1 import connection, dm_env_adaptor, dm_env_rpc_pb2_grpc, tensor_utils
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb

import envwire
from envwire.adapters.gymenv import RemoteEnv
from envwire.errors import StateError
from envwire.testing import ServerProcess
from harness import Result, Settings, alternate, compare, machine, median, print_table, rate

__all__ = [
    "ReferenceProcess",
    "adaptor_rate",
    "bench_adaptors",
    "ReferenceServicer",
    "batched_rate",
    "bench_grpc_cases",
    "envwire_rate",
    "main",
    "official_rate",
    "pipelined_rate",
    "serve_reference",
    "sync_vector_rate",
]

ENV = "CartPole-v1"
_OPTIONS = (("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1))


# -- the reference servicer --------------------------------------------------------------------


def _reference_specs() -> Any:
    specs = pb.ActionObservationSpecs()
    action = specs.actions[1]
    action.name, action.dtype = "action", pb.INT64
    action.min.int64s.array.append(0)
    action.max.int64s.array.append(1)
    observation = specs.observations[1]
    observation.name, observation.dtype = "observation", pb.FLOAT
    observation.shape.append(4)
    reward = specs.observations[2]
    reward.name, reward.dtype = "reward", pb.DOUBLE
    return specs


class ReferenceServicer(dm_env_rpc_pb2_grpc.EnvironmentServicer):  # type: ignore[misc]
    """CartPole over dm_env_rpc with nothing but the protocol's state machine."""

    specs = _reference_specs()

    def Process(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:
        env: Any = None
        running = False
        for request in requests:
            response = pb.EnvironmentResponse()
            match request.WhichOneof("payload"):
                case "create_world":
                    env = gymnasium.make(ENV)
                    response.create_world.world_name = "reference"
                case "join_world":
                    response.join_world.specs.CopyFrom(self.specs)
                case "step":
                    if running:
                        action = int(tensor_utils.unpack_tensor(request.step.actions[1]))
                        obs, reward, terminated, truncated, _ = env.step(action)
                        state = pb.RUNNING
                        if terminated or truncated:
                            state = pb.TERMINATED if terminated else pb.INTERRUPTED
                    else:
                        (obs, _), reward, state = env.reset(), 0.0, pb.RUNNING
                    running = state == pb.RUNNING
                    response.step.state = state
                    for uid in request.step.requested_observations:
                        value = obs if uid == 1 else float(reward)
                        response.step.observations[uid].CopyFrom(tensor_utils.pack_tensor(value))
                case "reset":
                    running = False
                    response.reset.specs.CopyFrom(self.specs)
                case "leave_world":
                    response.leave_world.SetInParent()
                case "destroy_world":
                    response.destroy_world.SetInParent()
                case other:
                    response.error.code, response.error.message = 12, f"{other} is not supported"
            yield response


def serve_reference() -> None:
    """Run the reference servicer on a free port; print the port; serve until killed."""
    server = grpc.server(futures.ThreadPoolExecutor(4), options=_OPTIONS)
    dm_env_rpc_pb2_grpc.add_EnvironmentServicer_to_server(ReferenceServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination()


class ReferenceProcess:
    """The reference servicer in a child process; ``with`` gives its port."""

    def __enter__(self) -> int:
        command = [sys.executable, __file__, "--serve-reference"]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.strip().isdigit():
            self.__exit__()
            raise RuntimeError(f"the reference servicer did not start (it said {line!r})")
        return int(line)

    def __exit__(self, *exc: object) -> None:
        self.process.kill()
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


# -- the measurements --------------------------------------------------------------------------


def official_rate(address: str, seconds: float) -> float:
    """Steps/s of the official ``Connection``, one StepRequest at a time."""
    channel = grpc.insecure_channel(address, options=_OPTIONS)
    conn = connection.Connection(channel)
    try:
        settings = {"env": tensor_utils.pack_tensor(ENV)}
        world = conn.send(pb.CreateWorldRequest(settings=settings)).world_name
        conn.send(pb.JoinWorldRequest(world_name=world))
        request = pb.StepRequest(requested_observations=[1, 2])
        request.actions[1].CopyFrom(tensor_utils.pack_tensor(0))
        conn.send(pb.StepRequest())
        # Past the end of an episode the next Step starts a new one: stepping never stops.
        return rate(lambda: conn.send(request), seconds)
    finally:
        conn.close()
        channel.close()


def _alternating() -> Iterator[int]:
    while True:
        yield 0
        yield 1


def envwire_rate(url: str, seconds: float) -> float:
    """Steps/s of envwire's client as a ``gymnasium.Env``, one step at a time."""
    env = envwire.make(url)
    assert isinstance(env, gymnasium.Env)  # not a TypedClient: that is OpenEnv only
    env.reset(seed=0)
    actions = _alternating()

    def one() -> None:
        if any(env.step(next(actions))[2:4]):
            env.reset()

    try:
        return rate(one, seconds)
    finally:
        env.close()


def pipelined_rate(url: str, seconds: float, window: int) -> float:
    """Steps/s of envwire's client with ``window`` steps in flight (refused ones not counted)."""
    env = envwire.make(url)
    assert isinstance(env, RemoteEnv)  # what make gives for grpc://, with step_async/step_wait
    env.reset(seed=0)
    actions = _alternating()

    def burst() -> int:
        for _ in range(window):
            env.step_async(next(actions))
        done, ended = 0, False
        for _ in range(window):
            try:
                _, _, terminated, truncated, _ = env.step_wait()
            except StateError:  # sent after the episode ended
                continue
            done += 1
            ended = ended or terminated or truncated
        if ended:
            env.reset()
        return done

    try:
        for _ in range(5):
            burst()
        count, begin = 0, time.perf_counter()
        while time.perf_counter() - begin < seconds:
            count += burst()
        return count / (time.perf_counter() - begin)
    finally:
        env.close()


def sync_vector_rate(n: int, seconds: float) -> float:
    """Env steps/s of Gymnasium's in-process ``SyncVectorEnv`` of ``n`` CartPoles."""
    local = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make(ENV)] * n)
    local.reset(seed=0)
    actions = np.zeros(n, np.int64)
    try:
        return n * rate(lambda: local.step(actions), seconds)
    finally:
        local.close()


def batched_rate(url: str, n: int, seconds: float, workers: int = 1) -> float:
    """Env steps/s of ``envwire.make_vec(url, n)``: a vector world of ``n`` copies."""
    remote = envwire.make_vec(url, n, workers=workers)
    remote.reset(seed=0)
    actions = np.zeros(n, np.int64)
    try:
        return n * rate(lambda: remote.step(actions), seconds)
    finally:
        remote.close()


def bench_grpc_cases(settings: Settings, *, window: int = 16, n: int = 256) -> list[Result]:
    """The dm_env_rpc figures (see the module docstring), each beside its baseline.

    The machines this runs on are shared and noisy, so the cases are measured in rounds (each
    round measures every case once, so that a figure and its baseline are measured close
    together): a figure is the median over the rounds, a ratio the median of the rounds' ratios.
    """
    s = settings.seconds
    reference_name = "dm_env_rpc: official Connection -> reference servicer"
    official_name = "dm_env_rpc: official Connection -> envwire"
    local_name = f"dm_env_rpc: in-process SyncVectorEnv N={n}"
    one_name = "dm_env_rpc: envwire client, one step at a time"
    pipelined_name = f"dm_env_rpc: envwire client, {window} in flight"
    batched_name = f"dm_env_rpc: batched N={n}"
    split_name = f"dm_env_rpc: batched N={n}, 2 worker processes"
    baselines = {
        official_name: reference_name,
        one_name: official_name,
        pipelined_name: official_name,
        batched_name: local_name,
        split_name: local_name,
    }
    with ReferenceProcess() as reference_port, ServerProcess([ENV], front_ends=("grpc",)) as server:
        ours = f"{server.host}:{server.ports['grpc']}"
        url = server.url("grpc", ENV)
        cases: dict[str, Callable[[], float]] = {
            reference_name: lambda: official_rate(f"127.0.0.1:{reference_port}", s),
            official_name: lambda: official_rate(ours, s),
            one_name: lambda: envwire_rate(url, s),
            pipelined_name: lambda: pipelined_rate(url, s, window),
            local_name: lambda: sync_vector_rate(n, s),
            batched_name: lambda: batched_rate(url, n, s),
            split_name: lambda: batched_rate(url, n, s, workers=2),
        }
        # In their own order: each case right after its baseline (rotated, the Connection's
        # case would follow the CPU-bound in-process batch in some rounds, its baseline never)
        values = alternate(cases, settings.runs, rotate=False)
    results = []
    for name in cases:
        notes = {"window": window} if name == pipelined_name else {}
        notes |= {"workers": 2} if name == split_name else {}
        target = {pipelined_name: 1.5, batched_name: 0.9, official_name: 0.95}.get(name)
        results.append(compare(values, name, baselines.get(name), target=target, notes=notes))
    return results


def adaptor_rate(address: str, seconds: float) -> float:
    """Steps/s of the official ``DmEnvAdaptor`` (a dm_env.Environment)."""
    channel = grpc.insecure_channel(address)
    conn = connection.Connection(channel)
    try:
        env, _ = dm_env_adaptor.create_and_join_world(conn, {"env": ENV}, {})
        env.reset()
        return rate(lambda: env.step({"action": 0}), seconds)
    finally:
        conn.close()
        channel.close()


def bench_adaptors(settings: Settings) -> list[Result]:
    """``DmEnvAdaptor`` against the reference servicer and against envwire."""
    with ReferenceProcess() as port, ServerProcess([ENV], front_ends=("grpc",)) as server:
        reference = median(settings, lambda: adaptor_rate(f"127.0.0.1:{port}", settings.seconds))
        ours = median(
            settings,
            lambda: adaptor_rate(f"{server.host}:{server.ports['grpc']}", settings.seconds),
        )
    name = "dm_env_rpc: DmEnvAdaptor -> reference servicer"
    return [
        Result(name, reference),
        Result("dm_env_rpc: DmEnvAdaptor -> envwire", ours, baseline=name, ratio=ours / reference),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--window", type=int, default=16, help="pipelined steps in flight")
    parser.add_argument("--quick", action="store_true", help="a smoke run (0.3 s, 1 run)")
    parser.add_argument("--json", help="also write the report here")
    parser.add_argument("--serve-reference", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_reference:
        serve_reference()
        return
    settings = Settings(seconds=0.3, runs=1) if args.quick else Settings(args.seconds, args.runs)
    results = bench_grpc_cases(settings, window=args.window) + bench_adaptors(settings)
    report = {"machine": machine(), "results": [vars(r) for r in results]}
    print_table(report)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)


if __name__ == "__main__":
    main()
