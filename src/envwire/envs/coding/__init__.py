"""Coding: an env that runs Python code agents write, behind an OS sandbox.

:mod:`~envwire.envs.coding.env` is the env (``envwire/Coding-v0``);
:mod:`~envwire.envs.coding.sandbox` runs each program behind bubblewrap, seccomp, Landlock and
rlimits; :mod:`~envwire.envs.coding.bootstrap` is the program the sandboxed interpreter starts
with.
"""

from __future__ import annotations

from envwire.envs.coding.env import (
    CodeAction,
    CodeObservation,
    CodingEnv,
    CodingState,
    gymnasium_env,
)
from envwire.envs.coding.sandbox import Sandbox, SandboxLimits, SandboxResult, configure

__all__ = [
    "CodeAction",
    "CodeObservation",
    "CodingEnv",
    "CodingState",
    "Sandbox",
    "SandboxLimits",
    "SandboxResult",
    "configure",
    "gymnasium_env",
]
