"""A small env written in the AISysProj server's plugin interface, for the tests.

Countdown: the run starts at ``start`` (config), the agent takes 1 or 2 each turn, and whoever
reaches 0 wins; the env answers by taking 1 (recorded as the action's extra info). Outcome 1
for a win, 0 for a loss; abandoned runs count -1. :func:`write_plugin` writes it as a plugin
package into a plugins folder, exactly as an organizer's plugin would be laid out.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

__all__ = ["SOURCE", "write_plugin", "zipped_plugin"]

SOURCE = """
from typing import Any

from aisysprojserver.env_interface import (
    ActionRequest, ActionResult, GenericEnvironment, RunData,
)
from aisysprojserver.env_mixins import SimpleViewAgent, SimpleViewEnv
from aisysprojserver.env_settings import EnvSettings


class Countdown(SimpleViewEnv, SimpleViewAgent, GenericEnvironment):
    settings = EnvSettings()
    settings.MIN_RUNS_FOR_FULLY_EVALUATED = 3
    settings.NUMBER_OF_ACTION_REQUESTS = 2
    settings.CAN_ABANDON_RUNS = True
    settings.DESCRIPTION = "Count down to zero."

    def new_run(self) -> Any:
        return {"left": self.config_json["start"], "moves": 0}

    def get_action_request(self, run_data: RunData) -> ActionRequest:
        return ActionRequest(content={"left": run_data.state["left"],
                                      "history": len(run_data.action_history)})

    def act(self, action: Any, run_data: RunData) -> ActionResult:
        if action == "explode":
            raise RuntimeError("boom")
        if action not in (1, 2):
            return ActionResult.error(f"take 1 or 2, not {action!r}")
        left = run_data.state["left"] - action
        moves = run_data.state["moves"] + 1
        if left <= 0:
            return ActionResult(new_state={"left": 0, "moves": moves}, outcome=1,
                                message="you win")
        left -= 1
        return ActionResult(new_state={"left": left, "moves": moves}, action_extra_info=1,
                            message=f"I took 1, {left} left",
                            outcome=0 if left == 0 else None)

    def get_abandon_outcome(self, run_data: RunData) -> Any:
        return -1
"""


def write_plugin(folder: Path, package: str = "countdown") -> Path:
    """Write the plugin package ``package`` (module ``env``) into a plugins folder."""
    root = folder / package
    root.mkdir(parents=True, exist_ok=True)
    (root / "__init__.py").write_text("__version__ = '1.0'\n")
    (root / "env.py").write_text(SOURCE)
    return root


def zipped_plugin(package: str = "countdown", extra: dict[str, bytes] | None = None) -> bytes:
    """The plugin as a zip of its package folder (what an upload sends)."""
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        archive.writestr(f"{package}/__init__.py", "__version__ = '1.0'\n")
        archive.writestr(f"{package}/env.py", SOURCE)
        for name, content in (extra or {}).items():
            archive.writestr(name, content)
    return data.getvalue()
