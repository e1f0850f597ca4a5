"""dm_env_rpc's properties extension on the gRPC front end: read, write and list.

The properties form a tree ("." separates levels; the parents are listable). ``server.*`` is
there before a connection joins a world; ``env.*``, ``episode.*`` and ``world.*`` describe the
joined world:

=====================  ======  ====  ===========================================================
key                    type    mode  value
=====================  ======  ====  ===========================================================
server.envs            string  r     the catalog's env ids (shape ``[-1]``)
server.version         string  r     envwire's version
server.worlds          int64   r     how many worlds this front end holds
env.id                 string  r     the joined world's env id
env.metadata           string  r     the env class's ``metadata`` as JSON (typed envs: ``about``)
env.render_mode        string  r     the render mode the env was made with ('' for none)
env.kwargs             string  r     the constructor arguments the world's creator set, as JSON
env.action_space       string  r     the action space, envwire's JSON description
env.observation_space  string  r     the observation space, envwire's JSON description
episode.seed           int64   rw    the seed of the last episode (-1: unseeded, or one seed per
                                     copy); writing sets the seed of the next episode
episode.step_count     int64   r     steps taken in the current episode
episode.index          int64   r     the current episode's number (from 0; -1 before the first)
episode.return         double  r     the sum of the current episode's rewards
world.name             string  r     the joined world's name
world.players          int64   r     its seats
world.player           int64   r     this connection's seat
world.num_envs         int64   r     the copies stepped together (1 for a world of one env)
world.autoreset_mode   string  r     a vector world's autoreset mode ('' for one env)
=====================  ======  ====  ===========================================================

Errors: an unknown key is NOT_FOUND, writing a read-only key or listing a leaf is
PERMISSION_DENIED, a value of the wrong type is INVALID_ARGUMENT (the codes the official
``PropertiesExtension`` turns into KeyError, PermissionError and ValueError).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import gymnasium
from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb
from dm_env_rpc.v1.extensions import properties_pb2
from google.protobuf import any_pb2

from envwire import spacecodec
from envwire._version import __version__
from envwire.errors import ConfigError, InvalidArgumentError, ProtocolError, UnsupportedError
from envwire.frontends.dmenvrpc.world import Connection, World
from envwire.frontends.dmenvrpc.world_table import WorldTable
from envwire.protocols import dmenvrpc
from envwire.protocols.dmenvrpc import (
    DataType,
    PropertyPermissionError,
    UnknownPropertyError,
)
from envwire.registry import Catalog

__all__ = ["PROPERTIES", "Properties", "Property"]

_STRING, _INT64 = dmenvrpc.STRING, dmenvrpc.INT64
_DOUBLE = dmenvrpc.DOUBLE

#: A property's value, before it is packed as a tensor of its row.
_Value: TypeAlias = str | int | float | list[str]


@dataclass(frozen=True, slots=True)
class Property:
    """One key of the tree: a listable parent (``row`` None) or a readable value."""

    key: str
    row: DataType | None
    description: str
    shape: tuple[int, ...] = ()
    writable: bool = False

    @property
    def needs_world(self) -> bool:
        """True for the keys that describe a joined world."""
        return not self.key.startswith("server")

    def spec(self) -> properties_pb2.PropertySpec:
        """Its ``PropertySpec``."""
        spec = properties_pb2.PropertySpec(
            is_readable=self.row is not None,
            is_writable=self.writable,
            is_listable=self.row is None,
            description=self.description,
        )
        spec.spec.name = self.key
        if self.row is not None:
            spec.spec.dtype = self.row.enum
            spec.spec.shape.extend(self.shape)
        return spec


PROPERTIES: tuple[Property, ...] = (
    Property("server", None, "this server"),
    Property("server.envs", _STRING, "the env ids this server serves", shape=(-1,)),
    Property("server.version", _STRING, "envwire's version"),
    Property("server.worlds", _INT64, "how many worlds exist on this front end"),
    Property("env", None, "the joined world's env"),
    Property("env.id", _STRING, "the env id"),
    Property("env.metadata", _STRING, "the env's metadata, as JSON"),
    Property("env.render_mode", _STRING, "the render mode the env was made with ('' = none)"),
    Property("env.kwargs", _STRING, "the constructor arguments the world's creator set, as JSON"),
    Property("env.action_space", _STRING, "the action space, as envwire's JSON description"),
    Property("env.observation_space", _STRING, "the observation space, as envwire's JSON"),
    Property("episode", None, "the joined world's current episode"),
    Property(
        "episode.seed",
        _INT64,
        "the last episode's seed (-1: none); write to seed the next one",
        writable=True,
    ),
    Property("episode.step_count", _INT64, "steps taken in the current episode"),
    Property("episode.index", _INT64, "the current episode's number (-1 before the first)"),
    Property("episode.return", _DOUBLE, "the sum of the current episode's rewards"),
    Property("world", None, "the joined world"),
    Property("world.name", _STRING, "the world's name"),
    Property("world.players", _INT64, "how many seats the world has"),
    Property("world.player", _INT64, "this connection's seat"),
    Property("world.num_envs", _INT64, "how many copies of the env are stepped together"),
    Property("world.autoreset_mode", _STRING, "a vector world's autoreset mode ('' = one env)"),
)
_BY_KEY = {p.key: p for p in PROPERTIES}


class Properties:
    """Answers property requests for one front end."""

    def __init__(self, catalog: Catalog, worlds: WorldTable) -> None:
        self.catalog = catalog
        self.worlds = worlds
        self._readers: dict[str, Callable[[World], _Value]] = {
            "env.id": lambda w: w.session.env_id,
            "env.metadata": self._metadata,
            "env.render_mode": lambda w: w.spec.render_mode() or "",
            "env.action_space": lambda w: _space_json(w.session.action_space),
            "env.observation_space": lambda w: _space_json(w.session.observation_space),
            "episode.seed": _seed,
            "episode.step_count": lambda w: w.session.step_count,
            "episode.index": lambda w: w.session.episode,
            "episode.return": lambda w: float(w.session.episode_return),
            "world.name": lambda w: w.name,
            "world.players": lambda w: w.players,
            "env.kwargs": lambda w: json.dumps(w.kwargs, default=repr),
            "world.num_envs": lambda w: w.session.num_envs,
            "world.autoreset_mode": lambda w: w.session.autoreset_mode or "",
        }

    def handle(self, request: any_pb2.Any, conn: Connection) -> any_pb2.Any:
        """Answer an ``extension`` request (an ``Any`` holding a ``PropertyRequest``).

        Raises:
            UnsupportedError: the ``Any`` holds another extension's message.
            UnknownPropertyError, PropertyPermissionError, InvalidArgumentError: see the
                module docstring.
        """
        parsed = properties_pb2.PropertyRequest()
        if not request.Is(parsed.DESCRIPTOR):
            raise UnsupportedError(
                f"unknown extension message {request.type_url!r}; this server speaks the "
                f"properties extension ({parsed.DESCRIPTOR.full_name})"
            )
        request.Unpack(parsed)
        response = properties_pb2.PropertyResponse()
        match parsed.WhichOneof("payload"):
            case "read_property":
                key = parsed.read_property.key
                value = self._read(self._lookup(key, conn), conn)
                response.read_property.value.CopyFrom(dmenvrpc.pack(value, _BY_KEY[key].row))
            case "write_property":
                self._write(parsed.write_property.key, parsed.write_property.value, conn)
                response.write_property.SetInParent()
            case "list_property":
                for prop in self._children(parsed.list_property.key, conn):
                    response.list_property.values.append(prop.spec())
            case _:
                raise ProtocolError("PropertyRequest has no payload (read, write or list)")
        packed = any_pb2.Any()
        packed.Pack(response)
        return packed

    def _lookup(self, key: str, conn: Connection) -> Property:
        prop = _BY_KEY.get(key)
        if prop is None:
            roots = ", ".join(p.key for p in PROPERTIES if "." not in p.key)
            raise UnknownPropertyError(f"no property {key!r} (list '' to see {roots})")
        if prop.needs_world and conn.world is None:
            raise UnknownPropertyError(f"property {key!r} describes a joined world: join one first")
        return prop

    def _read(self, prop: Property, conn: Connection) -> _Value:
        if prop.row is None:
            raise PropertyPermissionError(
                f"property {prop.key!r} is a listable parent, not a value"
            )
        match prop.key:
            case "server.envs":
                return list(self.catalog)
            case "server.version":
                return __version__
            case "server.worlds":
                return len(self.worlds)
            case "world.player":
                return conn.seat
        assert conn.world is not None
        return self._readers[prop.key](conn.world)

    def _write(self, key: str, value: pb.Tensor, conn: Connection) -> None:
        prop = self._lookup(key, conn)
        if not prop.writable:
            raise PropertyPermissionError(f"property {key!r} is read-only")
        seed = dmenvrpc.unpack(value, f"value of property {key!r}", dmenvrpc.MAX_SETTING_ELEMENTS)
        if seed.size != 1 or seed.dtype.kind not in "iu" or int(seed.reshape(-1)[0]) < -1:
            shown = f"a {seed.dtype.name} tensor of shape {list(seed.shape)}"
            got = repr(seed.tolist()) if seed.size <= 8 else shown
            raise InvalidArgumentError(
                f"property {key!r} takes one integer >= 0 (or -1 for no seed), got {got}"
            )
        assert conn.world is not None
        number = int(seed.reshape(-1)[0])
        conn.world.pending_seed = None if number < 0 else number

    def _children(self, key: str, conn: Connection) -> list[Property]:
        if key:
            parent = self._lookup(key, conn)
            if parent.row is not None:
                raise PropertyPermissionError(f"property {key!r} is a value, not listable")
        depth = key.count(".") + 1 if key else 0
        prefix = f"{key}." if key else ""
        return [
            p
            for p in PROPERTIES
            if p.key.startswith(prefix)
            and p.key.count(".") == depth
            and (conn.world is not None or not p.needs_world)
        ]

    @staticmethod
    def _metadata(world: World) -> str:
        metadata: dict[str, Any] = world.spec.metadata()
        about = getattr(world.session.observation_space, "about", None)
        if about is not None and hasattr(about, "model_dump"):
            metadata["about"] = about.model_dump(mode="json")
        return json.dumps(metadata, default=repr)


def _seed(world: World) -> int:
    seed = world.session.last_seed
    return seed if isinstance(seed, int) else -1  # None, or one seed per copy


def _space_json(space: gymnasium.Space[Any]) -> str:
    try:
        return json.dumps(spacecodec.describe(space))
    except ConfigError as exc:  # a space envwire cannot describe (a typed env's model space)
        return json.dumps({"type": type(space).__name__, "repr": repr(space), "error": str(exc)})
