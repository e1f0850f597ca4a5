"""The training examples' progress lines (``examples/_progress.py``): a line every ``every``
seconds while Stable-Baselines3 trains, read from the training loop's locals as SB3 hands them
to a callback. The examples themselves need PyTorch; this part does not."""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path
from types import ModuleType, SimpleNamespace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_progress", EXAMPLES / "_progress.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_line_every_ten_seconds_of_training() -> None:
    now = [0.0]
    out = io.StringIO()
    progress = _module().Progress("envwire", 100_000, out=out, clock=lambda: now[0])
    model = SimpleNamespace(num_timesteps=0, ep_info_buffer=[])
    for step in range(1, 25):  # a step every second: lines at 10 s and 20 s
        now[0] = float(step)
        model.num_timesteps = step * 1000
        model.ep_info_buffer = [{"r": 20.0, "l": 20}, {"r": 40.0, "l": 40}] if step > 15 else []
        assert progress({"self": model}, {}) is True  # SB3 goes on training
    assert out.getvalue().splitlines() == [
        "envwire: 10,000/100,000 steps (10%), 1,000 steps/s, 10 s",
        "envwire: 20,000/100,000 steps (20%), 1,000 steps/s, mean return 30.0, 20 s",
    ]


def test_the_sb3_example_reports_progress() -> None:
    source = (EXAMPLES / "train_sb3_ppo.py").read_text()
    assert "model.learn(steps, callback=progress)" in source
    assert "from _progress import Progress" in source
