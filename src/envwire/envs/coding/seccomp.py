"""Seccomp filters for sandboxed programs, assembled as classic BPF without any library.

A filter is the raw array of ``struct sock_filter`` (8 bytes per instruction), the form both
``bwrap --seccomp FD`` and ``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ...)`` take. Every filter
starts by checking the architecture (a program of another ABI is killed: on x86-64 that also
covers the x32 ABI, whose syscall numbers carry bit 30) and then denies, with ``EPERM``:

- ``ptrace``, ``process_vm_readv``/``writev``, ``kcmp``, ``pidfd_getfd``: reading or steering
  other processes;
- ``mount``, ``umount2``, ``pivot_root``, ``chroot`` and the new mount API (``fsopen`` ...):
  changing the file system view;
- ``unshare``, ``setns`` and ``clone`` with any ``CLONE_NEW*`` flag: new namespaces (a user
  namespace would hand the program every capability inside it); ``clone3`` answers ``ENOSYS``
  because its flags sit in memory a filter cannot read, and C libraries then fall back to
  ``clone``;
- ``keyctl``, ``add_key``, ``request_key``, ``bpf``, ``perf_event_open``, ``userfaultfd``,
  ``io_uring_*``, module and ``kexec`` loading, ``open_by_handle_at``, ``swapon``, ``reboot``,
  clock setting, ``acct``, ``syslog``, ``quotactl``, ``personality``, ``ioperm``/``iopl``, and
  the ``TIOCSTI``/``TIOCLINUX`` ioctls (typing into a terminal).

Optionally also ``execve``/``execveat`` (``deny_exec``: the bootstrap loads that filter once the
interpreter runs, so the program can start no other program) and every new process
(``deny_fork``: ``fork``, ``vfork`` and ``clone`` without ``CLONE_THREAD``; threads stay allowed).
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["ARCHITECTURES", "build_filter", "host_architecture"]

# struct seccomp_data: nr (u32) at 0, arch (u32) at 4, instruction pointer at 8, args at 16.
_NR, _ARCH, _ARG0, _ARG1 = 0, 4, 16, 24  # the low 32 bits of each argument (little-endian)

_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K

_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_EPERM = 0x00050000 | errno.EPERM
_ENOSYS = 0x00050000 | errno.ENOSYS

_CLONE_THREAD = 0x00010000
#: CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME
_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000
_CLONE_NAMESPACES |= 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C

#: Syscall numbers (from the kernel's unistd headers): name, x86-64, aarch64 ("-": none there).
#: Every filter denies the names above the blank line; the rest are handled case by case.
_TABLE = """
ptrace                 101     117
process_vm_readv       310     270
process_vm_writev      311     271
kcmp                   312     272
pidfd_getfd            438     438
mount                  165      40
umount2                166      39
pivot_root             155      41
chroot                 161      51
fsopen                 430     430
fsconfig               431     431
fsmount                432     432
fspick                 433     433
move_mount             429     429
open_tree              428     428
mount_setattr          442     442
unshare                272      97
setns                  308     268
keyctl                 250     219
add_key                248     217
request_key            249     218
bpf                    321     280
perf_event_open        298     241
userfaultfd            323     282
io_uring_setup         425     425
io_uring_enter         426     426
io_uring_register      427     427
init_module            175     105
finit_module           313     273
delete_module          176     106
create_module          174       -
kexec_load             246     104
kexec_file_load        320     294
open_by_handle_at      304     265
name_to_handle_at      303     264
swapon                 167     224
swapoff                168     225
reboot                 169     142
settimeofday           164     170
clock_settime          227     112
clock_adjtime          305     266
adjtimex               159     171
acct                   163      89
syslog                 103     116
quotactl               179      60
personality            135      92
ioperm                 173       -
iopl                   172       -
uselib                 134       -
lookup_dcookie         212      18
vhangup                153      58
nfsservctl             180      42

clone                   56     220
clone3                 435     435
fork                    57       -
vfork                   58       -
execve                  59     221
execveat               322     281
ioctl                   16      29
"""
#: Audit architecture values the kernel reports in ``seccomp_data.arch``, by column of _TABLE.
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


def _parse(table: str) -> tuple[list[str], dict[str, dict[str, int]]]:
    denied: list[str] = []
    numbers: dict[str, dict[str, int]] = {arch: {} for arch in _AUDIT_ARCH}
    special = False
    for line in table.strip("\n").splitlines():
        if not line.strip():
            special = True
            continue
        name, *columns = line.split()
        if not special:
            denied.append(name)
        for arch, number in zip(_AUDIT_ARCH, columns, strict=True):
            if number != "-":
                numbers[arch][name] = int(number)
    return denied, numbers


_DENIED, _NUMBERS = _parse(_TABLE)
#: Per architecture: (audit architecture value, syscall numbers by name).
ARCHITECTURES: dict[str, tuple[int, dict[str, int]]] = {
    arch: (_AUDIT_ARCH[arch], _NUMBERS[arch]) for arch in _AUDIT_ARCH
}


def host_architecture() -> str | None:
    """This machine's architecture if a filter can be built for it, else None."""
    machine = platform.machine().lower()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return machine if machine in ARCHITECTURES else None


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def build_filter(
    *, deny_exec: bool = False, deny_fork: bool = False, arch: str | None = None
) -> bytes:
    """The filter described in the module docstring, for ``arch`` (default: this machine's).

    Raises:
        ValueError: no syscall table for the architecture.
    """
    arch = arch or host_architecture()
    if arch not in ARCHITECTURES:
        raise ValueError(f"no seccomp filter for architecture {platform.machine()!r}")
    audit_arch, numbers = ARCHITECTURES[arch]
    program = [_op(_LD_ABS, _ARCH), _op(_JEQ, audit_arch, 1, 0), _op(_RET, _KILL_PROCESS)]
    program.append(_op(_LD_ABS, _NR))
    if arch == "x86_64":  # x32 syscalls: numbers with bit 30 set
        program += [_op(_JGE, 0x40000000, 0, 1), _op(_RET, _KILL_PROCESS)]

    def deny(name: str, action: int = _EPERM) -> None:
        if name in numbers:
            program.extend([_op(_JEQ, numbers[name], 0, 1), _op(_RET, action)])

    for name in _DENIED:
        deny(name)
    deny("clone3", _ENOSYS)
    if deny_exec:
        deny("execve")
        deny("execveat")
    if deny_fork:
        deny("fork")
        deny("vfork")
    # clone: check its flags (argument 0), then allow.
    clone_checks = [_op(_LD_ABS, _ARG0), _op(_JSET, _CLONE_NAMESPACES, 0, 1), _op(_RET, _EPERM)]
    if deny_fork:
        clone_checks += [_op(_JSET, _CLONE_THREAD, 1, 0), _op(_RET, _EPERM)]
    clone_checks.append(_op(_RET, _ALLOW))
    program.append(_op(_JEQ, numbers["clone"], 0, len(clone_checks)))
    program += clone_checks
    # ioctl: refuse the requests that type into a terminal (argument 1), allow the rest.
    ioctl_checks = [
        _op(_LD_ABS, _ARG1),
        _op(_JEQ, _TIOCSTI, 1, 0),
        _op(_JEQ, _TIOCLINUX, 0, 1),
        _op(_RET, _EPERM),
        _op(_RET, _ALLOW),
    ]
    program.append(_op(_JEQ, numbers["ioctl"], 0, len(ioctl_checks)))
    program += ioctl_checks
    program.append(_op(_RET, _ALLOW))
    return b"".join(program)
