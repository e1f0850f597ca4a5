"""OpenEnv: envwire beside openenv-core's own server, driven by the same clients.

The suite lives in ``envwire.server.openenv.bench`` (so ``envwire bench`` runs it too); run
``python benchmarks/bench_openenv.py [--steps N] [--rounds R] [--pin none split] [--quick]``.
"""

from __future__ import annotations

from envwire.server.openenv.bench import main

if __name__ == "__main__":
    raise SystemExit(main())
