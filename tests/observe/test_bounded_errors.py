"""Client-supplied strings are kept cut: a huge env id sent again and again leaves the server's
memory, its recent errors and the dashboard's answer about where they were."""

from __future__ import annotations

import gc
import json
import time
import tracemalloc

import grpc
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from dm_env_rpc.v1 import tensor_utils

from envwire.client.dmenvrpc.stream import CHANNEL_OPTIONS
from envwire.errors import UnknownEnvError
from envwire.frontends.dmenvrpc import SERVICE
from envwire.observe.live import MAX_ID, MAX_MESSAGE, Activity
from tests.observe.conftest import start

HUGE = 15 * 1024 * 1024


def test_the_recent_errors_keep_a_huge_env_id_cut() -> None:
    activity = Activity()
    huge = "x" * HUGE
    activity.refused("grpc", huge, UnknownEnvError("unknown env " + huge))
    [entry] = activity.snapshot()["errors"]
    assert len(entry["env"]) == MAX_ID and len(entry["message"]) == MAX_MESSAGE
    assert entry["env"].startswith("xxx") and entry["env"].endswith("...")


def _create_world(channel: grpc.Channel, env_id: str) -> pb.EnvironmentResponse:
    call = channel.stream_stream(
        f"/{SERVICE}/Process",
        request_serializer=pb.EnvironmentRequest.SerializeToString,
        response_deserializer=pb.EnvironmentResponse.FromString,
    )
    request = pb.CreateWorldRequest(settings={"env": tensor_utils.pack_tensor(env_id)})
    [response] = list(call(iter([pb.EnvironmentRequest(create_world=request)]), timeout=120))
    return response


def test_huge_env_ids_over_grpc_leave_memory_and_the_dashboard_bounded() -> None:
    server = start(gym_socket=None, http=None, grpc=0, grpc_max_message_size=HUGE * 2)
    host, port = server.addresses["grpc"]
    channel = grpc.insecure_channel(f"{host}:{port}", options=CHANNEL_OPTIONS)
    try:
        huge = "e" * HUGE
        assert _create_world(channel, huge).WhichOneof("payload") == "error"  # warm up
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            for n in range(8):
                response = _create_world(channel, f"{n}{huge}")
                assert response.WhichOneof("payload") == "error"
                assert len(response.error.message) < 1000  # the answer echoes it cut too
            # the client has its answer before the server's thread lets go of the request it
            # answered: what is still held after 30 s is held for good
            deadline = time.monotonic() + 30
            while True:
                gc.collect()
                after = tracemalloc.take_snapshot()
                grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
                if grown < 1024 * 1024 or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
        finally:
            tracemalloc.stop()
        assert grown < 1024 * 1024, f"{grown} bytes retained"
        live = server.observe.activity.snapshot()
        assert len(json.dumps(live)) < 64 * 1024
        assert all(len(e["env"]) <= MAX_ID for e in live["errors"])
    finally:
        channel.close()
        server.shutdown()
