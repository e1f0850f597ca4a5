"""Shared fixtures: a real ``envwire serve`` process with the conformance envs."""

from __future__ import annotations

import compileall
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from xdist.scheduler import LoadFileScheduling

import envwire
from envwire.envs.coding import host
from envwire.testing import CONFORMANCE_ENVS, SERVER_ARGS, ServerProcess

# These machines are shared and noisy: no per-example deadlines, no "too slow" health checks
# (correctness is what the property tests check; speed is the benchmarks' business).
settings.register_profile("envwire", deadline=None, suppress_health_check=[HealthCheck.too_slow])
# The fast lane's (docs/development.md): a tenth of the examples, for a quick loop while editing;
# the suite runs the full count.
settings.register_profile("fast", settings.get_profile("envwire"), max_examples=10)
settings.load_profile("envwire")

#: Why this host cannot build the code sandbox (no bubblewrap, no user namespaces), or None.
#: The sandbox's own tests skip there; every other test that runs code (the coding env's
#: behaviour, not its boundary) runs it in the unsafe fallback, through servers started here too.
SANDBOX_MISSING = host.missing_capability(host.find_bwrap(None))
if SANDBOX_MISSING is not None:
    os.environ["ENVWIRE_SANDBOX_UNSAFE"] = "1"


def pytest_configure(config: pytest.Config) -> None:
    """Refuse to run without the sandbox where it is required (CI sets
    ``ENVWIRE_TEST_REQUIRE_SANDBOX=1``): its tests must run there, not skip. Then compile the
    project's bytecode once (:func:`compile_once`)."""
    if SANDBOX_MISSING is not None and os.environ.get("ENVWIRE_TEST_REQUIRE_SANDBOX") == "1":
        raise pytest.UsageError(
            f"ENVWIRE_TEST_REQUIRE_SANDBOX=1, but this host cannot build the code sandbox: "
            f"{SANDBOX_MISSING}"
        )
    if not hasattr(config, "workerinput"):  # the main process, before xdist's workers start
        compile_once()


def compile_once() -> None:
    """Where Python writes no bytecode (``PYTHONDONTWRITEBYTECODE``, as on some CI hosts), every
    process of the suite (each xdist worker, and every server, worker process and example it
    starts: hundreds) would compile envwire from its source again, about 0.6 s of CPU each in
    a checkout installed editable. Compile it, the tests and the benchmarks once, here (under a
    second); a tree that cannot be written is left as it is."""
    if not sys.dont_write_bytecode:
        return
    root = Path(__file__).resolve().parent.parent
    for directory in (Path(envwire.__file__).resolve().parent, root / "tests", root / "benchmarks"):
        if directory.is_dir():
            compileall.compile_dir(directory, quiet=2)


#: Test files that take minutes, the longest first (their summed durations in a run of the
#: suite): they start first, in this order, so that with ``-n`` (pyproject's addopts) no worker
#: is left running one of them alone at the end. The docs' pages are units of their own
#: (:data:`SPREAD_FILES`), each as long as a long file.
LONG_FILES = (
    "tests/server/test_ray.py",
    "tests/docs/test_examples.py",
    "tests/adapters/training/test_sb3.py",
    "tests/frontends/openenv/test_openenv_clients.py",
    "tests/runtime/ray/test_worker.py",
    "tests/examples/test_sb3_ppo.py",
    "tests/server/test_workers.py",
    "tests/frontends/openenv/test_native_envs.py",
    "tests/frontends/openenv/test_strict_answers.py",
    "tests/client/test_openenv.py",
    # Under a minute each in a loaded run, but late in the collection's order (the top-level
    # files and tests/server/ sort last): started among the first, none of them is what one
    # worker still runs while the others have finished.
    "tests/server/test_soak.py",
    "tests/test_first_contact.py",
    "tests/frontends/openenv/test_long_steps.py",
    "tests/server/security/test_memory.py",
    "tests/test_first_mistakes.py",
    "tests/server/security/test_gymsocket.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the long files first, longest first, then the files marked slow (a stable sort: the
    order within and among the rest stays as collected, the same in every worker)."""

    def rank(item: pytest.Item) -> int:
        path = item.nodeid.partition("::")[0]
        if path in LONG_FILES:
            return LONG_FILES.index(path)
        return len(LONG_FILES) + (item.get_closest_marker("slow") is None)

    ranks: dict[str, int] = {}
    for item in items:
        path = item.nodeid.partition("::")[0]
        ranks[path] = min(ranks.get(path, rank(item)), rank(item))
    items.sort(key=lambda item: ranks[item.nodeid.partition("::")[0]])


@pytest.fixture(scope="session")
def gym_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server on a free gym-socket port, shared by the end-to-end tests."""
    root = tmp_path_factory.mktemp("monitor-root")
    args = (*SERVER_ARGS, "--capacity", "200", "--monitor-root", str(root))
    with ServerProcess(CONFORMANCE_ENVS, args) as server:
        server.monitor_root = root  # type: ignore[attr-defined]
        yield server


#: Test files whose tests share no fixture: with ``--dist loadfile`` (pyproject's addopts) each
#: of their tests is a unit of its own, spread over the workers, instead of the whole file going
#: to one worker (the docs' pages take minutes together: on one worker they were the suite's
#: longest thread).
SPREAD_FILES = ("tests/docs/test_examples.py",)


class _LoadFileSpreading(LoadFileScheduling):
    """``--dist loadfile``, but a test of :data:`SPREAD_FILES` is its own unit."""

    def _split_scope(self, nodeid: str) -> str:
        if nodeid.partition("::")[0] in SPREAD_FILES:
            return nodeid
        return super()._split_scope(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """The scheduler for ``--dist loadfile``; any other mode keeps xdist's own."""
    if config.getoption("dist") == "loadfile":
        # xdist would hand out the files with the most tests first, and the docs' pages, one
        # test each, last: the longest units would end the run alone. The collection's order
        # (pytest_collection_modifyitems: the longest first) is kept instead.
        config.option.loadscopereorder = False
        return _LoadFileSpreading(config, log)
    return None
