"""Run OpenEnv's own protocol tests against a live envwire, and print a table.

    python benchmarks/openenv_protocol_tests.py /path/to/OpenEnv [--markdown] [FILE ...]

OpenEnv's tests drive openenv-core's app in-process (Starlette's ``TestClient``) or start it
with uvicorn. This script runs the chosen test files of a checkout three times:

1. as they are, against openenv-core (the baseline: some fail on openenv-core itself with the
   installed library versions);
2. with ``benchmarks/openenv_live_plugin.py``, which serves what each test's app was built from
   with envwire (in this process, on a free port, or as ``envwire serve``) and sends every
   request and WebSocket message over real sockets, in envwire's default mode;
3. the same in ``--openenv-compat strict``.

The table counts, per file, the tests that reached a server and how many pass in each run;
below it, every test that passes on openenv-core but not on envwire. Tests that never reach a
server (unit tests of openenv-core's own classes) are counted apart: they run in-process in all
three runs. Without a checkout the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: The files of OpenEnv's test suite that drive a server over HTTP or WebSocket.
DEFAULT_FILES = (
    "tests/core/test_simulation_mode_preserves_api.py",
    "tests/core/test_production_mode_mcp.py",
    "tests/core/test_production_mode_routes.py",
    "tests/core/test_mcp/test_mcp_integration.py",
    "tests/envs/test_websockets.py",
)

#: Each run's label and the environment variables it adds.
RUNS: tuple[tuple[str, dict[str, str]], ...] = (
    ("openenv-core", {"ENVWIRE_LIVE": "0"}),
    ("envwire", {}),
    ("envwire strict", {}),
)


def run(
    checkout: Path, files: list[str], label: str, extra: dict[str, str]
) -> tuple[dict[str, str], dict[str, bool]]:
    """Outcomes by test id, and whether each test reached a server."""
    with tempfile.TemporaryDirectory() as tmp:
        junit, report = Path(tmp) / "junit.xml", Path(tmp) / "wire.jsonl"
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join(
                [str(HERE), str(checkout), os.environ.get("PYTHONPATH", "")]
            ),
            ENVWIRE_LIVE_REPORT=str(report),
            ENVWIRE_OPENENV_COMPAT="strict" if label.endswith("strict") else "default",
            **extra,
        )
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p"]
        command += ["openenv_live_plugin", f"--junitxml={junit}", "-o", "addopts=", *files]
        print(f"... {label}: {' '.join(command[2:])}", file=sys.stderr, flush=True)
        subprocess.run(command, cwd=checkout, env=env, check=False, stdout=subprocess.DEVNULL)
        outcomes = _junit(junit) if junit.exists() else {}
        wire = {}
        if report.exists():
            for line in report.read_text().splitlines():
                entry = json.loads(line)
                wire[_key(entry["test"])] = bool(entry["wire"])
    return outcomes, wire


def _key(nodeid: str) -> str:
    path, _, rest = nodeid.partition("::")
    return path.removesuffix(".py").replace("/", ".") + "::" + rest


def _junit(path: Path) -> dict[str, str]:
    outcomes = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        module, _, cls = classname, "", ""
        parts = classname.split(".")
        if parts and parts[-1][:1].isupper():
            module, cls = ".".join(parts[:-1]), parts[-1]
        key = f"{module}::{cls}::{name}" if cls else f"{module}::{name}"
        if case.find("failure") is not None or case.find("error") is not None:
            outcomes[key] = "failed"
        elif case.find("skipped") is not None:
            outcomes[key] = "skipped"
        else:
            outcomes[key] = "passed"
    return outcomes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", nargs="?", type=Path, help="an OpenEnv repository checkout")
    parser.add_argument(
        "files", nargs="*", help=f"test files (default: {len(DEFAULT_FILES)} files)"
    )
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = parser.parse_args()
    if args.checkout is None or not (args.checkout / "tests").is_dir():
        print("no OpenEnv checkout given (or it has no tests/ directory): nothing to run")
        return 0
    files = args.files or [f for f in DEFAULT_FILES if (args.checkout / f).exists()]
    results = {label: run(args.checkout, files, label, extra) for label, extra in RUNS}
    wire = {**results["envwire"][1], **results["envwire strict"][1]}
    header = ["file", "tests on the wire", *(f"pass: {label}" for label, _ in RUNS), "other tests"]
    rows = []
    for name in files:
        module = name.removesuffix(".py").replace("/", ".")
        ids = sorted(k for k in results["openenv-core"][0] if k.startswith(module + "::"))
        on_wire = [k for k in ids if wire.get(k)]
        cells = [Path(name).name, str(len(on_wire))]
        for label, _ in RUNS:
            outcomes = results[label][0]
            cells.append(str(sum(outcomes.get(k) == "passed" for k in on_wire)))
        cells.append(str(len(ids) - len(on_wire)))
        rows.append(cells)
    total = ["total", *(str(sum(int(r[i]) for r in rows)) for i in range(1, len(header)))]
    rows.append(total)
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for cells in rows:
            print("| " + " | ".join(cells) + " |")
    else:
        widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]
        for cells in [header, *rows]:
            print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))
    core = results["openenv-core"][0]
    for label in ("envwire", "envwire strict"):
        outcomes = results[label][0]
        lost = [
            k
            for k in sorted(core)
            if wire.get(k) and core[k] == "passed" and outcomes.get(k) != "passed"
        ]
        for key in lost:
            print(f"  {label}: {key} passes on openenv-core, {outcomes.get(key, 'missing')} here")
    return 0


if __name__ == "__main__":
    sys.exit(main())
