"""Loading plugin envs of the AISysProj interface: the interface names, the class check, the
settings, and uploads that are checked before anything is written."""

from __future__ import annotations

import io
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from envwire.arena.aisys import plugins
from envwire.arena.aisys.plugins import (
    PluginFolder,
    arena_settings,
    load_env_class,
    make_plugin,
    run_data,
)
from envwire.errors import ConfigError, InvalidArgumentError
from tests.arena.aisys.plugin_env import write_plugin, zipped_plugin


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[PluginFolder]:
    folder = PluginFolder(tmp_path / "plugins")
    yield folder
    sys.path.remove(str(folder.path))
    plugins.forget_package("countdown")


def test_the_interface_resolves_to_envwire_when_the_original_is_absent() -> None:
    plugins.install_interface()
    import aisysprojserver.env_interface as iface
    import aisysprojserver.env_settings as settings_module

    from envwire.arena.aisys.interface import env_interface, env_settings

    assert iface is env_interface
    assert settings_module is env_settings
    with pytest.raises(ImportError):
        __import__("aisysprojserver.app")


def test_load_and_describe_a_plugin(folder: PluginFolder) -> None:
    write_plugin(folder.path)
    assert folder.packages() == ["countdown"]
    cls = load_env_class("aisys:countdown.env:Countdown")
    settings, description = arena_settings(cls)
    assert settings == {
        "initial_rating": 0.0,
        "rating_runs": 3,
        "rating_objective": "max",
        "requests_per_reply": 2,
        "can_abandon": True,
    }
    assert description == "Count down to zero."
    env = make_plugin(cls, "Countdown", "cd", {"start": 4})
    assert env.env_info.identifier == "cd"
    state = env.new_run()
    request = env.get_action_request(run_data(1, "alice", state, []))
    assert request.content == {"left": 4, "history": 0}
    page = env.view_env(__import__("aisysprojserver.env_interface").env_interface.EnvData([], []))
    assert "<table>" in page


def test_bad_references(folder: PluginFolder) -> None:
    write_plugin(folder.path)
    with pytest.raises(ConfigError, match=r"package\.module:Class"):
        load_env_class("countdown.env")
    with pytest.raises(ConfigError, match="does not import"):
        load_env_class("nosuchplugin.env:Env")
    with pytest.raises(ConfigError, match=r"not a subclass of GenericEnvironment"):
        load_env_class("countdown.env:Any")

    class Broken(load_env_class("countdown.env:Countdown")):  # type: ignore[misc]
        def __init__(self, *args: object) -> None:
            raise KeyError("start")

    with pytest.raises(ConfigError, match=r"Broken\(...\) failed: KeyError"):
        make_plugin(Broken, "x", "x", None)


def test_upload_replaces_the_package_and_forgets_its_modules(folder: PluginFolder) -> None:
    assert folder.upload(zipped_plugin()) == "countdown"
    first = load_env_class("countdown.env:Countdown")
    changed = zipped_plugin(extra={"countdown/extra.py": b"X = 1\n"})
    assert folder.upload(changed) == "countdown"
    assert (folder.path / "countdown" / "extra.py").is_file()
    second = load_env_class("countdown.env:Countdown")
    assert second is not first
    assert not any(p.name.startswith(".") for p in folder.path.iterdir())


def _zip(names: dict[str, bytes], *, link: str | None = None) -> bytes:
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        for name, content in names.items():
            archive.writestr(name, content)
        if link is not None:
            info = zipfile.ZipInfo(link)
            info.external_attr = 0o120777 << 16
            archive.writestr(info, "/etc/passwd")
    return data.getvalue()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"not a zip", "not a zip file"),
        (_zip({}), "empty"),
        (_zip({"a/__init__.py": b"", "../evil.py": b""}), "unexpected file"),
        (_zip({"a/__init__.py": b"", "b/x.py": b""}), "unexpected file"),
        (_zip({"/abs/x.py": b""}), "one package folder"),
        (_zip({"a/x.py": b"", "a/../../x.py": b""}), "unexpected file"),
        (_zip({"a/x.py": b""}, link="a/link"), "unexpected file"),
        (_zip({"not-a-package/x.py": b""}), "one package folder"),
    ],
)
def test_unsafe_uploads_write_nothing(folder: PluginFolder, data: bytes, problem: str) -> None:
    with pytest.raises(InvalidArgumentError, match=problem):
        folder.upload(data)
    assert list(folder.path.iterdir()) == []


def test_upload_bounds(folder: PluginFolder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugins, "MAX_UPLOAD_FILES", 2)
    with pytest.raises(InvalidArgumentError, match="at most 2"):
        folder.upload(_zip({"a/1.py": b"", "a/2.py": b"", "a/3.py": b""}))
    monkeypatch.setattr(plugins, "MAX_UPLOAD_SIZE", 10)
    with pytest.raises(InvalidArgumentError, match="unpacks to 11 bytes"):
        folder.upload(_zip({"a/1.py": b"x" * 11}))


def test_only_average_ratings(folder: PluginFolder) -> None:
    class Odd:
        class settings:
            RATING_STRATEGY = "median"

    with pytest.raises(ConfigError, match="RATING_STRATEGY"):
        arena_settings(Odd)
