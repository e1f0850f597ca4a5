"""The house's rules that no linter checks: imports at the top, no circles, rooms of a size,
names with one meaning, ``Any`` kept rare (docs/architecture.md)."""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "envwire"

#: The imports made inside functions, each for a reason (docs/architecture.md, "Imports"):
#: optional extras, the sandbox's bootstrap program, and the client openers by URL scheme.
DEFERRED = {
    # optional extras: imported only when the feature that needs them is used
    ("adapters/training/rllib.py", "ray.tune.registry"),
    ("frontends/openenv/corebinding.py", "openenv.core.env_server.mcp_types"),
    ("frontends/openenv/corebinding.py", "openenv.core.env_server.types"),
    ("kinds/dm_env/control.py", "dm_control"),
    ("kinds/openenv_core/appmodule.py", "openenv.core.env_server.types"),
    ("kinds/openenv_core/appmodule.py", "yaml"),
    ("kinds/openenv_core/gymenv.py", "openenv.core.env_server.types"),
    ("runtime/ray/cluster.py", "envwire.runtime.ray.worker"),  # it imports Ray
    ("runtime/ray/cluster.py", "ray"),
    ("observe/hub.py", "envwire.observe.recorder"),  # it imports Minari
    ("arena/export.py", "envwire.observe.datasets"),  # it imports Minari
    # the sandbox's bootstrap runs inside the sandbox from its source: standard library only
    ("envs/coding/bootstrap.py", "pathlib"),
    ("envs/coding/bootstrap.py", "traceback"),
    # users' own code: AISysProj plugins and the client opener of a URL scheme
    ("arena/aisys/plugins.py", "<user plugin>"),
    ("adapters/connect.py", "<client of a URL scheme>"),
    ("entrypoints.py", "<the module of an entry point>"),
}


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@functools.cache
def _tree(path: Path) -> ast.Module:
    """The module's syntax tree, parsed once for every test of the file (none changes it)."""
    return ast.parse(path.read_text())


def _name(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _dynamic_target(call: ast.Call) -> str:
    """What an ``importlib.import_module`` or ``__import__`` call loads, as far as we can tell."""
    if call.args and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str):
        return call.args[0].value
    return "<computed>"


def _deferred_imports() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path in _modules():
        tree = _tree(path)
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom) and node.module:
                    found.add((_name(path), node.module))
                elif isinstance(node, ast.Import):
                    found.update((_name(path), alias.name) for alias in node.names)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                called = getattr(func, "attr", None) or getattr(func, "id", None)
                if called in ("import_module", "__import__"):
                    found.add((_name(path), _dynamic_target(node)))
    return found


def _labels(found: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Computed targets are known by their module's reason in :data:`DEFERRED`."""
    reasons = {module: target for module, target in DEFERRED if target.startswith("<")}
    return {
        (module, reasons.get(module, target) if target == "<computed>" else target)
        for module, target in found
    }


def test_imports_inside_functions_are_only_the_listed_ones() -> None:
    found = _labels(_deferred_imports())
    assert found - DEFERRED == set(), "an import inside a function: move it to the top"
    assert DEFERRED - found == set(), "a listed deferred import is gone: drop it from the list"


def _module_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements a module runs when it is imported, or that its type checker reads: its
    top level and the blocks there (``if TYPE_CHECKING:`` and its ``else``, ``try``, ``with``),
    classes' bodies included, functions' bodies left out."""
    for node in body:
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for block in ("body", "orelse", "finalbody"):
            inner = getattr(node, block, None)
            if isinstance(inner, list):
                yield from _module_level([n for n in inner if isinstance(n, ast.stmt)])
        for handler in getattr(node, "handlers", ()):
            yield from _module_level(handler.body)


def _top_level_imports(path: Path, modules: set[str]) -> set[str]:
    """The envwire modules (of ``modules``, every module's dotted name) a module imports outside
    its functions, type-only imports (under ``if TYPE_CHECKING:``) included (``from a import b``
    counts ``a.b`` when it is a module; ``from . import b`` is resolved against the module's
    package)."""
    package = _dotted(path) if path.name == "__init__.py" else _dotted(path).rpartition(".")[0]
    found: set[str] = set()
    for node in _module_level(_tree(path).body):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # ``from package import module`` imports the module; names come from the package
            for alias in node.names:
                inner = f"{base}.{alias.name}"
                targets.append(inner if inner in modules else base)
        for target in targets:
            if target in modules:
                found.add(target)
    return found


def _dotted(path: Path) -> str:
    parts = ("envwire", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    paths = _modules()
    modules = {_dotted(p) for p in paths}
    return {_dotted(p): _top_level_imports(p, modules) for p in paths}


def test_the_import_graph_holds_type_only_imports() -> None:
    """The graph the circles are looked for in sees what the type checker alone imports."""
    graph = _import_graph()
    assert "envwire.client.openenv" in graph["envwire.adapters.connect"]  # under TYPE_CHECKING
    assert "envwire.session.contracts" in graph["envwire.session.session"]


def test_no_import_circles() -> None:
    """Between modules, through their imports outside functions, type-only ones included (a
    package's face counts as a module)."""
    graph = _import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in graph:
        if module not in index:
            visit(module)
    assert circles == []


def test_every_module_declares_its_exports_and_stays_small() -> None:
    for path in _modules():
        text = path.read_text()
        body = _tree(path).body
        face = path.name == "__init__.py" and all(isinstance(n, ast.Expr) for n in body)
        if path.name != "__main__.py" and not face:  # a face that is a docstring exports nothing
            assert "__all__" in text, f"{_name(path)} has no __all__"
        assert text.count("\n") <= 560, f"{_name(path)}: split it (about 500 lines at most)"


#: File names that appear in several rooms, and the one thing each means wherever it is.
SHARED_NAMES = {
    "__init__.py": "a package's face",
    "__main__.py": "python -m",
    "gymenv.py": "this kind made a gymnasium.Env",
    "dmenv.py": "made a dm_env.Environment",
    "vector.py": "the N-copies side of its room",
    "gymsocket.py": "the gym-socket protocol on this floor",
    "openenv.py": "the OpenEnv protocol on this floor",
    "arena.py": "the arena protocol on this floor",
    "dmenvrpc.py": "the dm_env_rpc protocol on this floor",
    "godot.py": "the Godot protocol on this floor",
    "websocket.py": "WebSocket on this floor (sans-IO codec; over a blocking socket)",
    "service.py": "a protocol's service over the session table",
    "routes.py": "HTTP routes",
    "mount.py": "a mount of the HTTP front end",
    "messages.py": "a vocabulary of message types",
    "errors.py": "an exception tree",
    "status.py": "a protocol's table of the error tree's codes (HTTP status, google.rpc.Status)",
    "cli.py": "command-line commands",
    "admin.py": "administration commands",
    "env.py": "an env class",
    "connection.py": "a client's one connection to its server (arena, OpenEnv)",
    "pool.py": "a bounded set of things many users share (run slots; worker processes)",
}


def test_a_file_name_has_one_meaning() -> None:
    rooms: defaultdict[str, list[str]] = defaultdict(list)
    for path in _modules():
        rooms[path.name].append(_name(path))
    shared = {name: where for name, where in rooms.items() if len(where) > 1}
    unexplained = {n: w for n, w in shared.items() if n not in SHARED_NAMES}
    assert unexplained == {}, "one name, two meanings: rename one, or say what both mean"


#: The most parameters, return values and variables annotated ``Any`` itself (not ``Any``
#: inside a type argument): values whose type is known only at run time (a method named at run
#: time, user code's keywords, Ray's handles). The project's bound is 250; the house holds far
#: fewer, and this keeps it from creeping back.
MAX_BARE_ANY = 60


def _bare_any() -> list[str]:
    found: list[str] = []
    for path in _modules():
        for node in ast.walk(_tree(path)):
            annotations: list[ast.expr] = []
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                arguments = node.args
                every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
                every += [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
                annotations = [a.annotation for a in every if a.annotation is not None]
                if node.returns is not None:
                    annotations.append(node.returns)
            elif isinstance(node, ast.AnnAssign):
                annotations = [node.annotation]
            found += [
                f"{_name(path)}:{a.lineno}"
                for a in annotations
                if (isinstance(a, ast.Name) and a.id == "Any")
                or (isinstance(a, ast.Constant) and a.value == "Any")
            ]
    return found


def test_any_is_rare() -> None:
    found = _bare_any()
    assert len(found) <= MAX_BARE_ANY, f"{len(found)} annotations are bare Any: {found}"
