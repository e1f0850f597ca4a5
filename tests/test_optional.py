"""Each optional feature, imported or used without its extra, raises an ImportError that says
which extra to install (and PyTorch's CPU build first where the extra needs PyTorch), and the
extras named in messages are those pyproject.toml defines."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

from envwire.optional import EXTRAS, TORCH_CPU, MissingExtraError, install_line, requires

ROOT = Path(__file__).resolve().parents[1]

#: extra -> (the modules hidden, as if not installed; what the user does that needs them)
FEATURES = {
    "sb3": (["stable_baselines3"], "import envwire.adapters.training.sb3"),
    "torchrl": (["torchrl"], "import envwire.adapters.training.torchrl"),
    "rllib": (
        ["ray"],
        "from envwire.adapters.training.rllib import register\nregister()",
    ),
    "ray": (["ray"], "from envwire.runtime.ray import require_ray\nrequire_ray()"),
    "minari": (["minari"], "import envwire.observe.datasets"),
    "dm-control": (
        ["dm_control"],
        "from envwire.kinds.dm_env.control import suite_names\nsuite_names()",
    ),
}

#: Runs the feature with its modules hidden; prints what it raised, as ``kind|message``.
PROGRAM = """
import sys
for name in {hidden!r}:
    sys.modules[name] = None  # an import of it fails as if it were not installed
try:
{code}
except ImportError as exc:
    from envwire.errors import ConfigError
    print(type(exc).__name__, isinstance(exc, ConfigError), exc, sep="|")
else:
    print("no error")
"""


@pytest.mark.parametrize("extra", list(FEATURES))
def test_a_feature_without_its_extra_names_the_extra(extra: str) -> None:
    hidden, code = FEATURES[extra]
    program = PROGRAM.format(hidden=hidden, code=textwrap.indent(code, "    "))
    done = subprocess.run(
        [sys.executable, "-c", program],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    kind, is_config_error, message = done.stdout.strip().split("|", 2)
    assert (kind, is_config_error) == ("MissingExtraError", "True")
    assert f"pip install 'envwire[{extra}]'" in message
    assert (TORCH_CPU in message) == (extra in ("sb3", "torchrl", "rllib"))
    assert "\n" not in message  # one line


def test_the_message_says_what_needs_what() -> None:
    with pytest.raises(ImportError) as raised, requires("sb3", "the thing"):
        import a_module_that_is_not_there  # type: ignore[import-not-found]  # noqa: F401
    assert isinstance(raised.value, MissingExtraError)
    assert str(raised.value) == (
        "the thing needs Stable-Baselines3, which is not installed: pip install 'envwire[sb3]' "
        "(PyTorch's CPU build first, where no GPU is wanted: pip install torch --index-url "
        "https://download.pytorch.org/whl/cpu) (No module named 'a_module_that_is_not_there')"
    )
    assert raised.value.extra == "sb3"


def test_other_errors_pass_through_and_names_are_checked() -> None:
    with pytest.raises(ZeroDivisionError), requires("minari", "x"):
        1 / 0  # noqa: B018
    with pytest.raises(KeyError, match="no extra named 'sb4'"):
        install_line("sb4")


def test_the_extras_are_those_of_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set(project["optional-dependencies"])
    assert extras - {"test", "all"} == set(EXTRAS)
