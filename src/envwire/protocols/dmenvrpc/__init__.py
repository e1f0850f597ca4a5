"""dm_env_rpc: the sans-IO pieces of the gRPC protocol.

Nothing here touches a channel, a server or a thread; the front end
(:mod:`envwire.frontends.dmenvrpc`) and the client (:mod:`envwire.client.dmenvrpc`) do the
I/O.
One module per job:

- :mod:`.dtypes`, the dtype table: dm_env_rpc's ``DataType`` rows keyed by envwire's dtype
  names (:mod:`envwire.tensor` stays the single source of numpy dtypes);
- :mod:`.tensors`: :func:`pack` / :func:`unpack` (row-major payloads, broadcast scalars, one
  variable dimension), fast paths for large float and byte payloads;
- :mod:`.layout`, specs from spaces: :class:`Layout` turns any Gymnasium space into
  ``TensorSpec`` leaves with UIDs and "." nesting, writes samples into tensors and reads them
  back, and validates actions tensor by tensor with errors that name the UID;
- :mod:`.leaf`: :class:`Leaf`, one tensor of a space, and how its values become arrays and
  back (and are checked against its spec);
- :mod:`.dmspecs`: :class:`NativeLayout`, a dm_env env's own specs laid out the same way (no
  Gymnasium space in between);
- :mod:`.worldsettings`: typed reading of the ``settings`` maps of CreateWorld, JoinWorld,
  Reset and ResetWorld;
- :mod:`.machine`, the connection state machine: :data:`TRANSITIONS`, a table of what each
  request does in each :class:`Phase`;
- :mod:`.status`: errors as ``google.rpc.Status`` (with an ``ErrorInfo`` detail carrying
  envwire's error code) and back; :data:`CODES`, the one table of each error's gRPC code.
"""

from envwire.protocols.dmenvrpc.dmspecs import NativeLayout, native_leaf
from envwire.protocols.dmenvrpc.dtypes import (
    BOOL,
    BY_ENUM,
    BY_FIELD,
    DATA_TYPES,
    DOUBLE,
    INT64,
    STRING,
    DataType,
    data_type_of,
)
from envwire.protocols.dmenvrpc.layout import VECTOR_OBSERVATIONS, WORLD_OBSERVATIONS, Layout
from envwire.protocols.dmenvrpc.leaf import Leaf
from envwire.protocols.dmenvrpc.machine import (
    SAME,
    TRANSITIONS,
    WORLD_DECIDES,
    Kind,
    Next,
    Phase,
    next_phase,
    parse_request,
    request_kind,
)
from envwire.protocols.dmenvrpc.status import (
    CODES,
    ERROR_DOMAIN,
    PropertyPermissionError,
    UnknownPropertyError,
    UnknownWorldError,
    code_of,
    error_from_status,
    error_response,
    status_of,
)
from envwire.protocols.dmenvrpc.tensors import (
    MAX_ELEMENTS,
    MAX_SETTING_ELEMENTS,
    Array,
    flat,
    pack,
    payload_of,
    resolve_shape,
    unpack,
    write,
)
from envwire.protocols.dmenvrpc.worldsettings import (
    SETTINGS,
    Setting,
    read_settings,
)

__all__ = [
    "BOOL",
    "BY_ENUM",
    "BY_FIELD",
    "CODES",
    "DATA_TYPES",
    "DOUBLE",
    "ERROR_DOMAIN",
    "INT64",
    "MAX_ELEMENTS",
    "MAX_SETTING_ELEMENTS",
    "SAME",
    "SETTINGS",
    "STRING",
    "TRANSITIONS",
    "VECTOR_OBSERVATIONS",
    "WORLD_DECIDES",
    "WORLD_OBSERVATIONS",
    "Array",
    "DataType",
    "Kind",
    "Layout",
    "Leaf",
    "NativeLayout",
    "Next",
    "Phase",
    "PropertyPermissionError",
    "Setting",
    "UnknownPropertyError",
    "UnknownWorldError",
    "code_of",
    "data_type_of",
    "error_from_status",
    "error_response",
    "flat",
    "native_leaf",
    "next_phase",
    "pack",
    "parse_request",
    "payload_of",
    "read_settings",
    "request_kind",
    "resolve_shape",
    "status_of",
    "unpack",
    "write",
]
