"""The dm_env_rpc front end: gRPC's ``Environment.Process`` stream.

- :mod:`.service`: the listener and the stream loop (one request at a time, errors in-band);
- :mod:`.world`: a world (one session, its seats and turns); :mod:`.native_world`: a world of
  a dm_env env (its own specs); :mod:`.vector`: a vector world;
- :mod:`.world_table`: every world by name, and their lifetimes;
- :mod:`.properties`: the properties extension.

The sans-IO side (tensors, specs, settings, the state machine, statuses) is
:mod:`envwire.protocols.dmenvrpc`. See ``docs/protocols/dm_env_rpc.md``.
"""

from envwire.frontends.dmenvrpc.service import SERVICE, DmEnvRpcFrontEnd

__all__ = ["SERVICE", "DmEnvRpcFrontEnd"]
