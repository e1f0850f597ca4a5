"""The seccomp filters, loaded into a child process of their own and tried syscall by syscall."""

from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest

from envwire.envs.coding import seccomp

PROBE = """
import ctypes, errno, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]
program = bytes.fromhex(sys.argv[1])
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.byref(Prog(len(program) // 8, program)), 0, 0) == 0
def call(number, *args):
    result = libc.syscall(number, *args)
    return errno.errorcode.get(ctypes.get_errno(), "?") if result < 0 else "ok"
results = {
    "getpid": call(39),
    "unshare": call(272, 0x10000000),
    "clone_newns": call(56, 0x00020000 | 17, 0, 0, 0, 0),
    "clone3": call(435, 0, 0),
    "ptrace": call(101, 16, 1, 0, 0),
    "bpf": call(321, 0, 0, 0),
    "tiocsti": call(16, 0, 0x5412, 0),
    "x32_getpid": call(0x40000000 | 39) if sys.argv[2] == "x32" else "skipped",
}
thread = threading.Thread(target=lambda: None); thread.start(); thread.join()
results["thread"] = "ok"
try:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    results["fork"] = "ok"
except OSError as exc:
    results["fork"] = errno.errorcode[exc.errno]
try:
    os.execv("/nonexistent/program", ["program"])  # seccomp answers before the path lookup
except OSError as exc:
    results["exec"] = errno.errorcode[exc.errno]
"""


def probe(program: bytes, x32: bool = False) -> dict[str, str]:
    code = PROBE + "\nimport json\nprint(json.dumps(results))"
    done = subprocess.run(
        [sys.executable, "-I", "-c", code, program.hex(), "x32" if x32 else ""],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if x32:
        return {"returncode": str(done.returncode)}
    assert done.returncode == 0, done.stderr
    results: dict[str, str] = json.loads(done.stdout)
    return results


needs_x86_64 = pytest.mark.skipif(
    seccomp.host_architecture() != "x86_64", reason="the probe uses x86-64 syscall numbers"
)


@needs_x86_64
def test_the_base_filter() -> None:
    results = probe(seccomp.build_filter())
    assert results == {
        "getpid": "ok",
        "unshare": "EPERM",
        "clone_newns": "EPERM",
        "clone3": "ENOSYS",
        "ptrace": "EPERM",
        "bpf": "EPERM",
        "tiocsti": "EPERM",
        "x32_getpid": "skipped",
        "thread": "ok",
        "fork": "ok",
        "exec": "ENOENT",  # execve stays allowed in the base filter
    }


@needs_x86_64
def test_no_exec_and_no_fork() -> None:
    results = probe(seccomp.build_filter(deny_exec=True, deny_fork=True))
    assert results["exec"] == "EPERM" and results["fork"] == "EPERM"
    assert results["thread"] == "ok" and results["getpid"] == "ok"


@needs_x86_64
def test_x32_syscalls_kill_the_process() -> None:
    assert probe(seccomp.build_filter(), x32=True) == {"returncode": "-31"}  # SIGSYS


def test_every_architecture_has_a_well_formed_filter() -> None:
    for arch, (audit_arch, numbers) in seccomp.ARCHITECTURES.items():
        program = seccomp.build_filter(deny_exec=True, deny_fork=True, arch=arch)
        assert len(program) % 8 == 0 and len(program) // 8 < 4096
        code, _, _, k = struct.unpack_from("<HBBI", program, 8)
        assert (code, k) == (0x15, audit_arch)  # the second instruction checks the arch
        assert {"clone", "ioctl", "execve", "unshare", "ptrace"} <= set(numbers)


def test_unknown_architecture() -> None:
    with pytest.raises(ValueError, match="no seccomp filter for architecture"):
        seccomp.build_filter(arch="sparc")
