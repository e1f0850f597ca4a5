"""The server's front ends, one row each: what every floor knows of a front end by its name.

Each floor looks a front end up here rather than keeping a table of its own: the settings
(:mod:`envwire.settings`: its section, its port, its flag), the clients' probe
(:mod:`envwire.client.probe`: the flag of the port that answered), the URL openers
(:mod:`envwire.adapters.connect`: its schemes), the workers' supervisor (who binds the port),
and the composition root (:mod:`envwire.app`, which builds each row's front end). The rows are
plain data, so that the lowest floor that names a front end can read them; what a row's names
stand for is checked by the tests of each floor.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DMENVRPC", "FRONT_ENDS", "GYM_SOCKET", "HTTP", "PortRow"]


@dataclass(frozen=True, slots=True)
class PortRow:
    """One front end of ``envwire serve``, on a port of its own.

    Attributes:
        name: its port's name: the config file's key (dashes as underscores), the flag
            (``--NAME PORT``; ``--NAME off`` turns it off), and the name in the server's
            ``envwire: NAME listening on HOST:PORT`` line.
        section: the attribute of :class:`~envwire.settings.Settings` that holds its settings
            (a section with a ``port`` field): the protocol's name in the code.
        default_port: the port it listens on unless told otherwise.
        schemes: the URL schemes that reach it, each as (plain, TLS).
        answer: what its server answers a client's probe (a member of
            :class:`envwire.client.probe.Found`).
        opener: ``module:function`` opening a URL of its schemes as a transport
            (:func:`envwire.make`); None: no client opens it by URL.
        vector_opener: ``module:function`` opening a URL of its schemes as a vector transport
            (:func:`envwire.make_vec`); None: no batched path.
        binds_itself: its server binds the port in every worker (SO_REUSEPORT), as gRPC's must,
            rather than taking the socket the workers' supervisor bound.
    """

    name: str
    section: str
    default_port: int
    schemes: tuple[tuple[str, str], ...]
    answer: str
    opener: str | None = None
    vector_opener: str | None = None
    binds_itself: bool = False

    @property
    def key(self) -> str:
        """Its port's key in the config file's ``[server]`` table."""
        return self.name.replace("-", "_")

    @property
    def flag(self) -> str:
        """Its port's flag of ``envwire serve``."""
        return f"--{self.name}"


GYM_SOCKET = PortRow(
    name="gym-socket",
    section="gym_socket",
    default_port=5001,
    schemes=(("gym-socket", "gym-sockets"),),
    answer="GYM_SOCKET",
    opener="envwire.client.gymsocket:open_url",
    vector_opener="envwire.client.gymsocket:open_vector_url",
)
#: The HTTP front end: OpenEnv (whose client its URLs open), the arena and the dashboard.
HTTP = PortRow(
    name="http",
    section="http",
    default_port=8000,
    schemes=(("ws", "wss"), ("http", "https")),
    answer="HTTP",
    opener="envwire.client.openenv:open_url",
)
#: dm_env_rpc, whose port is gRPC's: ``--grpc`` and ``grpc://`` name the transport.
DMENVRPC = PortRow(
    name="grpc",
    section="dmenvrpc",
    default_port=50051,
    schemes=(("grpc", "grpcs"),),
    answer="HTTP2",
    opener="envwire.client.dmenvrpc.stream:open_url",
    vector_opener="envwire.client.dmenvrpc.vector:open_vector_url",
    binds_itself=True,
)

#: Every front end, in the order the server starts them.
FRONT_ENDS: tuple[PortRow, ...] = (GYM_SOCKET, HTTP, DMENVRPC)
