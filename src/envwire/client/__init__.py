"""Client transports, one per protocol, each opened from a URL.

==================  =====================================================  =====================
scheme              transport                                              opener
==================  =====================================================  =====================
``gym-socket``      :class:`~envwire.client.gymsocket.GymSocketTransport`  ``gymsocket.open_url``,
                                                                           ``open_vector_url``
``grpc``            :class:`~envwire.client.dmenvrpc.DmEnvRpcTransport`    ``dmenvrpc.open_url``,
                                                                           ``open_vector_url``
``ws``, ``http``    :class:`~envwire.client.openenv.GymTransport` (or a    ``openenv.open_url``
                    :class:`~envwire.client.openenv.TypedClient`)
arena (HTTP)        :func:`envwire.client.arena.run`, ``Agent``             (a config file)
==================  =====================================================  =====================

Every transport implements :class:`~envwire.client.transport.Transport`. ``envwire.make`` and
``envwire.make_vec`` (:mod:`envwire.adapters.connect`) pick the opener from the URL's scheme
and wrap the transport in a ``gymnasium.Env`` or ``VectorEnv``.
"""

from envwire.client.transport import Transport, VectorTransport, split_url

__all__ = ["Transport", "VectorTransport", "split_url"]
