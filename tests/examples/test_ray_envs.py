"""``examples/ray_envs.py`` runs as documented: envwire clients in Ray tasks and actors, and an
RLlib env creator registered with Tune, against a real server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytest.importorskip("ray.tune", reason="the example registers an env creator with Tune")

from envwire.testing import ServerProcess

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ray_envs.py"


def test_the_example_runs_against_a_server() -> None:
    with ServerProcess(["CartPole-v1"]) as server:
        url = server.url("gym-socket", "CartPole-v1")
        done = subprocess.run(
            [sys.executable, str(EXAMPLE), "--url", url, "--ray-address", "local"],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert sum(line.startswith("task episode seed=") for line in lines) == 4, done.stdout
    assert any(line.startswith("actor make_vec: 8 copies x 50 steps") for line in lines)
    assert any("RLlib env creator 'envwire-cartpole' registered" in line for line in lines)
    assert any("Discrete(2)" in line for line in lines)
