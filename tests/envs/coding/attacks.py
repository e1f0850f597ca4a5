"""A catalog of hostile programs for the code sandbox, with the exact way each must fail.

Each :class:`Attack` is a program (a ``string.Template``: ``$server_pid``, ``$port``,
``$project``, ``$unix``, ``$abstract``, ``$python``, ``$secret`` and ``$tcp_refused`` are
filled in by the test) and what its run must show: its whole stdout (an expectation that ends
in a newline) or else the last line of its stderr (the exception that stopped it), once with
the audit hook (``hooked``) and once with the OS layers alone (``bare``; None where the attack
is aimed at the hook itself). Placeholders in an expectation are filled in too.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from string import Template

__all__ = ["ATTACKS", "Attack"]

_CTYPES = (
    "import ctypes\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "def check(result, what):\n"
    "    if result != 0:\n"
    "        raise OSError(ctypes.get_errno(), what)\n"
)


# The subinterpreter module's name by version, and a program that a new interpreter, which
# starts without the audit hook, would run: ctypes, then a syscall the seccomp filter refuses.
_SUBINTERPRETERS = "_interpreters" if sys.version_info >= (3, 13) else "_xxsubinterpreters"
_IN_SUBINTERPRETER = repr(
    "import ctypes\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "print('unshare', libc.unshare(0x10000000), ctypes.get_errno(), flush=True)\n"
)


@dataclass(frozen=True)
class Attack:
    """One hostile program and how it must fail (see the module docstring)."""

    name: str
    code: str
    hooked: str | None
    bare: str | None
    needs_landlock: bool = False

    def program(self, facts: dict[str, str]) -> str:
        return Template(self.code).substitute(facts)

    def expected(self, hooked: bool, facts: dict[str, str]) -> str | None:
        text = self.hooked if hooked else self.bare
        return None if text is None else Template(text).substitute(facts)

    @staticmethod
    def shown(expected: str, stdout: str, stderr: str) -> str:
        """What of a run's output ``expected`` is compared with (see the module docstring)."""
        if expected.endswith("\n"):
            return stdout
        lines = stderr.strip().splitlines()
        return lines[-1] if lines else ""


def _same(name: str, code: str, expected: str) -> Attack:
    return Attack(name, code, expected, expected)


_NO_FILE = "FileNotFoundError: [Errno 2] No such file or directory: "
_HOOK_WRITE = "PermissionError: sandbox: no writing outside its directory: "
_HOOK_NET = "PermissionError: sandbox: network access is disabled"
_HOOK_PROGRAMS = "PermissionError: sandbox: starting programs is disabled"
_HOOK_CTYPES = "ImportError: sandbox: importing ctypes is disabled"
_EPERM = "PermissionError: [Errno 1] Operation not permitted"

ATTACKS: tuple[Attack, ...] = (
    # --- reading what is not the run's
    _same("read /etc/passwd", "open('/etc/passwd').read()", _NO_FILE + "'/etc/passwd'"),
    _same("read /etc/shadow", "open('/etc/shadow').read()", _NO_FILE + "'/etc/shadow'"),
    _same("read the project's source", "open('$project').read()", _NO_FILE + "'$project'"),
    _same("list /home", "import os\nos.listdir('/home')", _NO_FILE + "'/home'"),
    _same("read /sys", "open('/sys/kernel/hostname').read()", _NO_FILE + "'/sys/kernel/hostname'"),
    _same(
        "read the server's environ",
        "open('/proc/$server_pid/environ').read()",
        _NO_FILE + "'/proc/$server_pid/environ'",
    ),
    _same(
        "list host processes",
        "import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))",
        "[1, 2]\n",
    ),
    _same(
        "read the server's environment variables",
        "import os\nprint(sorted(os.environ), '$secret' in open('/proc/self/environ').read())",
        "['HOME', 'LANG', 'PATH', 'PWD', 'TMPDIR'] False\n",
    ),
    # --- writing outside the run's directory
    Attack(
        "write into the runtime",
        "open('$python.evil', 'w')",
        _HOOK_WRITE + "'$python.evil'",
        "OSError: [Errno 30] Read-only file system: '$python.evil'",
    ),
    Attack(
        "write at the root",
        "open('/evil', 'w')",
        _HOOK_WRITE + "'/evil'",
        "OSError: [Errno 30] Read-only file system: '/evil'",
    ),
    Attack(
        "delete the interpreter",
        "import os\nos.remove('$python')",
        "PermissionError: sandbox: no changes outside its directory: '$python'",
        "OSError: [Errno 30] Read-only file system: '$python'",
    ),
    Attack(
        "write its own memory",
        "open('/proc/self/mem', 'wb')",
        _HOOK_WRITE + "'/proc/self/mem'",
        "PermissionError: [Errno 13] Permission denied: '/proc/self/mem'",
        needs_landlock=True,
    ),
    # --- the network
    Attack(
        "connect to the server's loopback port",
        "import socket\nsocket.create_connection(('127.0.0.1', $port), timeout=2)",
        _HOOK_NET,
        "$tcp_refused",  # Landlock (ABI >= 4) refuses the connect; else nobody listens here
    ),
    Attack(
        "connect to a Unix socket of the host",
        "import socket\nsocket.socket(socket.AF_UNIX).connect('$unix')",
        _HOOK_NET,
        "FileNotFoundError: [Errno 2] No such file or directory",
    ),
    Attack(
        "connect to an abstract Unix socket of the host",
        "import socket\nsocket.socket(socket.AF_UNIX).connect('\\0$abstract')",
        _HOOK_NET,
        "ConnectionRefusedError: [Errno 111] Connection refused",
    ),
    Attack(
        "resolve a name",
        "import socket\nsocket.getaddrinfo('example.com', 80)",
        _HOOK_NET,
        "socket.gaierror: [Errno -3] Temporary failure in name resolution",
    ),
    Attack(
        "send a DNS query",
        "import socket\n"
        "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('8.8.8.8', 53))",
        _HOOK_NET,
        "OSError: [Errno 101] Network is unreachable",
    ),
    # --- other programs
    # spawnv_passfds reaches _posixsubprocess.fork_exec, which raises no audit event; a child
    # whose exec fails exits with status 255.
    _same(
        "fork_exec /bin/sh through multiprocessing (no audit event)",
        "import multiprocessing.util as util, os\n"
        "pid = util.spawnv_passfds(b'/bin/sh', [b'sh', b'-c', b'echo escaped'], [])\n"
        "print('exit status', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))",
        "exit status 255\n",
    ),
    _same(
        "fork_exec the interpreter itself",
        "import multiprocessing.util as util, os\n"
        "pid = util.spawnv_passfds(b'$python', [b'python', b'-c', b'print(1)'], [])\n"
        "print('exit status', os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))",
        "exit status 255\n",
    ),
    Attack("os.execv /bin/sh", "import os\nos.execv('/bin/sh', ['sh'])", _HOOK_PROGRAMS, _EPERM),
    Attack(
        "os.execv the interpreter",
        "import os\nos.execv('$python', ['python', '-c', 'print(1)'])",
        _HOOK_PROGRAMS,
        _EPERM,
    ),
    Attack(
        "subprocess",
        "import subprocess\nsubprocess.run(['id'])",
        _HOOK_PROGRAMS,
        _EPERM + ": 'id'",
    ),
    # --- the kernel's attack surface, through ctypes
    Attack(
        "ptrace",
        _CTYPES + "check(libc.ptrace(16, 1, 0, 0), 'ptrace')  # PTRACE_ATTACH to init",
        _HOOK_CTYPES,
        "PermissionError: [Errno 1] ptrace",
    ),
    Attack(
        "unshare -r (a user namespace with every capability)",
        _CTYPES + "check(libc.unshare(0x10000000), 'unshare')",
        _HOOK_CTYPES,
        "PermissionError: [Errno 1] unshare",
    ),
    Attack(
        "clone into new namespaces",
        _CTYPES + "check(libc.syscall(56, 0x10000000 | 0x20000000 | 17, 0, 0, 0, 0), 'clone')",
        _HOOK_CTYPES,
        "PermissionError: [Errno 1] clone",
    ),
    Attack(
        "setns",
        _CTYPES + "check(libc.setns(open('/proc/self/ns/mnt').fileno(), 0), 'setns')",
        _HOOK_CTYPES,
        "PermissionError: [Errno 1] setns",
    ),
    Attack(
        "mount",
        _CTYPES + "check(libc.mount(b'none', b'/sandbox', b'tmpfs', 0, None), 'mount')",
        _HOOK_CTYPES,
        "PermissionError: [Errno 1] mount",
    ),
    Attack(
        "keyctl, bpf, perf_event_open, init_module, io_uring, chroot",
        _CTYPES + "for name, number in [('keyctl', 250), ('bpf', 321), ('perf_event_open', 298),"
        " ('init_module', 175), ('io_uring_setup', 425), ('chroot', 161)]:\n"
        "    result = libc.syscall(number, 0, 0, 0, 0, 0)\n"
        "    print(name, result, ctypes.get_errno())\n",
        _HOOK_CTYPES,
        "keyctl -1 1\nbpf -1 1\nperf_event_open -1 1\ninit_module -1 1\n"
        "io_uring_setup -1 1\nchroot -1 1\n",
    ),
    Attack(
        "ctypes loaded under another name via importlib.machinery",
        "import importlib.machinery, importlib.util, os, sys\n"
        "path = next(os.path.join(d, f) for d in sys.path if os.path.isdir(d)"
        " for f in os.listdir(d) if f.startswith('_ctypes.'))\n"
        "loader = importlib.machinery.ExtensionFileLoader('evil._ctypes', path)\n"
        "module = importlib.util.module_from_spec(importlib.util.spec_from_loader("
        "'evil._ctypes', loader))\n" + _CTYPES + "check(libc.unshare(0x10000000), 'unshare')",
        "ImportError: sandbox: importing evil._ctypes is disabled",
        "PermissionError: [Errno 1] unshare",
    ),
    Attack(
        "ctypes in a subinterpreter, where the audit hook does not exist",
        f"import {_SUBINTERPRETERS} as interpreters\n"
        "interp = interpreters.create()\n"
        f"interpreters.run_string(interp, {_IN_SUBINTERPRETER})",
        f"ImportError: sandbox: importing {_SUBINTERPRETERS} is disabled",
        "unshare -1 1\n",
    ),
    # --- other processes
    # Inside its PID namespace the program may signal its own processes (a multiprocessing
    # pool terminates its workers); nothing outside has a number there.
    _same(
        "signal the server",
        "import os, signal\nos.kill($server_pid, signal.SIGKILL)",
        "ProcessLookupError: [Errno 3] No such process",
    ),
    _same(
        "signal every process it can",
        "import os, signal\nos.kill(-1, signal.SIGKILL)",
        "ProcessLookupError: [Errno 3] No such process",
    ),
    _same("become root", "import os\nos.setuid(0)", "OSError: [Errno 22] Invalid argument"),
    _same(
        "raise its own limits",
        "import resource\nresource.setrlimit(resource.RLIMIT_NPROC, (10 ** 6, 10 ** 6))",
        "ValueError: not allowed to raise maximum limit",
    ),
    # --- the audit hook itself
    Attack(
        "clear the audit hook's state from its own frame",
        "try:\n    open('/evil', 'w')\nexcept PermissionError as exc:\n    tb = exc.__traceback__\n"
        "while tb.tb_next:\n    tb = tb.tb_next\n"
        "frame = tb.tb_frame\n"
        "for value in list(frame.f_locals.values()):\n"
        "    if hasattr(value, 'clear'):\n        value.clear()\n"
        "for key in [k for k in frame.f_globals if k.startswith('_')]:\n"
        "    frame.f_globals[key] = frozenset()\n"
        "open('/evil', 'w')",
        _HOOK_WRITE + "'/evil'",
        None,
    ),
    Attack(
        "switch the audit hook off through its closure cells",
        "try:\n    open('/evil', 'w')\nexcept PermissionError as exc:\n    tb = exc.__traceback__\n"
        "while tb.tb_next:\n    tb = tb.tb_next\n"
        "found = list(tb.tb_frame.f_locals.values())\n"
        "for value in list(found):\n"
        "    if isinstance(value, tuple):\n"
        "        found += [x for v in value for x in (v if isinstance(v, tuple) else (v,))]\n"
        "for fn in found:\n"
        "    cells = fn.__closure__ if type(fn).__name__ == 'function' else None\n"
        "    for cell in cells or ():\n"
        "        if callable(cell.cell_contents):\n"
        "            cell.cell_contents = lambda *args: True\n"
        "open('/evil', 'w')",
        _HOOK_WRITE + "'/evil'",
        None,
    ),
    Attack(
        "replace the audit hook's defaults",
        "try:\n    open('/evil', 'w')\nexcept PermissionError as exc:\n    tb = exc.__traceback__\n"
        "while tb.tb_next:\n    tb = tb.tb_next\n"
        "found = [x for v in tb.tb_frame.f_locals.values() if isinstance(v, tuple) for x in v]\n"
        "for fn in found:\n"
        "    if type(fn).__name__ == 'function':\n"
        "        fn.__defaults__ = None\n",
        "PermissionError: sandbox: the audit hook cannot be changed",
        None,
    ),
    Attack(
        "trace the audit hook",
        "import sys\nsys.settrace(lambda *args: None)",
        "PermissionError: sandbox: sys.settrace is disabled",
        None,
    ),
    Attack(
        "reach every object",
        "import gc\ngc.get_objects()",
        "PermissionError: sandbox: gc.get_objects is disabled",
        None,
    ),
)

if importlib.util.find_spec("_testcapi") is not None:  # not every Python ships its test modules
    ATTACKS += (
        Attack(
            "ctypes in _testcapi's subinterpreter, made with no thread state current",
            f"import _testcapi\n_testcapi.run_in_subinterp({_IN_SUBINTERPRETER})",
            "ImportError: sandbox: importing _testcapi is disabled",
            "unshare -1 1\n",
        ),
    )
