"""Times jaxmg.potrs on the GPUs at hand: a small script, not the benchmark
suite (that is bench/'s own issue).

    python bench/time_potrs.py [N] [T_A] [repeats] [VARIANT ...]  # 65536 1024 5

Builds a random, well-conditioned SPD float64 matrix row-sharded over all GPUs,
warms up (compilation, cuSOLVERMg handles), then prints the median of
`repeats` device-synchronized solves and the relative residual of the last.

Each VARIANT (``NAME=VALUE[,NAME=VALUE...]``, e.g. ``JAXMG_COPY_LANES=1``) sets
environment variables that jaxmg reads at every call, and is timed in turn on
the same matrix, after the default; the variables are restored after each.
The variant ``donate`` donates A to the solve (a fresh copy each run, made
outside the timing), so that XLA need not copy A before jaxmg overwrites it.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 65536
    tile = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    variants = [""] + sys.argv[4:]
    gpus = jax.devices("gpu")
    mesh = Mesh(np.array(gpus), ("x",))
    rows = NamedSharding(mesh, P("x", None))

    @jax.jit
    def make(key):
        r = jax.random.normal(key, (n, n), jnp.float64)
        # A random symmetric matrix has spectral norm about 2 sqrt(n): the
        # shift makes A SPD with a condition number of about 5.
        a = (r + r.T) / 2 + 3.0 * np.sqrt(n) * jnp.eye(n)
        return jax.lax.with_sharding_constraint(a, rows)

    a = make(jax.random.PRNGKey(0))
    b = jax.random.normal(jax.random.PRNGKey(1), (n, 1), jnp.float64)
    solve = jax.jit(lambda a, b: jaxmg.potrs(a, b, tile, mesh, (P("x", None), P(None, None))))
    solve(a, b).block_until_ready()  # warm-up
    donating = jax.jit(lambda a, b: jaxmg.potrs(a, b, tile, mesh, (P("x", None), P(None, None))),
                       donate_argnums=0)
    fresh = jax.jit(lambda a: a + 0.0)
    for variant in variants:
        donate = variant == "donate"
        settings = {} if donate else dict(kv.split("=", 1) for kv in variant.split(",") if kv)
        saved = {k: os.environ.get(k) for k in settings}
        os.environ.update(settings)
        run = ((lambda: donating(fresh(a).block_until_ready(), b)) if donate
               else (lambda: solve(a, b)))
        run().block_until_ready()  # this variant's own warm-up
        times = []
        for _ in range(repeats):
            if donate:
                a_run = fresh(a).block_until_ready()
                t0 = time.perf_counter()
                x = donating(a_run, b).block_until_ready()
            else:
                t0 = time.perf_counter()
                x = solve(a, b).block_until_ready()
            times.append(time.perf_counter() - t0)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        res = float(jnp.linalg.norm(a @ x - b) / (jnp.linalg.norm(a) * jnp.linalg.norm(x)))
        print(f"potrs float64 N={n} T_A={tile} on {len(gpus)} GPU(s) "
              f"[{variant or 'default'}]: median {statistics.median(times):.4f} s of "
              f"{repeats} (min {min(times):.4f}, max {max(times):.4f}); residual {res:.2e}",
              flush=True)


if __name__ == "__main__":
    main()
