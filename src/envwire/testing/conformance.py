"""The conformance kit: the checks every envwire front end (and any compatible server) passes.

Subclass :class:`ConformanceTests` in a pytest module and provide :meth:`connect`; run the
server under test with :data:`~envwire.testing.serving.CONFORMANCE_ENVS`, ``--step-timeout``
:data:`STEP_TIMEOUT` and ``--capacity`` :data:`CAPACITY` (see :data:`SERVER_ARGS`)::

    class TestGymSocket(ConformanceTests):
        @pytest.fixture(autouse=True, scope="class")
        @classmethod
        def _server(cls, request):
            with ServerProcess(args=SERVER_ARGS) as server:
                request.cls.server = server
                yield

        def connect(self, env_id):
            return envwire.make(self.server.url("gym-socket", env_id))

Every check is black-box: it only uses the client env ``connect`` returns.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

import gymnasium
import numpy as np

from envwire.errors import (
    CapacityError,
    EnvwireError,
    InvalidActionError,
    StateError,
    TransportError,
)
from envwire.registry import parse_env_arg
from envwire.testing.serving import CONFORMANCE_ENVS

__all__ = ["CAPACITY", "SERVER_ARGS", "STEP_TIMEOUT", "ConformanceTests", "assert_same_sample"]

STEP_TIMEOUT = 2.0
CAPACITY = 24
SERVER_ARGS = ("--step-timeout", str(STEP_TIMEOUT), "--capacity", str(CAPACITY))


def assert_same_sample(a: object, b: object, where: str = "sample") -> None:
    """Assert two samples are equal in value, type, dtype and shape (recursively)."""
    if isinstance(a, dict):
        assert isinstance(b, dict), f"{where}: {type(b).__name__} is not a dict"
        assert set(a) == set(b), f"{where}: keys {sorted(b)} != {sorted(a)}"
        for key in a:
            assert_same_sample(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b), f"{where}: {b!r} is not like {a!r}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_sample(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), f"{where}: {type(b).__name__} is not an ndarray"
        assert a.dtype == b.dtype, f"{where}: dtype {b.dtype} != {a.dtype}"
        assert a.shape == b.shape, f"{where}: shape {b.shape} != {a.shape}"
        np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        assert type(a) is type(b) or (np.isscalar(a) and np.isscalar(b)), (
            f"{where}: {type(b).__name__} != {type(a).__name__}"
        )
        assert a == b, f"{where}: {b!r} != {a!r}"


class ConformanceTests:
    """Black-box checks of a served env; subclasses provide :meth:`connect`."""

    env_id = "CartPole-v1"
    image_env_id = "envwire/Catch-v0"
    rich_env_ids = ("test/Dict-v0", "test/Tuple-v0")
    crash_env_id = "test/Crash-v0"
    hang_env_id = "test/Hang-v0"
    raise_env_id = "test/Raise-v0"
    capacity = CAPACITY

    def connect(self, env_id: str) -> gymnasium.Env[Any, Any]:
        """A client env for ``env_id`` on the server under test."""
        raise NotImplementedError

    def local(self, env_id: str) -> gymnasium.Env[Any, Any]:
        """The same env made locally, for comparison."""
        for arg in CONFORMANCE_ENVS:
            spec = parse_env_arg(arg)
            if spec.id == env_id:
                return spec.make()
        return gymnasium.make(env_id)

    # -- the basics -------------------------------------------------------------------------

    def test_spaces_equal_the_local_env(self) -> None:
        for env_id in (self.env_id, self.image_env_id, *self.rich_env_ids):
            remote, local = self.connect(env_id), self.local(env_id)
            try:
                assert remote.action_space == local.action_space, env_id
                assert remote.observation_space == local.observation_space, env_id
            finally:
                remote.close()
                local.close()

    def test_reset_and_step(self) -> None:
        env = self.connect(self.env_id)
        try:
            obs, info = env.reset(seed=1)
            assert obs in env.observation_space
            assert isinstance(info, dict)
            obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
            assert obs in env.observation_space
            assert isinstance(reward, float)
            assert isinstance(terminated, bool) and isinstance(truncated, bool)
            assert isinstance(info, dict)
        finally:
            env.close()

    def test_episodes_equal_the_local_env(self) -> None:
        for env_id in (self.env_id, self.image_env_id, *self.rich_env_ids):
            self._compare_episode(env_id, seed=0)
        self._compare_episode(self.env_id, seed=12345)

    def _compare_episode(self, env_id: str, seed: int) -> None:
        remote, local = self.connect(env_id), self.local(env_id)
        try:
            local.action_space.seed(seed)
            got, expected = remote.reset(seed=seed), local.reset(seed=seed)
            assert_same_sample(expected[0], got[0], f"{env_id} reset(seed={seed})")
            for t in range(500):
                action = local.action_space.sample()
                e, g = local.step(action), remote.step(action)
                assert_same_sample(e[0], g[0], f"{env_id} step {t} observation")
                assert (g[1], g[2], g[3]) == (float(e[1]), e[2], e[3]), f"{env_id} step {t}"
                if e[2] or e[3]:
                    break
        finally:
            remote.close()
            local.close()

    def test_seed_zero_is_a_seed(self) -> None:
        env = self.connect(self.env_id)
        try:
            first, _ = env.reset(seed=0)
            env.step(env.action_space.sample())
            again, _ = env.reset(seed=0)
            other, _ = env.reset(seed=1)
            np.testing.assert_array_equal(first, again)
            assert not np.array_equal(first, other)
        finally:
            env.close()

    def test_sampled_actions_are_accepted(self) -> None:
        env = self.connect(self.image_env_id)
        try:
            env.reset(seed=3)
            for _ in range(5):
                action = env.action_space.sample()
                assert action in env.action_space
                env.step(action)
            sample_remote = getattr(env.unwrapped, "sample_remote_action", None)
            if sample_remote is not None:
                assert sample_remote() in env.action_space
        finally:
            env.close()

    def test_image_observations_are_uint8_arrays(self) -> None:
        env = self.connect(self.image_env_id)
        try:
            obs, _ = env.reset(seed=0)
            assert isinstance(obs, np.ndarray) and obs.dtype == np.uint8
            assert obs.shape == env.observation_space.shape
        finally:
            env.close()

    # -- errors -----------------------------------------------------------------------------

    def test_unknown_env_is_refused_with_suggestions(self) -> None:
        typo = self.env_id[:-1] + "9"
        try:
            env = self.connect(typo)
        except EnvwireError as exc:
            assert typo in str(exc) and "did you mean" in str(exc), str(exc)
        else:
            env.close()
            raise AssertionError(f"{typo!r} was accepted")

    def test_bad_action_is_reported_and_the_session_goes_on(self) -> None:
        env = self.connect(self.env_id)
        try:
            env.reset(seed=0)
            bad = self._bad_action(env.action_space)
            try:
                env.step(bad)
            except InvalidActionError as exc:
                assert "not in" in str(exc) or "expected" in str(exc), str(exc)
            else:
                raise AssertionError(f"action {bad!r} was accepted")
            obs, *_ = env.step(env.action_space.sample())
            assert obs in env.observation_space
        finally:
            env.close()

    @staticmethod
    def _bad_action(space: gymnasium.Space[Any]) -> int | np.ndarray:
        if isinstance(space, gymnasium.spaces.Discrete):
            return int(space.start + space.n + 3)
        if isinstance(space, gymnasium.spaces.Box):
            return np.full(space.shape, 1e9, space.dtype)
        raise NotImplementedError(space)

    def test_step_before_reset_is_refused(self) -> None:
        env = self.connect(self.env_id)
        try:
            try:
                env.unwrapped.step(env.action_space.sample())
            except StateError as exc:
                assert "reset" in str(exc).lower()
            else:
                raise AssertionError("step before reset was accepted")
            env.reset(seed=0)
        finally:
            env.close()

    def test_env_exception_is_reported_and_the_session_goes_on(self) -> None:
        env = self.connect(self.raise_env_id)
        try:
            env.reset(seed=0)
            env.step(env.action_space.sample())
            try:
                env.step(env.action_space.sample())
            except EnvwireError as exc:
                assert "RaiseEnv fails on purpose" in str(exc), str(exc)
            else:
                raise AssertionError("the env's exception was not reported")
            env.reset(seed=0)
            env.step(env.action_space.sample())
        finally:
            env.close()

    def test_env_crash_is_reported_and_others_go_on(self) -> None:
        bystander = self.connect(self.env_id)
        env = self.connect(self.crash_env_id)
        try:
            bystander.reset(seed=0)
            env.reset(seed=0)
            with _raises(EnvwireError) as caught:
                for _ in range(5):
                    env.step(env.action_space.sample())
            assert "SIGSEGV" in str(caught.error) or "crash" in str(caught.error), caught.error
            bystander.step(bystander.action_space.sample())
            env.reset(seed=0)  # a fresh env after the crash
            env.step(env.action_space.sample())
        finally:
            env.close()
            bystander.close()

    def test_env_hang_is_reported_and_others_go_on(self) -> None:
        bystander = self.connect(self.env_id)
        env = self.connect(self.hang_env_id)
        try:
            bystander.reset(seed=0)
            env.reset(seed=0)
            env.step(env.action_space.sample())
            start = time.monotonic()
            with _raises(EnvwireError) as caught:
                env.step(env.action_space.sample())
            assert "did not return within" in str(caught.error), caught.error
            assert time.monotonic() - start < 60
            bystander.step(bystander.action_space.sample())
        finally:
            env.close()
            bystander.close()

    def test_disconnect_frees_the_session(self) -> None:
        envs = [self.connect(self.env_id) for _ in range(self.capacity)]
        try:
            with _raises((CapacityError, TransportError)) as caught:
                self.connect(self.env_id).close()
            assert "capacity" in str(caught.error), caught.error
            envs.pop().close()
            deadline = time.monotonic() + 10
            while True:
                try:
                    envs.append(self.connect(self.env_id))
                    break
                except (CapacityError, TransportError):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        finally:
            for env in envs:
                env.close()


class _raises:
    """A tiny ``pytest.raises`` so the kit needs no pytest at import time."""

    def __init__(self, kind: type[BaseException] | tuple[type[BaseException], ...]) -> None:
        self.kind = kind
        self.error: BaseException | None = None

    def __enter__(self) -> _raises:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if exc is None:
            raise AssertionError(f"expected {self.kind}, nothing was raised")
        if not isinstance(exc, self.kind):
            return False
        self.error = exc
        return True
