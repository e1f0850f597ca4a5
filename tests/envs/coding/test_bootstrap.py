"""The bootstrap's audit hook on its own, in a fresh interpreter: the events that no program
in the sandbox can reach without first passing an import the hook refuses."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from envwire.envs.coding import bootstrap


def run_hooked(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a new interpreter, after the hook is installed as a sandboxed run has it."""
    program = textwrap.dedent(
        f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("bootstrap", {bootstrap.__file__!r})
        bootstrap = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(bootstrap)
        """
    ) + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-I", "-c", program],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )


@pytest.mark.parametrize("hooked", [True, False], ids=["hooked", "control"])
def test_no_new_interpreter_even_with_the_module_already_loaded(
    tmp_path: Path, hooked: bool
) -> None:
    """A subinterpreter would start without the hook: creating one is refused by its event
    (``cpython.PyInterpreterState_New``), not only by the import of the module. CPython reports
    the hook's refusal as its own ``RuntimeError``; without the hook the same code runs."""
    name = "_interpreters" if sys.version_info >= (3, 13) else "_xxsubinterpreters"
    hook = f"bootstrap._audit_hook({str(tmp_path)!r}, False, True, False)"
    result = run_hooked(
        tmp_path,
        f"""
        import {name} as interpreters
        if {hooked}:
            sys.addaudithook({hook})
        try:
            interp = interpreters.create()
        except RuntimeError as exc:
            print("refused:", exc)
        else:
            interpreters.run_string(interp, "print('a new interpreter ran')")
        """,
    )
    assert result.returncode == 0, result.stderr
    expected = "refused: interpreter creation failed" if hooked else "a new interpreter ran"
    assert result.stdout.strip() == expected


@pytest.mark.parametrize("module", ["_xxsubinterpreters", "_interpreters", "_testcapi"])
def test_the_modules_that_make_interpreters_are_refused(tmp_path: Path, module: str) -> None:
    result = run_hooked(
        tmp_path,
        f"""
        sys.addaudithook(bootstrap._audit_hook({str(tmp_path)!r}, False, True, False))
        import {module}
        """,
    )
    assert result.stderr.strip().splitlines()[-1] == (
        f"ImportError: sandbox: importing {module} is disabled"
    )
