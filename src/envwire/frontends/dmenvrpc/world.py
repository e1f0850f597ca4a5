"""Worlds for the dm_env_rpc front end: each world is one envwire session, shared by its players.

A world holds one env (an envwire :class:`~envwire.session.Session`) and the connections joined
to it, each in a seat. The env is reset lazily: the Step that starts a connection's sequence
resets it, unless the world has a live episode that connection has not seen yet (the other
players of a multi-player world join the episode the first one started). Reset, ResetWorld and
the end of an episode are noted, and every joined connection learns of them at its next Step
(TERMINATED or INTERRUPTED), as dm_env_rpc's state machine wants.

Multi-player worlds (``players`` > 1 at CreateWorld) take turns when the env says whose turn it
is: ``info["to_play"]`` (a seat, from 0), or a typed observation's ``next_player`` (from 1, the
OpenEnv Connect4 convention). A Step with actions out of turn is an error; in a multi-player
world a Step without actions only looks (it returns the current observation), so a player
waits for its turn by stepping without actions. Rewards go to the player who moved, or to
every seat when ``info["rewards"]`` lists one reward per seat.

A world made with the CreateWorld setting ``num_envs`` is a vector world
(:class:`~envwire.frontends.dmenvrpc.vector.VectorWorld`): N copies stepped together, one player.

Lifetime (:class:`~envwire.frontends.dmenvrpc.world_table.WorldTable`): a world lives while its
creator's connection is open or some connection is joined; when neither holds, it is destroyed
at once and its session freed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

from dm_env_rpc.v1 import dm_env_rpc_pb2 as pb

from envwire import jsonio
from envwire import messages as m
from envwire.errors import EnvError, EnvTimeoutError, InvalidArgumentError, StateError
from envwire.protocols.dmenvrpc import WORLD_OBSERVATIONS, Layout, Phase
from envwire.registry import EnvSpec
from envwire.session import Session

__all__ = ["Connection", "World"]

#: Observation names the world adds beside the env's own.
REWARD, DISCOUNT, TRUNCATED, INFO = WORLD_OBSERVATIONS


class Connection:
    """One ``Process`` stream's state: its phase, its world and seat, what it has seen.

    Args:
        abort: called (from any thread) when the connection must be dropped at once, e.g.
            because the env it was stepping hung.
        peer: the client's address (gRPC's ``context.peer()``).
    """

    def __init__(self, abort: Callable[[], None] = lambda: None, peer: str = "") -> None:
        self.abort = abort
        self.peer = peer
        self.phase = Phase.UNJOINED
        self.world: World | None = None
        self.created: set[str] = set()
        self.seat = 0
        self.seen = -1  # the world episode this connection's sequence belongs to
        self.last_obs: object = None
        self.truncated = False
        self.specs: pb.ActionObservationSpecs | None = None  # set when it joins a world
        self.uids: frozenset[int] = frozenset()
        # The last StepRequest's requested_observations, and the same checked, repeats dropped:
        # a client asks for the same ones every step, so they are checked once.
        self.asked: list[int] | None = None
        self.requested: list[int] = []

    @property
    def world_name(self) -> str:
        """The joined world's name ('' when not joined)."""
        return self.world.name if self.world is not None else ""


class World:
    """One env and its joined connections (see the module docstring).

    Raises (from the constructor):
        ConfigError: the env's spaces cannot be laid out as tensors.
    """

    def __init__(self, session: Session, settings: Mapping[str, Any], creator: Connection) -> None:
        self.session = session
        self.name = session.id
        self.players: int = settings.get("players", 1)
        self.kwargs: dict[str, Any] = dict(settings.get("kwargs", {}))
        self.pending_seed: int | list[int | None] | None = None
        self.pending_options: dict[str, Any] | None = None
        self.creator: Connection | None = creator
        self._lay_out()
        self._hold(settings, "create_world")
        self.seats: dict[int, Connection] = {}
        self.episode = 0  # how many episodes the env has started
        self.live = False  # the latest episode is under way
        self.outcome = Phase.TERMINATED  # how the latest episode ended
        self.obs: object = None
        self.info: dict[str, Any] = {}
        self.to_play: int | None = None
        self.rewards: dict[int, float] = {}
        self.broken: EnvTimeoutError | None = None
        self._busy: Connection | None = None
        self._lock = threading.Lock()  # held while the env is called
        self._seats_lock = threading.Lock()  # seats only: never waits on the env
        step_timeout = self.spec.resolved_step_timeout
        # -1: no deadline (OpenEnv's own envs), so the next call waits as long as this one takes.
        self._timeout = -1.0 if step_timeout is None else step_timeout + 5.0
        session.set_on_hang(self._hung)

    def _lay_out(self) -> None:
        """Make the action and observation layouts and the UIDs of the added observations."""
        session = self.session
        self.actions = Layout(session.action_space, "action")
        self.observations = Layout(
            session.observation_space, "observation", reserved=WORLD_OBSERVATIONS
        )
        uid = self.observations.next_uid
        self.extra_uids = {REWARD: uid, DISCOUNT: uid + 1, TRUNCATED: uid + 2, INFO: uid + 3}

    def _hold(self, settings: Mapping[str, Any], request: str) -> None:
        """Keep a request's ``seed`` (and ``reset_mask``) for the next episode; a request
        without a mask drops a pending one.

        Raises:
            InvalidArgumentError: per-copy seeds or a reset mask, which only a vector world
                takes.
        """
        seed = settings.get("seed")
        if isinstance(seed, list) or "reset_mask" in settings:
            what = "'seed' with one seed per copy" if isinstance(seed, list) else "'reset_mask'"
            raise InvalidArgumentError(
                f"{request} setting {what} is for vector worlds (CreateWorld num_envs); world "
                f"{self.name} has one env"
            )
        if "seed" in settings:
            self.pending_seed = seed

    @property
    def spec(self) -> EnvSpec:
        """The catalog entry of the world's env."""
        assert self.session.spec is not None  # worlds are only made for catalog ids
        return self.session.spec

    # -- joining and leaving -------------------------------------------------------------

    def join(self, conn: Connection, settings: Mapping[str, Any]) -> pb.ActionObservationSpecs:
        """Seat ``conn``; returns its ``ActionObservationSpecs``.

        Raises:
            StateError: the world is full or the seat is taken.
            InvalidArgumentError: the seat does not exist.
        """
        with self._seats_lock:
            seat = settings.get("player")
            if seat is None:
                free = [s for s in range(self.players) if s not in self.seats]
                if not free:
                    raise StateError(
                        f"world {self.name} ({self.session.env_id}) is full: its {self.players} "
                        f"seat(s) are taken"
                    )
                seat = free[0]
            elif seat >= self.players:
                raise InvalidArgumentError(
                    f"join_world setting 'player' is {seat}, but world {self.name} has seats "
                    f"0..{self.players - 1}"
                )
            elif seat in self.seats:
                raise StateError(f"seat {seat} of world {self.name} is taken")
            self.seats[seat] = conn
        conn.world, conn.seat, conn.seen, conn.last_obs = self, seat, -1, None
        conn.specs = self._specs(settings)
        conn.uids = frozenset(conn.specs.observations)
        conn.asked = None
        return conn.specs

    def _specs(self, settings: Mapping[str, Any]) -> pb.ActionObservationSpecs:
        specs = pb.ActionObservationSpecs()
        for uid, spec in self.actions.specs().items():
            specs.actions[uid].CopyFrom(spec)
        for uid, spec in self.observations.specs().items():
            specs.observations[uid].CopyFrom(spec)
        for name, spec in self._extra_specs(settings).items():
            specs.observations[self.extra_uids[name]].CopyFrom(spec)
        return specs

    def _extra_specs(self, settings: Mapping[str, Any]) -> dict[str, pb.TensorSpec]:
        """The specs of the observations the world adds, by name, for JoinWorld ``settings``."""
        extras = {REWARD: pb.TensorSpec(name=REWARD, dtype=pb.DOUBLE)}
        if settings.get("discount"):
            discount = pb.TensorSpec(name=DISCOUNT, dtype=pb.DOUBLE)
            discount.min.doubles.array.append(0.0)
            discount.max.doubles.array.append(1.0)
            extras[DISCOUNT] = discount
        if settings.get("envwire.extras"):
            extras[TRUNCATED] = pb.TensorSpec(name=TRUNCATED, dtype=pb.BOOL)
            extras[INFO] = pb.TensorSpec(name=INFO, dtype=pb.STRING)
        return extras

    def leave(self, conn: Connection) -> None:
        """Free ``conn``'s seat (it is no longer joined)."""
        with self._seats_lock:
            if self.seats.get(conn.seat) is conn:
                del self.seats[conn.seat]
        conn.world, conn.phase = None, Phase.UNJOINED

    @property
    def held(self) -> bool:
        """True while the creator's connection is open or a connection is joined."""
        return self.creator is not None or bool(self.seats)

    # -- stepping -----------------------------------------------------------------------

    def step(self, conn: Connection, request: pb.StepRequest, out: pb.StepResponse) -> None:
        """Carry out ``conn``'s StepRequest, filling the StepResponse ``out``.

        Raises:
            InvalidArgumentError: a requested observation UID is unknown.
            InvalidActionError: an action is missing, unknown or does not fit its spec.
            StateError: actions out of turn.
            EnvError: the env failed (the connection's next Step starts a new sequence).
        """
        asked = request.requested_observations
        if asked != conn.asked:
            conn.requested = self._requested(conn, asked)
            conn.asked = asked[:]
        requested = conn.requested
        self._acquire(conn)
        try:
            if conn.phase is not Phase.RUNNING:
                if not (self.live and conn.seen < self.episode):
                    self._start_episode()
                conn.seen, conn.truncated = self.episode, False
                self.rewards.pop(conn.seat, None)
                state = Phase.RUNNING
            elif conn.seen != self.episode or not self.live:
                state = self.outcome if conn.seen == self.episode else Phase.INTERRUPTED
            else:
                state = self._act(conn, request.actions)
            conn.phase = state
            if conn.seen == self.episode:
                conn.last_obs = self.obs
            reward = self.rewards.pop(conn.seat, 0.0)
            info = self.info
        finally:
            self._release()
        out.state = _STATES[state]
        if requested:
            self._observe(conn, out.observations, requested, reward, info)

    @staticmethod
    def _requested(conn: Connection, asked: Sequence[int]) -> list[int]:
        """The requested observation UIDs, repeats dropped (they are redundant).

        Raises:
            InvalidArgumentError: a UID is not in ``conn``'s observation specs.
        """
        requested = list(dict.fromkeys(asked))
        for uid in requested:
            if uid not in conn.uids:
                specs = conn.specs.observations if conn.specs is not None else {}
                known = ", ".join(f"{u} ({s.name!r})" for u, s in specs.items())
                raise InvalidArgumentError(
                    f"requested observation uid {uid} is not in the observation specs "
                    f"(known: {known})"
                )
        return requested

    def _act(self, conn: Connection, actions: Mapping[int, pb.Tensor]) -> Phase:
        if not actions and self.players > 1:
            return Phase.RUNNING  # a player without a move just looks
        if self.to_play is not None and self.to_play != conn.seat:
            raise StateError(
                f"player {conn.seat} sent actions in world {self.name}, but player "
                f"{self.to_play} is to move; step without actions to wait for your turn"
            )
        reply = self._env_step(conn, self.actions.read(actions, "action"))
        assert isinstance(reply, m.StepReply)
        self.obs, self.info = reply.observation, reply.info
        self._reward(reply.reward, reply.info, conn.seat)
        self.to_play = self._turn(reply.info, reply.observation)
        if reply.terminated or reply.truncated:
            self.live = False
            self.outcome = Phase.TERMINATED if reply.terminated else Phase.INTERRUPTED
            conn.truncated = not reply.terminated
            return self.outcome
        return Phase.RUNNING

    def _env_step(self, conn: Connection, action: object) -> m.Reply:
        """Step the env; if it fails, the episode ends (INTERRUPTED) and the error is raised.
        The tap hears of it once the response is out (the stream's ``tell``)."""
        try:
            return self.session.step(m.Step(action), tell=False)
        except (EnvError, StateError):
            self.live, self.outcome = False, Phase.INTERRUPTED
            conn.phase = Phase.INTERRUPTED
            raise

    def _start_episode(self) -> None:
        seed, self.pending_seed = self.pending_seed, None
        options, self.pending_options = self.pending_options, None
        try:
            # a copy: Gymnasium's vector reset pops the reset mask out of the options it gets
            reset = m.Reset(seed=seed, options=dict(options) if options else None)
            reply = self.session.handle(reset)
        except BaseException:
            self.pending_seed, self.pending_options, self.live = seed, options, False
            raise
        assert isinstance(reply, m.ResetReply)
        self.episode += 1
        self.live = True
        self.obs, self.info = reply.observation, reply.info
        self.rewards.clear()
        self.to_play = self._turn(reply.info, reply.observation)

    def _reward(self, reward: float, info: Mapping[str, Any], mover: int) -> None:
        shares = info.get("rewards") if self.players > 1 else None
        if isinstance(shares, list | tuple) and len(shares) == self.players:
            for seat, share in enumerate(shares):
                self.rewards[seat] = self.rewards.get(seat, 0.0) + float(share)
        else:
            self.rewards[mover] = self.rewards.get(mover, 0.0) + reward

    def _turn(self, info: Mapping[str, Any], observation: object) -> int | None:
        if self.players == 1:
            return None
        seat = info.get("to_play")
        if seat is None:
            player = getattr(observation, "next_player", None)
            seat = player - 1 if isinstance(player, int) else None
        return int(seat) if seat is not None else None

    def _observe(
        self,
        conn: Connection,
        out: MutableMapping[int, pb.Tensor],
        requested: list[int],
        reward: float,
        info: dict[str, Any],
    ) -> None:
        self.observations.write(conn.last_obs, out, requested)
        extras = self.extra_uids
        for uid in requested:
            if uid == extras[REWARD]:
                self._put_reward(out[uid], reward)
            elif uid == extras[DISCOUNT]:
                self._put_discount(out[uid], conn, info)
            elif uid == extras[TRUNCATED]:
                out[uid].bools.array.append(conn.truncated)
            elif uid == extras[INFO]:
                out[uid].strings.array.append(jsonio.dumps_info(info, typed=True).decode())

    def _put_reward(self, out: pb.Tensor, reward: float) -> None:
        out.doubles.array.append(reward)

    def _put_discount(self, out: pb.Tensor, conn: Connection, info: Mapping[str, Any]) -> None:
        out.doubles.array.append(0.0 if conn.phase is Phase.TERMINATED else 1.0)

    # -- resets -------------------------------------------------------------------------

    def reset(
        self, conn: Connection, settings: Mapping[str, Any]
    ) -> pb.ActionObservationSpecs | None:
        """``conn``'s ResetRequest: its next Step starts a new episode; returns its specs.

        Raises:
            InvalidArgumentError: a seed or reset mask this world cannot take.
        """
        with self._locked():
            self._hold(settings, "reset")
        conn.phase = Phase.INTERRUPTED
        return conn.specs

    def reset_world(self, settings: Mapping[str, Any], caller: Connection) -> None:
        """End the current episode for every joined connection (each sees INTERRUPTED at its
        next Step; the caller, if joined, starts the next sequence at once).

        Raises:
            InvalidArgumentError: a seed this world cannot take.
        """
        with self._locked():
            self._hold(settings, "reset_world")
            if self.live:
                self.live, self.outcome = False, Phase.INTERRUPTED
        if caller.world is self:
            caller.phase = Phase.INTERRUPTED

    # -- hangs --------------------------------------------------------------------------

    def _acquire(self, conn: Connection | None) -> None:
        """Take the env for ``conn`` (None: not a Step); release with :meth:`_release`.

        Raises:
            EnvTimeoutError: the env hung earlier, or stayed busy past the step timeout.
        """
        if self.broken is not None:
            raise EnvTimeoutError(
                f"world {self.name}: {self.broken}; destroy it and create another"
            )
        if not self._lock.acquire(timeout=self._timeout):
            raise EnvTimeoutError(
                f"world {self.name} stayed busy for {self._timeout:g} s (its env is stuck)"
            )
        self._busy = conn

    def _release(self) -> None:
        self._busy = None
        self._lock.release()

    @contextlib.contextmanager
    def _locked(self, conn: Connection | None = None) -> Iterator[None]:
        self._acquire(conn)
        try:
            yield
        finally:
            self._release()

    def _hung(self, error: EnvTimeoutError) -> None:
        """Watchdog thread: an inline env call is stuck in the thread of ``self._busy``."""
        self.broken = error
        busy = self._busy
        if busy is not None:
            busy.abort()


_STATES = {
    Phase.RUNNING: pb.RUNNING,
    Phase.TERMINATED: pb.TERMINATED,
    Phase.INTERRUPTED: pb.INTERRUPTED,
}
