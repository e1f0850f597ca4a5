"""``examples/train_cleanrl_ppo.py``: a tiny training run over a real server trains exactly what
the same run on local copies trains, and the script runs as documented."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envwire.testing import ServerProcess

torch = pytest.importorskip("torch", reason="the example trains with torch")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_cleanrl_ppo.py"


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with ServerProcess(["CartPole-v1"], front_ends=("gym-socket",)) as server:
        yield server.url("gym-socket", "CartPole-v1")


@pytest.fixture(scope="module")
def example() -> Any:
    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        import train_cleanrl_ppo
    finally:
        sys.path.remove(str(EXAMPLE.parent))
    return train_cleanrl_ppo


def test_training_over_the_wire_equals_training_locally(url: str, example: Any) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        remote = example.train(example.make_remote(url), 512, 3, rollout_steps=32)
        local = example.train(example.make_local, 512, 3, rollout_steps=32)
    finally:
        torch.set_num_threads(threads)
    assert remote["steps"] == local["steps"] == 512
    assert remote["returns"] == local["returns"]
    assert len(local["returns"]) > 8  # episodes ended, so the autoreset path ran
    params = local["params"]
    assert params.keys() == remote["params"].keys()
    assert all(torch.equal(remote["params"][k], params[k]) for k in params)
    # and training changed them: the same seed's untrained agent differs
    torch.manual_seed(3)
    fresh = example.Agent(4, 2).state_dict()
    assert not all(torch.equal(fresh[k], params[k]) for k in params)


@pytest.mark.parametrize("local", [False, True], ids=["wire", "local"])
def test_the_script_runs(url: str, local: bool) -> None:
    command = [sys.executable, str(EXAMPLE), "--steps", "1024"]
    command += ["--local"] if local else ["--url", url]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    where = "local" if local else url
    assert lines[0] == f"PPO (CleanRL-style), CartPole-v1, 1,024 steps, 8 envs, {where}"
    assert lines[1].startswith("wall time ")
    assert lines[2].startswith("episodes ")
