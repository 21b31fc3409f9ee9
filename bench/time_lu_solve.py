"""Times jaxmg.lu_solve beside jnp.linalg.solve on the GPUs at hand, f64.

    python bench/time_lu_solve.py OUT_DIR [N ...] [--tile T] [--repeats R]

For each N (default 4096 16384 32768): a random non-symmetric float64 A
(N(0,1) entries plus sqrt(N) I, row-sharded over all GPUs) and one
right-hand side; after a warm-up, the median of R device-synchronized solves
of jaxmg.lu_solve with the default engine, with JAXMG_ENGINE=cusolvermg
(jaxmg's tiled LU), and of jnp.linalg.solve on one GPU (A gathered there
first, outside the timing), with each one's backward error. Prints a table
and writes OUT_DIR/lu_solve.csv; an N that does not fit is reported and
skipped.
"""

from __future__ import annotations

import argparse
import csv
import os
import pathlib
import statistics
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402


def timed(fn, repeats):
    fn().block_until_ready()  # warm-up: compilation, handles
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        out.block_until_ready()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def backward_error(a, x, b):
    return float(jnp.linalg.norm(a @ x - b) / (jnp.linalg.norm(a) * jnp.linalg.norm(x)))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("n", nargs="*", type=int, default=[4096, 16384, 32768])
    p.add_argument("--tile", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpus = jax.devices("gpu")
    mesh = Mesh(np.array(gpus), ("x",))
    rows = NamedSharding(mesh, P("x", None))
    specs = (P("x", None), P(None, None))
    results = []
    print(f"{len(gpus)} x {gpus[0].device_kind}, float64, T_A={args.tile}")
    print(f"{'N':>7} {'what':>24} {'seconds':>9} {'backward error':>15}")
    for n in args.n:
        make = jax.jit(lambda key: jax.lax.with_sharding_constraint(
            jax.random.normal(key, (n, n), jnp.float64) + np.sqrt(n) * jnp.eye(n), rows))
        try:
            a = make(jax.random.PRNGKey(0))
            b = jax.random.normal(jax.random.PRNGKey(1), (n, 1), jnp.float64)
            solve = jax.jit(lambda a, b: jaxmg.lu_solve(a, b, args.tile, mesh, specs))
            cases = [("jaxmg default engine", {}, lambda: solve(a, b)),
                     ("jaxmg cusolvermg (tiled)", {"JAXMG_ENGINE": "cusolvermg"},
                      lambda: solve(a, b))]
            a1 = jax.device_put(a, gpus[0])
            b1 = jax.device_put(b, gpus[0])
            ref = jax.jit(jnp.linalg.solve)
            cases.append(("jnp.linalg.solve 1 GPU", {}, lambda: ref(a1, b1)))
            for what, env, fn in cases:
                saved = {k: os.environ.get(k) for k in env}
                os.environ.update(env)
                try:
                    s, x = timed(fn, args.repeats)
                    be = backward_error(a1, jax.device_put(x, gpus[0]), b1)
                    results.append((n, what, s, be))
                    print(f"{n:>7} {what:>24} {s:>9.4f} {be:>15.2e}", flush=True)
                except Exception as e:  # noqa: BLE001 - report and go on
                    print(f"{n:>7} {what:>24} failed: {type(e).__name__}: {e}"[:300], flush=True)
                finally:
                    for k, v in saved.items():
                        if v is None:
                            os.environ.pop(k, None)
                        else:
                            os.environ[k] = v
            del a, a1
        except Exception as e:  # noqa: BLE001
            print(f"{n:>7} skipped: {type(e).__name__}: {e}"[:300], flush=True)
    with open(out / "lu_solve.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["n", "what", "seconds", "backward_error"])
        w.writerows(results)
    print(f"wrote {out / 'lu_solve.csv'}")


if __name__ == "__main__":
    main()
