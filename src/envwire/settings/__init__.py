"""The server's settings: typed, frozen, checked once at start (see :mod:`.sections` for every
setting, :mod:`.load` for how the config file and the flags become one :class:`Settings`).

Front ends receive their own section (``settings.gym_socket``, ``settings.http``, ...), never
the whole server.
"""

from envwire.settings.load import (
    SECTIONS,
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
    DmEnvRpcSettings,
    GymSocketSettings,
    HttpSettings,
    ObserveSettings,
    OpenEnvSettings,
    SecuritySettings,
    ServerSettings,
)

__all__ = [
    "SECTIONS",
    "ArenaSettings",
    "DmEnvRpcSettings",
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
