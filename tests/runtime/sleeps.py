"""How often a process has slept: the worker processes' tests count the sleeps that waiting
for a call costs (Linux's ``/proc``)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["HAS_PROC", "voluntary_switches"]

#: Whether this host counts sleeps in ``/proc`` (Linux).
HAS_PROC = Path("/proc/self/status").exists()


def voluntary_switches(pid: int) -> int:
    """How often process ``pid``'s main thread has slept (its voluntary context switches)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/status has no voluntary_ctxt_switches")
