"""Runs a page's python blocks in one namespace, as a Python prompt opened in the page's folder.

Started by the docs tests as ``python pydriver.py STATUS_FD``. Each line of stdin is a JSON
request ``{"code", "file", "line"}``; the code runs in the namespace the page's earlier blocks
filled (tracebacks name the page and its lines), and a JSON line ``{"ok": true}`` or ``{"ok":
false, "error": traceback}`` goes to STATUS_FD, so that what the code prints stays apart.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

__all__ = ["main"]


def main() -> int:
    """Serve requests until stdin closes."""
    status = os.fdopen(int(sys.argv[1]), "w", buffering=1)
    # The page's folder, not this file's, comes first on the import path: at a Python prompt a
    # module the page wrote (mypkg/envs.py) imports as it does for a reader.
    sys.path[0] = ""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for request_line in sys.stdin:
        request = json.loads(request_line)
        try:
            # Blank lines in front, so that line numbers in tracebacks are the page's own.
            source = "\n" * request["line"] + request["code"]
            exec(compile(source, request["file"], "exec"), namespace)
        except BaseException:  # SystemExit and KeyboardInterrupt fail the block too
            reply = {"ok": False, "error": traceback.format_exc()}
        else:
            reply = {"ok": True}
        sys.stdout.flush()
        sys.stderr.flush()
        status.write(json.dumps(reply) + "\n")
    return 0


if __name__ == "__main__":
    code = main()
    # At once, without waiting for threads the page's clients left (their server is gone) or
    # running exit handlers: the page is over, and its processes are stopped from outside.
    sys.stdout.flush()
    os._exit(code)
