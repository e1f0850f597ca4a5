"""``envwire serve --workers N``: N server processes on the same ports, one server to clients.

Every test runs a real server of two workers (the kernel gives each new connection to one of
them) and plays what a client or an operator does: an HTTP session stepped over fresh
connections, a worker killed while sessions go on, SIGHUP, SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import envwire
from envwire.client import arena
from envwire.errors import EnvwireError
from envwire.server.supervisor import resolve_workers
from envwire.testing import ServerProcess, wait_until
from tests.arena.web.conftest import SERVED, make_db

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="Linux /proc")

TOKEN = "workers-token-0123456789abcdef"
NEW_TOKEN = "workers-token-fedcba9876543210"


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(w) for w in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess(
        ["CartPole-v1", "test/Echo-v0=envwire.envs.echo:EchoEnv"],
        front_ends=("gym-socket", "http", "grpc"),
        workers=2,
    ) as running:
        yield running


def test_every_port_is_announced_once_and_served_by_two_workers(server: ServerProcess) -> None:
    lines = [line for line in server.output if " listening on " in line]
    assert sorted(line.split()[1] for line in lines) == ["grpc", "gym-socket", "http"]
    assert len(server.children()) == 2
    for scheme, front_end in [("gym-socket", "gym-socket"), ("grpc", "grpc"), ("ws", "http")]:
        prefix = "envs/" if front_end == "http" else ""
        env = envwire.make(server.url(scheme, prefix + "CartPole-v1", front_end), timeout=30)
        env.reset(seed=1)
        env.step(0)
        env.close()


def test_http_session_stepped_over_30_fresh_connections(server: ServerProcess) -> None:
    """Each request a new connection, landing on either worker: the session is found."""
    base = f"http://127.0.0.1:{server.ports['http']}/envs/CartPole-v1"
    reset = httpx.post(f"{base}/reset", json={"seed": 3}, timeout=30)
    assert reset.status_code == 200, reset.text
    token = reset.headers["envwire-session"]
    assert token.startswith(("w0.", "w1.")), token
    for i in range(30):
        # httpx opens a connection of its own for each request
        step = httpx.post(
            f"{base}/step",
            json={"action": {"action": i % 2}},
            headers={"envwire-session": token},
            timeout=30,
        )
        assert step.status_code == 200, step.text
        if step.json()["done"]:
            again = httpx.post(
                f"{base}/reset", json={}, headers={"envwire-session": token}, timeout=30
            )
            assert again.status_code == 200, again.text
            assert again.headers["envwire-session"] == token
    state = httpx.get(f"{base}/state", headers={"envwire-session": token}, timeout=30)
    assert state.status_code == 200, state.text
    assert state.json()["step_count"] > 0
    # a token of no worker is the protocol's 404, wherever the request lands
    gone = httpx.post(
        f"{base}/step",
        json={"action": {"action": 1}},
        headers={"envwire-session": "w1.nope"},
        timeout=30,
    )
    assert gone.status_code == 404


def test_mcp_session_addressed_by_id_from_any_connection(server: ServerProcess) -> None:
    url = f"http://127.0.0.1:{server.ports['http']}/envs/test/Echo-v0/mcp"

    def call(method: str, params: dict[str, object]) -> dict[str, object]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer = httpx.post(url, json=body, timeout=30)
        assert answer.status_code == 200, answer.text
        reply: dict[str, object] = answer.json()
        assert "error" not in reply, reply
        return reply

    created = call("openenv/session/create", {})["result"]
    assert isinstance(created, dict)
    session_id = created["session_id"]
    for _ in range(10):
        call("tools/list", {"session_id": session_id})
    closed = call("openenv/session/close", {"session_id": session_id})["result"]
    assert closed == {"session_id": session_id, "closed": True}


def _steps_counted(text: str, env: str) -> float:
    """The ``envwire_steps_total`` of ``env`` in a ``/metrics`` answer, over front ends."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "envwire_steps_total" and sample.labels.get("env") == env:
                total += sample.value
    return total


def test_metrics_and_dashboard_count_every_worker_exactly(server: ServerProcess) -> None:
    """4 clients x 1,000 steps, spread over both workers: every scrape, whichever worker
    answers it, counts 4,000 (each a fresh connection)."""
    base = f"http://127.0.0.1:{server.ports['http']}"
    before = _steps_counted(httpx.get(f"{base}/metrics", timeout=30).text, "CartPole-v1")
    envs = _connected(server, 4)
    try:

        def run(env: envwire.Env) -> None:  # type: ignore[name-defined]
            for i in range(1000):
                _, _, terminated, truncated, _ = env.step(i % 2)
                if terminated or truncated:
                    env.reset()

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(run, envs))
        for _ in range(6):
            text = httpx.get(f"{base}/metrics", timeout=30).text
            assert _steps_counted(text, "CartPole-v1") - before == 4000
            live = httpx.get(f"{base}/dashboard/api/live", timeout=30).json()
            mine = [row for row in live["sessions"] if row["env"] == "CartPole-v1"]
            assert len(mine) >= 4
            status = httpx.get(f"{base}/status", timeout=30).json()  # OpenEnv's, summed too
            assert status["sessions"] >= 4 and status["capacity"] is None
    finally:
        for env in envs:
            env.close()


def _connected(server: ServerProcess, count: int) -> list[envwire.Env]:  # type: ignore[name-defined]
    envs = []
    for _ in range(count):
        env = envwire.make(server.url("gym-socket", "CartPole-v1"), timeout=30)
        env.reset(seed=0)
        envs.append(env)
    return envs


def test_a_killed_worker_is_replaced_and_the_others_sessions_go_on() -> None:
    with ServerProcess(["CartPole-v1"], front_ends=("gym-socket", "http"), workers=2) as server:
        workers = server.children()
        assert len(workers) == 2
        envs = _connected(server, 8)  # the kernel spreads them over both workers
        base = f"http://127.0.0.1:{server.ports['http']}/envs/CartPole-v1"
        tokens: dict[str, str] = {}  # an HTTP session in each worker, by its mark
        for _ in range(40):
            token = httpx.post(f"{base}/reset", json={}, timeout=30).headers["envwire-session"]
            tokens.setdefault(token[:3], token)
            if len(tokens) == 2:
                break
        assert sorted(tokens) == ["w0.", "w1."]
        os.kill(workers[0], signal.SIGKILL)
        assert wait_until(lambda: not _alive(workers[0]), 10)
        survived = failed = 0
        for env in envs:
            try:
                for _ in range(5):
                    _, _, terminated, _, _ = env.step(0)
                    if terminated:
                        env.reset()
                survived += 1
            except EnvwireError:
                failed += 1
            finally:
                env.close()
        assert survived and failed, (survived, failed)
        assert wait_until(
            lambda: len(server.children()) == 2 and workers[0] not in server.children(), 60
        )
        # the supervisor says so once the replacement listens (a loaded machine takes a while)
        assert wait_until(lambda: "worker 0 replaced by process" in "".join(server.output), 60)
        log = "".join(server.output)
        assert f"worker 0 (process {workers[0]}) killed by SIGKILL" in log, log
        # the replacement serves new connections (in time both workers take them)
        for env in _connected(server, 4):
            env.step(1)
            env.close()
        # worker 0's HTTP session ended with OpenEnv's answer for it; worker 1's goes on
        for _ in range(6):  # fresh connections, reaching either worker
            lost = httpx.post(
                f"{base}/step",
                json={"action": {"action": 0}},
                headers={"envwire-session": tokens["w0."]},
                timeout=30,
            )
            assert lost.status_code == 404, lost.text
            kept = httpx.get(
                f"{base}/state", headers={"envwire-session": tokens["w1."]}, timeout=30
            )
            assert kept.status_code == 200, kept.text


def test_sigterm_stops_every_worker_and_leaves_no_process() -> None:
    """With sessions in env processes of their own (@process) and in each worker's pool
    (@pool): SIGTERM ends every process below the server, within the grace period."""
    server = ServerProcess(
        [
            "test/P-v0=envwire.testing.envs:DictEnv@process",
            "test/Pool-v0=envwire.testing.envs:DictEnv@pool",
        ],
        ["--pool-workers", "1"],
        workers=2,
    )
    with server:
        envs = [
            envwire.make(server.url("gym-socket", env_id), timeout=30)
            for env_id in ["test/P-v0", "test/Pool-v0"] * 4
        ]
        for env in envs:
            env.reset(seed=0)
            for _ in range(3):
                env.step(env.action_space.sample())
        assert server.process is not None
        below = _descendants(server.process.pid)
        # two workers, the env processes of four sessions, a pool process in each worker
        assert len(below) >= 2 + 4 + 2, below
        started = time.monotonic()
        assert server.stop(timeout=30) == 0
        assert time.monotonic() - started < 15
        assert wait_until(lambda: not any(_alive(pid) for pid in below), 10), [
            pid for pid in below if _alive(pid)
        ]
        for env in envs:
            with contextlib.suppress(EnvwireError, OSError):
                env.close()


def test_sighup_reloads_tokens_in_every_worker(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(TOKEN + "\n")
    tokens.chmod(0o600)
    with ServerProcess(
        ["CartPole-v1"], ["--token-file", str(tokens)], front_ends=("http",), workers=2
    ) as server:
        url = f"http://127.0.0.1:{server.ports['http']}/envs/CartPole-v1/reset"

        def statuses(token: str) -> set[int]:
            """The answers to ten requests, each on a fresh connection (both workers)."""
            auth = {"authorization": f"Bearer {token}"}
            return {
                httpx.post(url, json={}, headers=auth, timeout=30).status_code for _ in range(10)
            }

        assert statuses(TOKEN) == {200}
        assert statuses(NEW_TOKEN) == {401}
        tokens.write_text(NEW_TOKEN + "\n")
        assert server.process is not None
        server.process.send_signal(signal.SIGHUP)
        assert wait_until(lambda: statuses(TOKEN) == {401}, 20)
        assert statuses(NEW_TOKEN) == {200}
        assert len(server.children()) == 2  # SIGHUP stopped nobody


def test_every_worker_records_into_one_dataset_and_none_is_lost(tmp_path: Path) -> None:
    minari = pytest.importorskip("minari")
    root = tmp_path / "datasets"
    finished: list[int] = []
    with ServerProcess(["CartPole-v1"], ("--record", str(root)), workers=2) as server:
        envs = _connected(server, 4)

        def play(env: envwire.Env) -> None:  # type: ignore[name-defined]
            ended = 0
            for _ in range(400):
                _, _, terminated, truncated, _ = env.step(env.action_space.sample())
                if terminated or truncated:
                    ended += 1
                    env.reset()
            finished.append(ended)
            env.close()

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(play, envs))
        assert server.stop(timeout=120) == 0  # SIGTERM: what is queued is written first
    # one dataset, written by worker 0, holding the episodes of both workers
    os.environ["MINARI_DATASETS_PATH"] = str(root)
    try:
        recorded = int(minari.load_dataset("CartPole-v1").total_episodes)
    finally:
        del os.environ["MINARI_DATASETS_PATH"]
    assert sum(finished) > 20
    assert recorded == sum(finished)


def test_the_arena_course_client_with_two_agents(tmp_path: Path) -> None:
    """The arena lives in worker 0; requests that reach worker 1 are passed there: two
    agents play their runs (one on a keep-alive connection, one on a fresh connection per
    request) and every worker shows the same results."""
    db = tmp_path / "arena.sqlite3"
    _, configs = make_db(db)
    args = ("--arena-db", str(db))
    with ServerProcess(SERVED, args, front_ends=("http",), workers=2) as server:
        base = f"http://127.0.0.1:{server.ports['http']}/"
        fresh = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), timeout=30)
        plays = [
            ({**configs["alice"], "url": base}, None),
            ({**configs["bob"], "url": base}, fresh),
        ]
        with ThreadPoolExecutor(2) as pool:
            summaries = list(
                pool.map(
                    lambda play: arena.run(
                        play[0], lambda left: left % 4 or 1, run_limit=12, client=play[1]
                    ),
                    plays,
                )
            )
        fresh.close()
        assert [len(s.finished) for s in summaries] >= [12, 12]
        answers = {httpx.get(f"{base}arena/api/results/nim", timeout=30).text for _ in range(10)}
        assert len(answers) == 1, answers  # whichever worker answered: the one arena
        page = httpx.get(f"{base}arena/env/nim", timeout=30)
        assert page.status_code == 200 and "alice" in page.text and "bob" in page.text


def test_workers_stop_when_the_supervisor_is_killed() -> None:
    with ServerProcess(["CartPole-v1"], workers=2) as server:
        workers = server.children()
        assert len(workers) == 2 and server.process is not None
        server.process.kill()
        assert wait_until(lambda: not any(_alive(pid) for pid in workers), 20)


def test_auto_is_the_cores_this_process_may_use() -> None:
    assert resolve_workers("auto") == len(os.sched_getaffinity(0))
    assert resolve_workers(3) == 3


def test_sigterm_while_the_workers_start_stops_everything(tmp_path: Path) -> None:
    """Stopped before it listens: no "listening" line, no process left."""
    command = [sys.executable, "-m", "envwire", "serve", "CartPole-v1", "--workers", "2"]
    command += ["--gym-socket", "0", "--http", "off", "--grpc", "off"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # the workers exist once the parent has bound the ports and started them
        assert wait_until(lambda: len(_descendants(process.pid)) >= 2, 60)
        below = _descendants(process.pid)
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=10)
    assert process.returncode == 0, output
    assert "listening on" not in output
    assert wait_until(lambda: not any(_alive(pid) for pid in below), 10)


def test_ray_envs_on_several_workers_need_a_named_cluster() -> None:
    """Each worker would start a Ray of its own: refused, saying what to do (auto falls back
    to one worker, where Ray starts on demand as before)."""
    command = [sys.executable, "-m", "envwire", "serve", "CartPole-v1@ray", "--workers", "2"]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 2, done.stderr
    assert "ray start --head" in done.stderr and "--workers 1" in done.stderr
    assert "listening" not in done.stdout


def test_http_sessions_per_address_bound_the_whole_server() -> None:
    """OpenEnv's HTTP sessions outlive their connections: one address's share and the total
    count every worker's sessions (each reset on a fresh connection, on either worker)."""
    args = ["--http-sessions-per-address", "3", "--http-max-sessions", "5"]
    with ServerProcess(["CartPole-v1"], args, front_ends=("http",), workers=2) as server:
        base = f"http://127.0.0.1:{server.ports['http']}/envs/CartPole-v1"
        answers = [httpx.post(f"{base}/reset", json={}, timeout=30) for _ in range(8)]
        opened = [a.headers["envwire-session"] for a in answers if a.status_code == 200]
        assert len(opened) == 3, [a.status_code for a in answers]
        assert {token[:3] for token in opened} <= {"w0.", "w1."}
        refused = [a for a in answers if a.status_code != 200]
        assert all(a.status_code == 503 and "holds" in a.text for a in refused), refused[0].text
        # closing one (through either worker) makes room for one more
        closed = httpx.delete(f"{base}/session", headers={"envwire-session": opened[0]}, timeout=30)
        assert closed.status_code == 200, closed.text
        again = httpx.post(f"{base}/reset", json={}, timeout=30)
        assert again.status_code == 200, again.text
