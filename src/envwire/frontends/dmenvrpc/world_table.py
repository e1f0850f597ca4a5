"""Every world of the dm_env_rpc front end, by name: creation (a world of one env or a vector
world), lookup, and lifetimes (a world lives while its creator's connection is open or some
connection is joined; when neither holds, it is destroyed at once and its session freed)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from envwire.errors import InvalidArgumentError, StateError
from envwire.frontends.dmenvrpc.native_world import NativeWorld
from envwire.frontends.dmenvrpc.vector import VectorWorld
from envwire.frontends.dmenvrpc.world import Connection, World
from envwire.kinds.dm_env import DmSpecs
from envwire.messages import autoreset_mode
from envwire.protocols.dmenvrpc import UnknownWorldError
from envwire.server.sessions import SessionTable

__all__ = ["WorldTable"]


def _vector_options(settings: Mapping[str, Any], max_num_envs: int) -> dict[str, Any]:
    """``sessions.open`` arguments for a vector world ({} for a world of one env)."""
    given = [name for name in ("num_envs", "autoreset_mode", "workers") if name in settings]
    if not given:
        return {}
    if "num_envs" not in settings:
        raise InvalidArgumentError(
            f"create_world setting {given[0]!r} is for vector worlds: set 'num_envs' too"
        )
    if settings["num_envs"] > max_num_envs:
        raise InvalidArgumentError(
            f"create_world setting 'num_envs' is {settings['num_envs']}, above this server's "
            f"limit of {max_num_envs} copies per world (grpc_max_num_envs)"
        )
    if settings.get("players", 1) != 1:
        raise InvalidArgumentError(
            f"create_world setting 'players' is {settings['players']}, but a vector world "
            "(num_envs) has one player, who steps every copy at once"
        )
    try:
        mode = autoreset_mode(settings.get("autoreset_mode", "NextStep")).value
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"create_world setting 'autoreset_mode': {exc}") from None
    return {
        "num_envs": settings["num_envs"],
        "autoreset_mode": mode,
        "workers": settings.get("workers", 1),
    }


class WorldTable:
    """Every world of one front end, by name, and their lifetimes.

    Args:
        sessions: the server's session table.
        max_num_envs: the most copies a vector world may have.
    """

    def __init__(self, sessions: SessionTable, max_num_envs: int = 4096) -> None:
        self.sessions = sessions
        self.max_num_envs = max_num_envs
        self._worlds: dict[str, World] = {}
        self._lock = threading.Lock()

    def create(self, settings: Mapping[str, Any], creator: Connection) -> World:
        """A new world for ``settings`` (already read by :func:`dmenvrpc.read_settings`): a
        vector world when they hold ``num_envs``, else a world laid out from the env's own specs
        when it is a dm_env env, else a world of its Gymnasium spaces.

        Raises:
            InvalidArgumentError: vector settings without ``num_envs``, or with several
                players, or too many copies; an unknown autoreset mode; constructor
                arguments (``kwargs``) the env's catalog entry does not open to clients.
            UnknownEnvError, CapacityError, EnvError, ConfigError: as opening a session does.
        """
        vector = _vector_options(settings, self.max_num_envs)
        kwargs = settings.get("kwargs")
        session = self.sessions.open(
            settings["env"], kwargs=kwargs, front_end="dm_env_rpc", peer=creator.peer, **vector
        )
        try:
            if vector:
                kind: type[World] = VectorWorld
            else:
                native = isinstance(session.native_specs(), DmSpecs)
                kind = NativeWorld if native else World
            world = kind(session, settings, creator)
        except BaseException:
            self.sessions.close(session)
            raise
        with self._lock:
            self._worlds[world.name] = world
        creator.created.add(world.name)
        return world

    def get(self, name: str) -> World:
        """The world called ``name``.

        Raises:
            UnknownWorldError: there is none.
        """
        world = self._worlds.get(name)
        if world is None:
            raise UnknownWorldError(
                f"no world named {name!r} on this server ({len(self._worlds)} worlds; "
                "CreateWorld answers with the name to use)"
            )
        return world

    def leave(self, conn: Connection) -> None:
        """``conn`` leaves its world, if it joined one; an unheld world is destroyed."""
        world = conn.world
        if world is not None:
            world.leave(conn)
            if not world.held:
                self._drop(world)

    def destroy(self, name: str, conn: Connection) -> None:
        """DestroyWorld.

        Raises:
            UnknownWorldError: no such world.
            StateError: connections are joined to it (the caller's included).
        """
        world = self.get(name)
        if conn.world is world:
            raise StateError(
                f"DestroyWorld of world {name}, which this connection has joined: leave it first"
            )
        if world.seats:
            raise StateError(
                f"world {name} has {len(world.seats)} joined connection(s); they must leave first"
            )
        self._drop(world)

    def disconnect(self, conn: Connection) -> None:
        """The stream of ``conn`` ended: leave its world and let go of the worlds it created."""
        self.leave(conn)
        for name in conn.created:
            world = self._worlds.get(name)
            if world is not None and world.creator is conn:
                world.creator = None
                if not world.held:
                    self._drop(world)
        conn.created.clear()

    def _drop(self, world: World) -> None:
        with self._lock:
            if self._worlds.pop(world.name, None) is None:
                return
        if world.creator is not None:
            world.creator.created.discard(world.name)
        self.sessions.close(world.session)

    def __len__(self) -> int:
        return len(self._worlds)

    def close_all(self) -> None:
        """Drop every world (front end shutdown)."""
        for world in list(self._worlds.values()):
            self._drop(world)
