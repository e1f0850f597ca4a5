"""Serve every env of an OpenEnv checkout through openenv-core and through envwire, drive both
with the env's own client, compare what comes back, and print a table.

    python benchmarks/openenv_compare.py /path/to/OpenEnv [--envs echo_env,connect4_env]
                                       [--openenv-compat strict] [--markdown]

For each env of the checkout (``envs/<name>/`` with an ``openenv.yaml`` manifest or a
``server/app.py``):

1. a child Python imports the env's app module and its client (``PYTHONPATH=envs``); an env
   whose dependencies do not import here is reported as skipped, with the import error;
2. openenv-core serves it as its authors do (``uvicorn <name>.server.app:app``) and envwire
   serves the same env unmodified (``envwire serve oe/<name>=<dir>``, or
   ``oe/<name>=<name>.server.app:app`` without a manifest);
3. the same scenario runs against each: the env's own ``EnvClient`` subclass resets (seed 0),
   reads the state, then steps with actions built from the action model's JSON Schema (or, for
   MCP clients, lists the tools and calls those whose arguments can be built the same way);
   plain HTTP requests check ``/health``, ``/schema``, ``/metadata``, ``/reset``, a malformed
   ``/step`` and ``/mcp``;
4. the scenario runs twice against openenv-core first: values that differ between those two
   runs (episode ids, random boards) are masked before envwire's results are compared.

Differences that ``docs/protocols/openenv.md`` lists as deliberate (stateful HTTP) are labelled
so. Run with ``--openenv-compat strict`` to compare against envwire's openenv-core-compatible
mode.
Without a checkout the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from envwire.testing import ServerProcess  # noqa: E402

PROBE = r"""
import importlib, inspect, json, sys
from pathlib import Path
import yaml
root = Path(sys.argv[1])
path = root / "openenv.yaml"
manifest = yaml.safe_load(path.read_text()) if path.exists() else {"app": "server.app:app"}
module, _, attr = manifest["app"].partition(":")
app_module = f"{root.name}.{module}"
getattr(importlib.import_module(app_module), attr)
from openenv.core.env_client import EnvClient
client = importlib.import_module(f"{root.name}.client")
found = [c for c in vars(client).values()
         if inspect.isclass(c) and issubclass(c, EnvClient) and c.__module__ == client.__name__]
if not found:
    raise SystemExit(f"no EnvClient subclass in {root.name}.client")
client_entry = f"{client.__name__}:{found[0].__name__}"
print(json.dumps({"app": f"{app_module}:{attr}", "client": client_entry}))
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_healthy(base: str, process: subprocess.Popen[str] | None, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited with status {process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return
        time.sleep(0.3)
    raise RuntimeError(f"{base} was not healthy within {timeout:g} s")


@contextlib.contextmanager
def openenv_core(envs: Path, app: str, timeout: float) -> Iterator[str]:
    """openenv-core's own server (uvicorn) for an app module; yields the base URL."""
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port)]
    env = dict(os.environ, PYTHONPATH=str(envs))
    process = subprocess.Popen(
        [*command, "--log-level", "warning"],
        cwd=envs,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, process, timeout)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def envwire(directory: Path, app: str, compat: str, timeout: float) -> Iterator[str]:
    """``envwire serve oe/<name>=<dir>`` (an env directory with a manifest) or
    ``oe/<name>=<app module>``; yields the base URL (the root serves that env)."""
    args = ("--openenv-compat", compat) if compat != "default" else ()
    target = directory if (directory / "openenv.yaml").exists() else app
    server = ServerProcess(
        [f"oe/{directory.name}={target}"],
        args,
        front_ends=("http",),
        start_timeout=timeout,
        cwd=directory.parent,
    )
    with server:
        base = f"http://127.0.0.1:{server.ports['http']}"
        wait_healthy(base, None, timeout)
        yield base


def load(entry: str) -> Any:
    import importlib

    module, _, attr = entry.partition(":")
    return getattr(importlib.import_module(module), attr)


def example(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """A small value that fits a JSON Schema (None when none can be built)."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return example(defs.get(schema["$ref"].rsplit("/", 1)[-1], {}), defs)
    if "default" in schema:
        return schema["default"]
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key, ()):
            value = example(option, defs)
            if value is not None:
                return value
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        out = {}
        for name in schema.get("required", ()):
            value = example(schema.get("properties", {}).get(name, {}), defs)
            if value is None:
                return None
            out[name] = value
        return out
    simple = {"integer": schema.get("minimum", 0), "number": 0.5, "boolean": False}
    if kind in simple:
        return simple[kind]
    if kind == "string":
        return "test"
    if kind == "array":
        return []
    return None


def dump(value: Any) -> Any:
    if hasattr(value, "observation"):  # a StepResult
        return {"observation": dump(value.observation), "reward": value.reward, "done": value.done}
    if hasattr(value, "model_dump"):
        return json.loads(json.dumps(value.model_dump(), default=str))
    return json.loads(json.dumps(value, default=str))


def scenario(base: str, client_entry: str, steps: int = 3) -> list[tuple[str, Any]]:
    """What the env's own client sees (see the module docstring)."""
    from openenv.core.mcp_client import MCPToolClient

    client_cls = load(client_entry)
    schema = httpx.get(f"{base}/schema", timeout=30).json()
    records: list[tuple[str, Any]] = []

    def attempt(label: str, call: Any) -> Any:
        try:
            value = call()
        except Exception as exc:
            records.append((label, f"raised {type(exc).__name__}"))
            return None
        records.append((label, dump(value)))
        return value

    with client_cls(base_url=base).sync() as env:
        attempt("reset", lambda: env.reset(seed=0))
        attempt("state", env.state)
        if issubclass(client_cls, MCPToolClient):
            tools = attempt("list_tools", env.list_tools) or []
            for tool in tools[:3]:
                arguments = example(tool.input_schema)
                if isinstance(arguments, dict):
                    attempt(
                        f"call_tool {tool.name}",
                        lambda t=tool, a=arguments: env.call_tool(t.name, **a),
                    )
        else:
            action_cls = _action_class(client_cls)
            data = example(schema.get("action", {}))
            if action_cls is not None and isinstance(data, dict):
                for i in range(steps):
                    result = attempt(f"step {i}", lambda: env.step(action_cls.model_validate(data)))
                    if result is None or result.done:
                        break
        attempt("state after", env.state)
    return records


def _action_class(client_cls: type) -> Any:
    import typing

    for klass in client_cls.__mro__:
        for base in getattr(klass, "__orig_bases__", ()):
            args = typing.get_args(base)
            if args and isinstance(args[0], type):
                return args[0]
    return None


def http_checks(base: str) -> list[tuple[str, Any]]:
    """Plain HTTP requests and what comes back (status, and the body's shape)."""
    out: list[tuple[str, Any]] = []
    with httpx.Client(base_url=base, timeout=60) as http:
        for name in ("health", "schema", "metadata"):
            response = http.get(f"/{name}")
            out.append((f"GET /{name}", (response.status_code, response.json())))
        response = http.post("/reset", json={})
        body = response.json()
        out.append(
            (
                "POST /reset",
                (response.status_code, sorted(body) if isinstance(body, dict) else body),
            )
        )
        response = http.post("/step", json={"action": {"no_such_field": 1}})
        out.append(("POST /step (bad action)", response.status_code))
        rpc = {"jsonrpc": "2.0", "method": "tools/list", "id": 1}
        body = http.post("/mcp", json=rpc).json()
        summary = (
            body.get("error", {}).get("code") if "error" in body else sorted(body.get("result", {}))
        )
        out.append(("POST /mcp tools/list", summary))
    return out


def masked(first: Any, second: Any) -> Any:
    """``first`` with every value that differs in ``second`` replaced by '<varies>'."""
    if isinstance(first, dict) and isinstance(second, dict):
        return {k: masked(v, second.get(k)) for k, v in first.items()}
    if isinstance(first, list) and isinstance(second, list) and len(first) == len(second):
        return [masked(a, b) for a, b in zip(first, second, strict=True)]
    return first if first == second else "<varies>"


def differences(reference: Any, candidate: Any, path: str = "") -> list[str]:
    if reference == "<varies>":
        return []
    if isinstance(reference, dict) and isinstance(candidate, dict):
        found = []
        for key in sorted(set(reference) | set(candidate)):
            found += differences(
                reference.get(key, "<missing>"), candidate.get(key, "<missing>"), f"{path}.{key}"
            )
        return found
    if (
        isinstance(reference, list)
        and isinstance(candidate, list)
        and len(reference) == len(candidate)
    ):
        found = []
        for i, (a, b) in enumerate(zip(reference, candidate, strict=True)):
            found += differences(a, b, f"{path}[{i}]")
        return found
    if reference != candidate:
        return [f"{path or 'value'}: {_short(reference)} vs {_short(candidate)}"]
    return []


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def compare_env(directory: Path, envs: Path, compat: str, timeout: float) -> dict[str, Any]:
    row: dict[str, Any] = {"env": directory.name}
    probe = subprocess.run(
        [sys.executable, "-c", PROBE, str(directory)],
        cwd=envs,
        env=dict(os.environ, PYTHONPATH=str(envs)),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        row["status"] = f"skipped: {last[:90]}"
        return row
    found = json.loads(probe.stdout.strip().splitlines()[-1])
    sys.path.insert(0, str(envs))
    results: dict[str, list[tuple[str, Any]]] = {}
    try:
        with openenv_core(envs, found["app"], timeout) as base:
            first = scenario(base, found["client"])
            second = scenario(base, found["client"])
            results["core"] = [
                (k, masked(v, w)) for (k, v), (_, w) in zip(first, second, strict=False)
            ]
            results["core_http"] = http_checks(base)
        with envwire(directory, found["app"], compat, timeout) as base:
            results["envwire"] = scenario(base, found["client"])
            results["envwire_http"] = http_checks(base)
    except Exception as exc:
        row["status"] = f"failed: {type(exc).__name__}: {str(exc)[:80]}"
        return row
    client_diff = _diff_records(results["core"], results["envwire"])
    http_diff = _diff_records(results["core_http"], results["envwire_http"])
    row["client"] = f"{len(results['core'])} calls, " + (
        "same" if not client_diff else f"{len(client_diff)} differ"
    )
    row["http"] = f"{len(results['core_http'])} requests, " + (
        "same" if not http_diff else f"{len(http_diff)} differ"
    )
    row["status"] = "same" if not client_diff and not http_diff else "differs"
    row["details"] = client_diff + http_diff
    return row


def _diff_records(reference: list[tuple[str, Any]], candidate: list[tuple[str, Any]]) -> list[str]:
    found = []
    theirs = dict(candidate)
    for label, value in reference:
        mine = theirs.get(label, "<missing>")
        for line in differences(value, mine):
            found.append(f"{label}: {_deliberate(label, line)}")
    return found


def _deliberate(label: str, line: str) -> str:
    if label == "POST /mcp tools/list" and line.endswith('-32603 vs ["tools"]'):
        return line + " (deliberate: an env without tools lists none)"
    if label == "POST /step (bad action)" and line.endswith(" vs 400"):
        return line + " (deliberate: stateful HTTP, /step needs the session /reset opened)"
    return line


def table(rows: list[dict[str, Any]], markdown: bool) -> str:
    header = ["env", "status", "client scenario", "HTTP endpoints"]
    lines = []
    for row in rows:
        lines.append([row["env"], row["status"], row.get("client", ""), row.get("http", "")])
    if markdown:
        out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        out += ["| " + " | ".join(cells) + " |" for cells in lines]
    else:
        widths = [max(len(str(c)) for c in col) for col in zip(header, *lines, strict=True)]
        out = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
        out += [
            "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True))
            for cells in lines
        ]
    for row in rows:
        for detail in row.get("details", ()):
            out.append(f"  {row['env']}: {detail}")
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", nargs="?", type=Path, help="an OpenEnv repository checkout")
    parser.add_argument("--envs", help="comma-separated env directory names (default: all)")
    parser.add_argument("--openenv-compat", default="default", choices=["default", "strict"])
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per server start")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    envs = args.checkout / "envs" if args.checkout else None
    if envs is None or not envs.is_dir():
        print("no OpenEnv checkout given (or it has no envs/ directory): nothing to compare")
        return 0
    wanted = set(args.envs.split(",")) if args.envs else None
    directories = sorted(
        d
        for d in envs.iterdir()
        if ((d / "openenv.yaml").exists() or (d / "server" / "app.py").exists())
        and (wanted is None or d.name in wanted)
    )
    # envwire's servers import the envs' packages (those without a manifest by module name).
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(envs), os.getenv("PYTHONPATH")]))
    rows = []
    for directory in directories:
        print(f"... {directory.name}", file=sys.stderr, flush=True)
        rows.append(compare_env(directory, envs, args.openenv_compat, args.timeout))
        # Each row as soon as it is known: a long run that is stopped keeps what it found.
        row = rows[-1]
        for line in [f"{row['status']}: {row.get('client', '')}", *row.get("details", ())]:
            print(f"    {line}", file=sys.stderr, flush=True)
    print(table(rows, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
