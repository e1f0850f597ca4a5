"""The program every sandboxed run starts with: it confines itself, then runs ``main.py``.

It runs inside the sandbox, with only the standard library in view (never import envwire here),
as ``python -I -S -B bootstrap.py CONFIG`` where ``CONFIG`` is a JSON object:

``dir``
    the run's directory (the only place the program may write).
``rlimits``
    ``[[name, value], ...]``: resource limits, set as both soft and hard limit.
``no_new_privs``
    set ``PR_SET_NO_NEW_PRIVS`` (bubblewrap already has; the fallback without it needs it for
    the next two steps) and ``PR_SET_PDEATHSIG`` (bubblewrap's ``--die-with-parent`` does that
    for the other runs).
``landlock``
    ``null`` or ``{"abi": N, "network": bool}``: restrict the file system to reading everywhere
    and writing in ``dir`` and ``/dev/null``; with ABI >= 4 and no network also refuse TCP
    ``bind``/``connect``; with ABI >= 6 also refuse signals to processes outside the run and
    abstract Unix sockets outside it.
``seccomp``
    a hex string: a seccomp filter (``struct sock_filter`` array) to load, or ``""``.
``audit_hook``
    install the PEP 578 audit hook (a second layer in the interpreter: refuses writes outside
    ``dir``, starting programs, sockets other than Unix ones when the network is off, ctypes,
    new interpreters (which would start without the hook), signals to other processes,
    tracing, and interpreter introspection).
``network``
    whether network access is allowed (the audit hook's view of it).
``fork``
    whether new processes are allowed (the audit hook's view of it).
``signals``
    whether the program may signal processes other than itself (inside a PID namespace of its
    own, every process it can name is its own).

Every step fails closed: if a layer the parent asked for cannot be set up, the run exits with
status 71 (``EX_OSERR``) and says why on stderr, before any of the program's code runs.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys
import types
from collections.abc import Callable
from typing import Any, NoReturn

__all__ = ["main"]

_EX_OSERR = 71
_PR_SET_PDEATHSIG, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 1, 38, 22, 2
_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_RULE_PATH_BENEATH = 1
# Landlock file system rights by the ABI version that introduced them.
_FS_V1 = (1 << 13) - 1  # EXECUTE ... MAKE_SYM
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1, 2, 4, 8
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1, 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _fail(what: str) -> NoReturn:
    sys.stderr.write(f"[envwire sandbox: cannot confine the run: {what}]\n")
    sys.stderr.flush()
    os._exit(_EX_OSERR)


def _check(result: int, what: str) -> int:
    if result < 0:
        _fail(f"{what}: {os.strerror(ctypes.get_errno())}")
    return result


def _load_seccomp(libc: ctypes.CDLL, program: bytes) -> None:
    fprog = _SockFprog(len(program) // 8, program)
    _check(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def _landlock(libc: ctypes.CDLL, abi: int, directory: str, network: bool) -> None:
    """Read everywhere, write only under ``directory`` (and to /dev/null); see the docstring."""
    fs = _FS_V1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    fs |= _FS_IOCTL_DEV if abi >= 5 else 0
    attr = _RulesetAttr(fs, 0, 0)
    size = 8
    if abi >= 4:
        size = 16
        attr.net = 0 if network else _NET_BIND_TCP | _NET_CONNECT_TCP
    if abi >= 6:
        size = 24
        attr.scoped = _SCOPE_SIGNAL | (0 if network else _SCOPE_ABSTRACT_UNIX)
    ruleset = _check(
        libc.syscall(_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0), "landlock ruleset"
    )
    file_rights = _FS_WRITE_FILE | _FS_READ_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
    for path, allowed in (
        ("/", _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR),
        (directory, fs),
        ("/dev/null", file_rights),
    ):
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        rule = ctypes.byref(_PathBeneath(allowed, fd))
        added = libc.syscall(_LANDLOCK_ADD_RULE, ruleset, _LANDLOCK_RULE_PATH_BENEATH, rule, 0)
        _check(added, f"landlock rule for {path}")
        os.close(fd)
    _check(libc.syscall(_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock restrict")
    os.close(ruleset)


def _confine(cfg: dict[str, Any]) -> None:
    """Set the limits and load the kernel layers the parent asked for."""
    for name, value in cfg["rlimits"]:
        resource.setrlimit(getattr(resource, name), (value, value))
    if cfg["no_new_privs"] or cfg["landlock"] or cfg["seccomp"]:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        if cfg["no_new_privs"]:  # the fallback without bubblewrap: also die with the server
            _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
            _check(libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0), "parent death signal")
        if cfg["landlock"]:
            landlock = cfg["landlock"]
            _landlock(libc, int(landlock["abi"]), cfg["dir"], bool(landlock["network"]))
        if cfg["seccomp"]:
            _load_seccomp(libc, bytes.fromhex(cfg["seccomp"]))
        del libc
    # ctypes stays loaded in memory, but out of reach: the audit hook refuses to import it again.
    for name in [n for n in sys.modules if n == "ctypes" or n.startswith(("ctypes.", "_ctypes"))]:
        del sys.modules[name]


_PATH_EVENTS = frozenset(
    (
        "os.remove",
        "os.rmdir",
        "os.mkdir",
        "os.chmod",
        "os.chown",
        "os.truncate",
        "os.utime",
        "os.mkfifo",
        "os.mknod",
        "os.chflags",
        "os.lchflags",
        "os.setxattr",
        "os.removexattr",
    )
)
_TWO_PATH_EVENTS = frozenset(("os.rename", "os.link", "os.symlink"))
_PROGRAM_EVENTS = frozenset(
    (
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "subprocess.Popen",
        "os.startfile",
        "pty.spawn",
        "os.forkpty",
    )
)
_NET_EVENTS = frozenset(
    (
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.gethostbyname_ex",
        "socket.getnameinfo",
        "socket.connect",
        "socket.bind",
        "socket.sendto",
        "socket.sendmsg",
    )
)
_HIDDEN_EVENTS = frozenset(
    (
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sys._current_frames",
        "sys.settrace",
        "sys.setprofile",
        # A new interpreter (``_xxsubinterpreters`` in 3.11 and 3.12, ``_interpreters`` from
        # 3.13) starts without this hook, which lives in the interpreter that added it.
        "cpython.PyInterpreterState_New",
    )
)
# Foreign-function modules; the subinterpreter modules; and CPython's C-API test modules, whose
# ``run_in_subinterp`` makes an interpreter with no thread state current, where only
# process-wide hooks hear the event above (and which reach raw memory besides).
_NATIVE_MODULES = frozenset(
    (
        "ctypes",
        "_ctypes",
        "cffi",
        "_cffi_backend",
        "_xxsubinterpreters",
        "_interpreters",
        "_xxinterpchannels",
        "_interpchannels",
        "_interpqueues",
        "_testcapi",
        "_testinternalcapi",
        "_testlimitedcapi",
    )
)
_SIGNAL_EVENTS = frozenset(("os.kill", "os.killpg", "signal.pthread_kill"))


def _audit_hook(
    root: str, network: bool, fork: bool, signals: bool
) -> Callable[[str, tuple[Any, ...]], None]:
    """The audit hook, made of functions without closures: its state is one tuple bound as the
    hook's only default argument, and everything in it is immutable (frozensets, strings,
    bools, builtins, and the helper functions, whose own state is a default tuple too).

    Code that reaches the hook's frame (from a traceback) or its functions finds no cell to
    rebind (``__closure__`` is None) and no mutable container; replacing a function's
    ``__defaults__``, ``__kwdefaults__`` or ``__code__`` raises the ``object.__setattr__``
    event (``object.__delattr__`` when set to None), which the hook refuses for its own
    functions; module globals the program rebinds
    are not read. It never calls code the program supplies (a path-like object is judged by
    its type, not by its ``__fspath__``).
    """
    import pathlib

    path_types = (pathlib.PosixPath, pathlib.PurePosixPath)
    where = (root, os.sep, os.path.realpath, os.path.join, os.getcwd, os.fsdecode, path_types,
             isinstance, type, int, str, bytes, OSError, ValueError)  # fmt: skip
    writing_flags = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
    # Fresh functions with no globals and no builtins: a name they did not get in ``state``
    # fails (closed) instead of reading what the program rebound.
    bare: dict[str, Any] = {"__builtins__": {}}
    hook = types.FunctionType(_hook.__code__, bare, "hook")
    inside = types.FunctionType(_inside.__code__, bare, "inside")
    native = types.FunctionType(_native.__code__, bare, "native", (_NATIVE_MODULES, str))
    ours = frozenset((_hook.__code__, _inside.__code__, _native.__code__))
    state = (
        where, inside, native, network, fork, signals, writing_flags, _PATH_EVENTS,
        _TWO_PATH_EVENTS, _PROGRAM_EVENTS, _NET_EVENTS, _HIDDEN_EVENTS, _SIGNAL_EVENTS, ours,
        types.FunctionType, os.getpid, isinstance, type, int, str, PermissionError, ImportError,
    )  # fmt: skip
    hook.__defaults__ = (state,)
    return hook


def _inside(path: object, where: tuple[Any, ...]) -> bool:
    """Whether ``path`` names a place in the sandbox's directory (``where``: its root and the
    functions to judge by, bound when the hook was made)."""
    (root, sep, realpath, join, getcwd, fsdecode, path_types, isinstance_, type_, int_, str_,
     bytes_, os_error, value_error) = where  # fmt: skip
    if isinstance_(path, int_):
        return True  # an open descriptor: it was judged when opened
    if type_(path) in path_types:
        path = str_(path)  # pathlib's own classes only: their method is known
    if not (type_(path) is str_ or type_(path) is bytes_):
        return False
    try:
        full = realpath(join(getcwd(), fsdecode(path)))
    except (os_error, value_error):
        return False
    return full == root or full.startswith(root + sep) or full == "/dev/null"  # type: ignore[no-any-return]


def _hook(event: str, args: tuple[Any, ...], state: tuple[Any, ...] = ()) -> None:
    """The audit hook's code: every name it uses is a local from ``state`` (no globals, no
    builtins, no cells), so rebinding a module's or the builtins' names changes nothing."""
    (where, inside, native, network, fork, signals, writing_flags, path_events,
     two_path_events, program_events, net_events, hidden_events, signal_events, ours,
     function_type, getpid, isinstance_, type_, int_, str_, denied, refused) = state  # fmt: skip
    if event == "open":
        path, mode, flags = args
        writing = (
            type_(mode) is str_ and ("w" in mode or "a" in mode or "x" in mode or "+" in mode)
        ) or (type_(flags) is int_ and flags > 0 and flags & writing_flags != 0)
        if writing and path is not None and not inside(path, where):
            raise denied(f"sandbox: no writing outside its directory: {path!r}")
    elif event in path_events:
        if not inside(args[0], where):
            raise denied(f"sandbox: no changes outside its directory: {args[0]!r}")
    elif event in two_path_events:
        if not (inside(args[0], where) or event == "os.symlink") or not inside(args[1], where):
            raise denied(f"sandbox: no changes outside its directory: {args[1]!r}")
    elif event == "socket.__new__":
        if not network and args[1] != 1:  # only AF_UNIX
            raise denied("sandbox: network access is disabled")
    elif event in net_events:
        if not network and not (event == "socket.bind" and isinstance_(args[1], str_)):
            raise denied("sandbox: network access is disabled")
    elif event == "os.fork" and not fork:
        raise denied("sandbox: starting processes is disabled on this host")
    elif event in program_events:
        raise denied("sandbox: starting programs is disabled")
    elif event.startswith("ctypes.") or event in hidden_events:
        raise denied(f"sandbox: {event} is disabled")
    elif event == "import" and native(args):
        raise refused(f"sandbox: importing {args[0]} is disabled")
    elif event in signal_events and not signals:
        if args[0] != getpid():
            raise denied("sandbox: signalling other processes is disabled")
    elif (
        event in ("object.__setattr__", "object.__delattr__")  # None deletes
        and type_(args[0]) is function_type
        and args[0].__code__ in ours  # the hook's functions: their defaults hold its state
    ):
        raise denied("sandbox: the audit hook cannot be changed")


def _native(
    args: tuple[Any, ...], modules: frozenset[str] = _NATIVE_MODULES, str_: type[str] = str
) -> bool:
    """Whether an import event loads a module the hook refuses (``modules``), by name or by
    file (an extension loader names a module as it likes, but the file keeps its name)."""
    name, filename = args[0], args[1] if args[1:] else None  # no builtins: none is bound
    if str_(name).rpartition(".")[2] in modules:
        return True
    base = str_(filename).rpartition("/")[2] if filename else ""
    return base.partition(".")[0] in modules


def _run_main() -> NoReturn:
    with open("main.py", encoding="utf-8") as file:
        code = compile(file.read(), "main.py", "exec")
    module = types.ModuleType("__main__")
    module.__file__ = os.path.abspath("main.py")
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:  # report it as python would, without this bootstrap's frames
        import traceback

        tb = exc.__traceback__.tb_next if exc.__traceback__ else None
        traceback.print_exception(type(exc), exc, tb)
        sys.exit(1)
    sys.exit(0)


def main(argv: list[str]) -> NoReturn:
    """Confine this process as ``argv[1]`` (the JSON config) says, then run ``main.py``."""
    cfg = json.loads(argv[1])
    sys.dont_write_bytecode = True
    try:
        _confine(cfg)
    except OSError as exc:
        _fail(str(exc))
    if cfg["audit_hook"]:
        root = os.path.realpath(cfg["dir"])
        hook = _audit_hook(root, bool(cfg["network"]), bool(cfg["fork"]), bool(cfg["signals"]))
        sys.addaudithook(hook)
    _run_main()


if __name__ == "__main__":
    main(sys.argv)
