"""On one GPU: at which N does cuSOLVERDn's potri (the 32-bit
cusolverDn<t>potri, after the 64-bit Xpotrf) start to fail? Runs jaxmg.potri
(engine cusolverdn) on a well-conditioned HPD A of each N given, float32, A
donated, one fresh process per N, and prints the outcome and the residual
of a few columns (bench/largest.py's check).

    python scripts/probe-potri-limit.py 46336 46400 65536
"""

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
for n in sys.argv[1:]:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "largest.py"), "--one", n, "--op", "potri",
         "--lib", "jaxmg", "--dtype", "float32", "--gpus", "1"],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false"))
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("LARGEST ")]
    r = json.loads(lines[-1][len("LARGEST "):]) if lines else {"status": out.stderr[-500:]}
    print(f"potri float32 N={n} (N^2 = {int(n) ** 2}, 2^31 = {2 ** 31}): {r.get('status')}"
          f" residual {r.get('residual')}", flush=True)
