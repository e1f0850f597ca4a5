"""The dm_env_rpc client: one env per world (:mod:`.stream`) and N copies per world
(:mod:`.vector`), each on one gRPC ``Process`` stream."""
