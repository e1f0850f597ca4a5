"""``examples/train_sb3_ppo.py`` as documented: a short run over a real server trains what the
local run trains and exits 0 (a short run is no failure: only a full run is judged by its
return)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envwire.testing import ServerProcess

pytest.importorskip("stable_baselines3", reason="the example trains with Stable-Baselines3")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_sb3_ppo.py"


def test_a_short_run_is_no_failure() -> None:
    with ServerProcess(["CartPole-v1"], front_ends=("gym-socket",)) as server:
        command = [sys.executable, str(EXAMPLE), "--steps", "2048"]
        command += ["--url", server.url("gym-socket", "CartPole-v1")]
        done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "identical policy parameters: yes" in done.stdout
    assert "solved: not judged (2,048 steps; it takes about 100,000)" in done.stdout
