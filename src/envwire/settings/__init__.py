"""The server's settings: typed, frozen, checked once at start (see :mod:`.sections` for every
setting, :mod:`.load` for how the config file and the flags become one :class:`Settings`).

Front ends receive their own section (``settings.gym_socket``, ``settings.http``, ...), never
the whole server.
"""

from envwire.settings.load import (
    FRONT_ENDS,
    Settings,
    Source,
    add_arguments,
    given,
    keys,
    load,
    markdown,
)
from envwire.settings.sections import (
    ArenaSettings,
    GrpcSettings,
    GymSocketSettings,
    HttpSettings,
    ObserveSettings,
    OpenEnvSettings,
    SecuritySettings,
    ServerSettings,
)

__all__ = [
    "FRONT_ENDS",
    "ArenaSettings",
    "GrpcSettings",
    "GymSocketSettings",
    "HttpSettings",
    "ObserveSettings",
    "OpenEnvSettings",
    "SecuritySettings",
    "ServerSettings",
    "Settings",
    "Source",
    "add_arguments",
    "given",
    "keys",
    "load",
    "markdown",
]
