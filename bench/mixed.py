"""precision="mixed" against the exact path and JAX's own solve, on one device.

For potrs (beside ``jax.scipy.linalg.cho_factor`` + ``cho_solve``) and
lu_solve (beside ``jnp.linalg.solve``), float64, random A of chosen
condition number (A = Q diag(s) Q^T, or Q1 diag(s) Q2^T for lu_solve, s
geometric from 1 to 1/kappa, Q from the QR of a Gaussian matrix), under jit,
median of --repeats runs after a warm-up. Each row reports the normwise
backward error ||b - A x||_inf / (||A||_inf ||x||_inf + ||b||_inf) of every
path, computed in float64, and the status jaxmg returned.

    python3 bench/mixed.py --n 8192 16384 --kappa 1e2 1e6 1e12 --out results.csv

Run with JAXMG_TRACE=1 to see each mixed call's precision, iterations,
backward error and any fall back (issue 39).

Each row also runs the mixed call once more with JAXMG_TRACE=1 and records
what its trace says (the factorization's and the refinement's times, the
TF32 Cholesky's parts: diagonal potrf, trsm, TF32 update; any fallback and
why), in the columns after ``status_mixed``. ``--tf32-nb`` sweeps the TF32
Cholesky's block (JAXMG_TF32_NB, read at each call), one row per value, to
tune it; ``--tf32-lookahead 0 1`` compares the TF32 Cholesky without and with its
look-ahead (JAXMG_TF32_LOOKAHEAD); ``--max-steps`` sets JAXMG_REFINE_MAX_STEPS (the refinement's step
budget; 0 none), to see what failing fast saves:

    python3 bench/mixed.py --ops potrs --n 16384 32768 --kappa 1e2 \
        --tf32-nb 256 512 1024 2048 --tf32-lookahead 0 1 --out tf32_nb.csv

``--variants`` runs the mixed call once more per variant with environment
settings of its own (``NAME=VALUE`` joined by commas; ``-`` for none), one row
each: to set the refinement's steps side by side, e.g. session 18's
(cuSOLVER's potrs for the solves, symm for the residual) against the blocked
solves and symv of session 19:

    python3 bench/mixed.py --ops potrs --n 16384 --kappa 1e2 \
        --variants - JAXMG_REFINE_NB=0,JAXMG_REFINE_RESIDUAL=symm JAXMG_REFINE_NB=1024

``--gpus 2`` runs jaxmg's two paths on a mesh of the first two devices (A
row-sharded, b replicated: the mixed path gathers A onto the first, the exact
path runs the default distributed engine), JAX's own solve on the first
device alone; ``mixed_vs_exact`` is then the issue's 2-GPU ratio.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import re
import statistics
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

jax.config.update("jax_enable_x64", True)

import jaxmg  # noqa: E402


def test_matrix(op: str, n: int, kappa: float, seed: int) -> jax.Array:
    """A random float64 n x n matrix of 2-norm condition number kappa."""
    keys = jax.random.split(jax.random.PRNGKey(seed), 2)
    s = jnp.logspace(0.0, -np.log10(kappa), n, dtype=jnp.float64)
    q1, _ = jnp.linalg.qr(jax.random.normal(keys[0], (n, n), jnp.float64))
    if op == "potrs":
        a = (q1 * s) @ q1.T
        return (a + a.T) / 2
    q2, _ = jnp.linalg.qr(jax.random.normal(keys[1], (n, n), jnp.float64))
    return (q1 * s) @ q2.T


@jax.jit
def backward_error(a: jax.Array, x: jax.Array, b: jax.Array) -> jax.Array:
    """||b - A x||_inf / (||A||_inf ||x||_inf + ||b||_inf), in float64."""
    r = b - a @ x
    inf = lambda m: jnp.max(jnp.sum(jnp.abs(m), axis=-1))  # noqa: E731
    return inf(r) / (inf(a) * inf(x) + inf(b))


def berr(a: jax.Array, x: jax.Array, b: jax.Array) -> float:
    """backward_error with x brought to a's device (jaxmg's x is replicated
    over its mesh)."""
    return float(backward_error(a, jax.device_put(x, a.sharding), b))


def timed(fn, *args, repeats: int) -> tuple[float, object]:
    """Median seconds of fn(*args) over repeats runs, after one warm-up."""
    out = jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


@contextlib.contextmanager
def captured_stderr():
    """The process's file descriptor 2 (where the C library's trace goes)
    into a temporary file for the block; yields a list that holds its text
    after."""
    out: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield out
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            out.append(tmp.read().decode(errors="replace"))


TRACE_FIELDS = ["factor_ms", "diag_potrf_ms", "trsm_ms", "tf32_update_ms", "invert_ms",
                "refine_ms", "solves", "solve_ms", "products", "product_ms", "fallback",
                "trace"]


def traced(fn, *args) -> dict:
    """One more call of fn with JAXMG_TRACE=1: the mixed call's trace line
    and the numbers in it (the factorization's time, the TF32 Cholesky's
    parts, the refinement's time, whether it fell back)."""
    before = os.environ.get("JAXMG_TRACE")
    os.environ["JAXMG_TRACE"] = "1"
    try:
        with captured_stderr() as text:
            jax.block_until_ready(fn(*args))
    finally:
        if before is None:
            del os.environ["JAXMG_TRACE"]
        else:
            os.environ["JAXMG_TRACE"] = before
    lines = [ln for ln in text[0].splitlines() if ln.startswith("jaxmg trace")]
    line = lines[-1] if lines else ""

    def ms(pattern):
        m = re.search(pattern, line)
        return m.group(1) if m else ""

    return dict(
        # The factorization's own time: past its parenthesized parts, which
        # hold commas of their own.
        factor_ms=ms(r"(?:potrf|getrf) (?:tf32|float32|complex64)(?:[^,(]|\([^)]*\))*? "
                     r"([0-9.]+) ms,"),
        diag_potrf_ms=ms(r"diagonal potrf ([0-9.]+) ms"),
        trsm_ms=ms(r"(?:trsm|inverse panels) ([0-9.]+) ms"),
        tf32_update_ms=ms(r"tf32 update ([0-9.]+) ms\)"),
        invert_ms=ms(r"diagonal blocks inverted \(solves by blocks of \d+[^)]*\) ([0-9.]+) ms"),
        refine_ms=ms(r"refine [^,]* ([0-9.]+) ms,"),
        solves=ms(r"\[(\d+) solves"),
        solve_ms=ms(r"\[\d+ solves ([0-9.]+) ms"),
        products=ms(r"; (\d+) products with A"),
        product_ms=ms(r"products with A ([0-9.]+) ms\]"),
        fallback=int("fallback" in line),
        trace=line.split(": ", 1)[-1])


def paths(op: str, mesh):
    """The three jitted solves of op: jaxmg exact, jaxmg mixed, JAX's own."""
    specs = (P("x", None), P(None, None))
    call = getattr(jaxmg, op)

    def mg(precision):
        return jax.jit(lambda a, b: call(a, b, mesh=mesh, in_specs=specs, return_status=True,
                                         precision=precision))

    if op == "potrs":
        def ref(a, b):
            return jax.scipy.linalg.cho_solve(jax.scipy.linalg.cho_factor(a), b)
    else:
        ref = jnp.linalg.solve
    return mg("exact"), mg("mixed"), jax.jit(ref)


def variant_env(text: str) -> tuple[str, dict]:
    """A --variants entry: its name (the text with "+" for its commas,
    "default" for "-") and its settings."""
    if text in ("-", ""):
        return "default", {}
    env = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"--variants: expected NAME=VALUE, got {item!r}")
        env[name] = value
    return text.replace(",", "+"), env  # no comma in a csv field


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ops", nargs="+", default=["potrs", "lu_solve"])
    p.add_argument("--n", nargs="+", type=int, default=[8192, 16384])
    p.add_argument("--kappa", nargs="+", type=float, default=[1e2, 1e6, 1e12])
    p.add_argument("--nrhs", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default="mixed.csv")
    p.add_argument("--tf32-nb", nargs="+", type=int, default=[0],
                   help="JAXMG_TF32_NB values to sweep (64 to 8192; 0: the default by N)")
    p.add_argument("--tf32-lookahead", nargs="+", type=int, default=[0], choices=[0, 1],
                   help="JAXMG_TF32_LOOKAHEAD values to sweep (1: the diagonal blocks' potrf "
                        "on a second stream, overlapping the trailing update)")
    p.add_argument("--max-steps", type=int, default=None,
                   help="JAXMG_REFINE_MAX_STEPS (the refinement's step budget; 0: none)")
    p.add_argument("--no-trace", action="store_true",
                   help="skip the traced extra call of each row")
    p.add_argument("--variants", nargs="+", default=["-"],
                   help="environment settings of the mixed call, one row each: "
                        "NAME=VALUE[,NAME=VALUE...] or - for none")
    p.add_argument("--gpus", type=int, default=1,
                   help="devices of jaxmg's mesh (A row-sharded over them)")
    args = p.parse_args(argv)
    if args.max_steps is not None:
        os.environ["JAXMG_REFINE_MAX_STEPS"] = str(args.max_steps)
    mesh = jax.make_mesh((args.gpus,), ("x",), devices=jax.devices()[:args.gpus])
    shard_a = jax.sharding.NamedSharding(mesh, P("x", None))
    shard_b = jax.sharding.NamedSharding(mesh, P(None, None))
    variants = [variant_env(v) for v in args.variants]
    cols = ["op", "n", "kappa", "gpus", "variant", "tf32_nb", "lookahead", "device", "exact_s",
            "mixed_s", "jax_s",
            "mixed_vs_jax", "mixed_vs_exact", "berr_exact", "berr_mixed", "berr_jax",
            "status_exact", "status_mixed"] + TRACE_FIELDS
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        print(",".join(cols), flush=True)
        for op in args.ops:
            exact, mixed, ref = paths(op, mesh)
            for n in args.n:
                for kappa in args.kappa:
                    a = test_matrix(op, n, kappa, seed=n + int(np.log10(kappa)))
                    b = jax.random.normal(jax.random.PRNGKey(7), (n, args.nrhs), jnp.float64)
                    tj, xj = timed(ref, a, b, repeats=args.repeats)
                    # a0, b0 on the first device (JAX's solve, the backward errors);
                    # a, b on jaxmg's mesh.
                    a0, b0 = a, b
                    if args.gpus > 1:
                        a, b = jax.device_put(a0, shard_a), jax.device_put(b0, shard_b)
                    te, (xe, se) = timed(exact, a, b, repeats=args.repeats)
                    for nb, la, (vname, venv) in [(nb, la, v) for nb in args.tf32_nb
                                                  for la in args.tf32_lookahead
                                                  for v in variants]:
                        os.environ["JAXMG_TF32_LOOKAHEAD"] = str(la)
                        if nb:
                            os.environ["JAXMG_TF32_NB"] = str(nb)
                        else:
                            os.environ.pop("JAXMG_TF32_NB", None)
                        saved = {k: os.environ.get(k) for k in venv}
                        os.environ.update(venv)
                        tm, (xm, sm) = timed(mixed, a, b, repeats=args.repeats)
                        row = dict(op=op, n=n, kappa=f"{kappa:.0e}", gpus=args.gpus,
                                   variant=vname, tf32_nb=nb or "default",
                                   lookahead=la,
                                   device=jax.devices()[0].device_kind,
                                   exact_s=f"{te:.4f}", mixed_s=f"{tm:.4f}", jax_s=f"{tj:.4f}",
                                   mixed_vs_jax=f"{tj / tm:.2f}", mixed_vs_exact=f"{te / tm:.2f}",
                                   berr_exact=f"{berr(a0, xe, b0):.2e}",
                                   berr_mixed=f"{berr(a0, xm, b0):.2e}",
                                   berr_jax=f"{berr(a0, xj, b0):.2e}",
                                   status_exact=int(se), status_mixed=int(sm))
                        row.update(dict.fromkeys(TRACE_FIELDS, "") if args.no_trace
                                   else traced(mixed, a, b))
                        for k, v in saved.items():
                            if v is None:
                                os.environ.pop(k, None)
                            else:
                                os.environ[k] = v
                        w.writerow(row)
                        f.flush()
                        print(",".join(str(row[c]) for c in cols[:-1]), flush=True)
                        if row["trace"]:
                            print("  " + row["trace"], flush=True)
                        del xm
                    os.environ.pop("JAXMG_TF32_NB", None)
                    os.environ.pop("JAXMG_TF32_LOOKAHEAD", None)
                    del a, b, a0, b0, xe, xj
    return 0


if __name__ == "__main__":
    sys.exit(main())
