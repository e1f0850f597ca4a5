"""dm_env_rpc: envwire's gRPC front end beside a minimal reference servicer, in the same run.

Run: ``python benchmarks/bench_dmenvrpc.py [--seconds S] [--runs R] [--window W] [--quick]
[--json FILE]``.

Both servers are processes of their own serving CartPole-v1 (``gymnasium.make``): envwire's is a
real ``envwire serve --grpc``; the reference servicer is written below, the least a dm_env_rpc
server can do (no validation, no worlds, no properties). The client is this process:

- the official ``Connection`` sending StepRequests one at a time, against each server
  (the ratio envwire / reference is the price of envwire's checks and worlds);
- the official ``DmEnvAdaptor``, against each server;
- envwire's client (``envwire.make("grpc://...")``), one step at a time and pipelined with
  ``step_async``/``step_wait`` and ``--window`` steps in flight (the official clients cannot
  pipeline). Pipelined steps that land after the end of an episode are refused by the client
  and not counted, so the pipelined figure is what an agent really gets.

Every figure is the median of ``--runs`` measurements of ``--seconds`` each.
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
from dm_env_rpc.v1 import connection, dm_env_adaptor, dm_env_rpc_pb2_grpc, tensor_utils
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb

import envwire
from envwire.bench import Result, Settings, machine, print_table, rate
from envwire.errors import StateError
from envwire.testing import ServerProcess

_ENV = "CartPole-v1"
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
                    env = gymnasium.make(_ENV)
                    response.create_world.world_name = "reference"
                case "join_world":
                    response.join_world.specs.CopyFrom(self.specs)
                case "step":
                    if running:
                        action = int(tensor_utils.unpack_tensor(request.step.actions[1]))
                        obs, reward, terminated, truncated, _ = env.step(action)
                        state = (
                            pb.TERMINATED
                            if terminated
                            else pb.INTERRUPTED
                            if truncated
                            else pb.RUNNING
                        )
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
    """The reference servicer in a child process."""

    def __enter__(self) -> int:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve-reference"], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        return int(self.process.stdout.readline())

    def __exit__(self, *exc: Any) -> None:
        self.process.kill()
        self.process.wait()


# -- the measurements --------------------------------------------------------------------------


def official_rate(address: str, seconds: float) -> float:
    """Steps/s of the official ``Connection``, one StepRequest at a time."""
    channel = grpc.insecure_channel(address, options=_OPTIONS)
    conn = connection.Connection(channel)
    try:
        settings = {"env": tensor_utils.pack_tensor(_ENV)}
        world = conn.send(pb.CreateWorldRequest(settings=settings)).world_name
        conn.send(pb.JoinWorldRequest(world_name=world))
        request = pb.StepRequest(requested_observations=[1, 2])
        request.actions[1].CopyFrom(tensor_utils.pack_tensor(0))
        conn.send(pb.StepRequest())
        return rate(lambda: conn.send(request), seconds)
    finally:
        conn.close()
        channel.close()


def adaptor_rate(address: str, seconds: float) -> float:
    """Steps/s of the official ``DmEnvAdaptor`` (a dm_env.Environment)."""
    channel = grpc.insecure_channel(address, options=_OPTIONS)
    conn = connection.Connection(channel)
    try:
        env, _ = dm_env_adaptor.create_and_join_world(conn, {"env": _ENV}, {})
        env.reset()
        return rate(lambda: env.step({"action": 0}), seconds)
    finally:
        conn.close()
        channel.close()


def envwire_rate(url: str, seconds: float) -> float:
    """Steps/s of envwire's client as a ``gymnasium.Env``, one step at a time."""
    env = envwire.make(url)
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
    env = envwire.make(url).unwrapped
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


def _alternating() -> Iterator[int]:
    while True:
        yield 0
        yield 1


def bench_dmenvrpc(settings: Settings, window: int = 16) -> list[Result]:
    """The dm_env_rpc figures (see the module docstring)."""

    def median(measure: Callable[[], float]) -> float:
        values = sorted(measure() for _ in range(settings.runs))
        return values[len(values) // 2]

    with (
        ReferenceProcess() as reference_port,
        ServerProcess([_ENV], front_ends=("grpc",)) as server,
    ):
        ours = f"{server.host}:{server.ports['grpc']}"
        reference = f"127.0.0.1:{reference_port}"
        url = server.url("grpc", _ENV)
        s = settings.seconds
        ref_official = median(lambda: official_rate(reference, s))
        our_official = median(lambda: official_rate(ours, s))
        ref_adaptor = median(lambda: adaptor_rate(reference, s))
        our_adaptor = median(lambda: adaptor_rate(ours, s))
        one_at_a_time = median(lambda: envwire_rate(url, s))
        pipelined = median(lambda: pipelined_rate(url, s, window))
    reference_name = "official Connection -> reference servicer"
    return [
        Result(reference_name, ref_official),
        Result(
            "official Connection -> envwire",
            our_official,
            baseline=reference_name,
            ratio=our_official / ref_official,
        ),
        Result("DmEnvAdaptor -> reference servicer", ref_adaptor),
        Result(
            "DmEnvAdaptor -> envwire",
            our_adaptor,
            baseline="DmEnvAdaptor -> reference",
            ratio=our_adaptor / ref_adaptor,
        ),
        Result(
            "envwire client (gymnasium.Env) -> envwire",
            one_at_a_time,
            baseline="official Connection -> envwire",
            ratio=one_at_a_time / our_official,
        ),
        Result(
            f"envwire client, {window} in flight -> envwire",
            pipelined,
            baseline="official Connection -> envwire",
            ratio=pipelined / our_official,
            target=2.0,
            notes={"window": window},
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--window", type=int, default=16, help="pipelined steps in flight")
    parser.add_argument("--quick", action="store_true", help="a smoke run (0.3 s, 1 run)")
    parser.add_argument("--json", help="also write the report here")
    parser.add_argument("--serve-reference", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_reference:
        serve_reference()
        return
    settings = Settings(seconds=0.3, runs=1) if args.quick else Settings(args.seconds, args.runs)
    results = bench_dmenvrpc(settings, args.window)
    report = {"machine": machine(), "results": [vars(r) for r in results]}
    print_table(report)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=2)


if __name__ == "__main__":
    main()
