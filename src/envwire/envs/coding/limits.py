"""What a run may use (:class:`SandboxLimits`) and what it gives back (:class:`SandboxResult`)."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Any

from envwire.envs.coding import watch

__all__ = ["SandboxLimits", "SandboxResult", "result_of"]

_MIB = 1 << 20


@dataclass(frozen=True)
class SandboxLimits:
    """What one run may use.

    Attributes:
        wall_time: seconds before the run is killed.
        cpu_time: CPU seconds per process (``RLIMIT_CPU``); default ``wall_time`` rounded up + 1.
        memory: bytes: the address space of each process (``RLIMIT_AS``), and the resident
            memory of all the run's processes together.
        processes: processes and threads of the run at once (``RLIMIT_NPROC``).
        file_size: largest file the code may write, in bytes (``RLIMIT_FSIZE``).
        disk: bytes the run's directory may hold.
        open_files: open file descriptors per process (``RLIMIT_NOFILE``).
        output: bytes of stdout, and of stderr, that are kept.
        output_total: bytes of output after which the program is stopped.
        network: allow network access (off by default).
    """

    wall_time: float = 10.0
    cpu_time: int | None = None
    memory: int = 512 * _MIB
    processes: int = 32
    file_size: int = 16 * _MIB
    disk: int = 64 * _MIB
    open_files: int = 64
    output: int = 64 * 1024
    output_total: int = 8 * _MIB
    network: bool = False

    def __post_init__(self) -> None:
        if (
            self.wall_time <= 0
            or self.memory <= 0
            or self.processes < 1
            or self.output < 0
            or self.disk <= 0
            or self.open_files < 8
        ):
            raise ValueError(f"SandboxLimits: limits must be positive, got {self}")


@dataclass(frozen=True)
class SandboxResult:
    """The outcome of one run.

    ``exit_code`` is the program's exit status; a run stopped by a signal reports 128 + the
    signal number (137 for SIGKILL), as shells do, and says why at the end of ``stderr``.
    """

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False
    truncated: bool = False
    duration: float = 0.0
    enforcement: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the program exited with status 0."""
        return self.exit_code == 0


def result_of(  # noqa: PLR0917 (one call site, every part of the outcome)
    returncode: int,
    out: watch.Capture,
    err: watch.Capture,
    stopped: list[str],
    limits: SandboxLimits,
    duration: float,
    enforcement: dict[str, Any],
) -> SandboxResult:
    """The result of a run that exited with ``returncode`` (negative: killed by that signal),
    with notes at the end of stderr on dropped output, why the server stopped it (``stopped``)
    or which signal ended it."""
    exit_code = 128 - returncode if returncode < 0 else returncode
    stderr = err.text()
    truncated = out.dropped > 0 or err.dropped > 0
    if truncated:
        stderr += f"\n[envwire sandbox: output beyond {limits.output} bytes per stream was dropped]"
    if stopped:
        stderr += f"\n[envwire sandbox: the program was killed because {stopped[0]}]"
        exit_code = 137
    elif returncode < 0 or exit_code > 128:
        number = -returncode if returncode < 0 else exit_code - 128
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        stderr += f"\n[envwire sandbox: the program was killed by {name}]"
    return SandboxResult(
        stdout=out.text(),
        stderr=stderr.lstrip("\n") if not err.data else stderr,
        exit_code=exit_code,
        timed_out=bool(stopped) and "wall-time" in stopped[0],
        truncated=truncated or (bool(stopped) and "output" in stopped[0]),
        duration=duration,
        enforcement=enforcement,
    )
