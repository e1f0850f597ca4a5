"""The dm_env_rpc client: one env per world (:mod:`.stream`) and N copies per world
(:mod:`.vector`), each on one gRPC ``Process`` stream."""

from envwire.client.dmenvrpc.stream import DmEnvRpcTransport, open_url
from envwire.client.dmenvrpc.vector import DmEnvRpcVectorTransport, open_vector_url

__all__ = ["DmEnvRpcTransport", "DmEnvRpcVectorTransport", "open_url", "open_vector_url"]
