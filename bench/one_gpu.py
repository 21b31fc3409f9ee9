"""jaxmg against JAX on one GPU (issue 18): the same GPU, the same matrix,
both inside jax.jit, the median of several runs after a warm-up, every run's
result checked (bench/measure.py).

    python bench/one_gpu.py OUTDIR [--budget-s 400] [--sizes 1024,4096,...]
                                   [--repeats 5] [--max-case-s 30]
                                   [--ops potrs,syevd,eigvals,potri,gesvd,lu_solve,polar,qr,lstsq,eigh_gen]
                                   [--impls jax,jaxmg,jaxmg-cusolvermg,jaxmg-cusolvermp,jaxmg-tridiagonal]
                                   [--nrhs 1,16,256] [--tile T] [--no-trace]

Cases: potrs float64 (jax.scipy.linalg.cho_factor + cho_solve), syevd
float64 (jnp.linalg.eigh), eigenvalues only float64 (jaxmg.syevd(...,
return_eigenvectors=False) against jnp.linalg.eigvalsh), potri complex128
(jnp.linalg.inv), gesvd float64 (jnp.linalg.svd), lu_solve float64
(jnp.linalg.solve), polar float64 (jax.scipy.linalg.polar, QDWH), qr float64
(jnp.linalg.qr) and lstsq float64 (jaxmg.least_squares against
jnp.linalg.lstsq, which solves by an SVD, on a square nonsingular A) and
eigh_gen float64 (jaxmg.eigh_generalized against JAX's Cholesky, triangular
solves and eigh composed by hand: JAX has no generalized eigh); N =
1024, 4096, 8192, 16384, 32768; for each, JAX, jaxmg
with its default engine (cuSOLVERDn on one GPU) and jaxmg with
JAXMG_ENGINE=cusolvermg (and, asked for with --impls, cusolvermp: it needs
the cuda13 extra; jaxmg-tridiagonal: the default engine with
JAXMG_SYEVD=tridiagonal, syevd and eigvals only), side by side, T_A left out. potrs and lu_solve run once
per number of right-hand sides in --nrhs (default 1). An engine that does
not run an op (cuSOLVERMg's gesvd, polar, qr, lstsq and eigh_gen;
cuSOLVERMp's gesvd, polar and eigh_gen) is not measured:
"skipped: no routine". --tile gives jaxmg's calls that T_A (default: left
out), e.g. to see how cuSOLVERMp's block size (T_A on one GPU, a power of
two at most T_A for its syevd) changes its speed.

Sizes go in increasing order for every case, so that the budget is spent on
the small ones first. A measurement is skipped ("skipped: budget") when the
time it is predicted to take (the previous size's, scaled by N^3, times the
runs) exceeds what is left of --budget-s, and ("skipped: memory") when its
matrices would not fit the GPU (an estimate: a few copies of A).

Writes OUTDIR/results.csv (one row per measurement), OUTDIR/table.txt (the
table printed at the end: seconds and speed against JAX, > 1 is faster),
OUTDIR/trace.txt (first, before the budget starts: JAXMG_TRACE=1 lines of
every op at N = 1024 with each engine: where a small call's time goes) and
OUTDIR/one_gpu.png where matplotlib is importable.
"""

from __future__ import annotations

import argparse
import csv
import os
import pathlib
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402
from jax.sharding import Mesh  # noqa: E402

import inputs  # noqa: E402
import measure  # noqa: E402

CASES = (("potrs", "float64"), ("syevd", "float64"), ("eigvals", "float64"),
         ("potri", "complex128"), ("gesvd", "float64"), ("lu_solve", "float64"),
         ("polar", "float64"), ("qr", "float64"), ("lstsq", "float64"),
         ("eigh_gen", "float64"))
# The ops whose b has right-hand sides (--nrhs).
RHS_OPS = ("potrs", "lu_solve", "lstsq")
# Engines without a routine for an op: not measured (cuSOLVERMp's sygvd and
# polar's QDWH run on one GPU: csrc/engine/cusolvermp/mp.h, mp_one_gpu_view).
NO_ROUTINE = ({("cusolvermg", op) for op in ("gesvd", "polar", "qr", "lstsq", "eigh_gen")}
              | {("cusolvermp", "gesvd")})
SIZES = (1024, 4096, 8192, 16384, 32768)
# What runs: JAX's routine, and jaxmg with JAXMG_ENGINE as given ("" unset).
IMPLS = (("jax", None), ("jaxmg", ""), ("jaxmg-cusolvermg", "cusolvermg"),
         ("jaxmg-cusolvermp", "cusolvermp"), ("jaxmg-tridiagonal", ""))
# Settings an implementation adds, and the ops it alone measures: syevd's
# tridiagonal path (the default engine's own eigensolver, which otherwise
# runs only where cusolverDnXsyevd's workspace does not fit).
IMPL_ENV = {"jaxmg-tridiagonal": {"JAXMG_SYEVD": "tridiagonal"}}
IMPL_OPS = {"jaxmg-tridiagonal": ("syevd", "eigvals")}
# What runs unless --impls says otherwise (cuSOLVERMp needs the cuda13 extra;
# --impls jax,jaxmg,jaxmg-cusolvermp puts it beside JAX and the default).
DEFAULT_IMPLS = ("jax", "jaxmg", "jaxmg-cusolvermg")
# Copies of A a case holds at once (A, its result, workspaces, the check's
# probes and products), for the memory estimate (also bench/engines.py's).
COPIES = {"potrs": 3, "potri": 4, "syevd": 5, "eigvals": 3, "lu_solve": 3, "gesvd": 6,
          "polar": 7, "qr": 6, "lstsq": 5, "eigh_gen": 7}
FIELDS = ("op", "dtype", "n", "nrhs", "impl", "status", "median_s", "min_s", "max_s", "runs",
          "residual", "compile_s", "speed_vs_jax")


def device_bytes(dev: jax.Device) -> int | None:
    """The device's memory limit in bytes (XLA's allocator), or None where
    the backend has no memory stats (CPU)."""
    try:
        stats = dev.memory_stats() or {}
    except Exception:  # noqa: BLE001  (not every backend has stats)
        return None
    return stats.get("bytes_limit")


def predict(prev: dict, key: tuple, n: int, runs: int, max_case_s: float) -> float | None:
    """Seconds the measurement of key at n will take, from the largest
    smaller size measured: its median scaled by N^3, for runs + a warm-up."""
    smaller = [(m, t) for (k, m), t in prev.items() if k == key and m < n]
    if not smaller:
        return None
    m, t = max(smaller)
    one = t * (n / m) ** 3
    return one * (measure.runs_for(runs, max_case_s, one) + 2)


def skip_reason(need_bytes: float, limit_bytes: int | None, left_s: float,
                guess_s: float | None) -> str | None:
    """Why a measurement is not started, or None to start it: "skipped:
    memory" when need_bytes (an estimate, bytes on the fullest device) is
    above 90% of the device's limit, "skipped: budget" when no time is left or
    the predicted time (predict) exceeds what is left."""
    if limit_bytes is not None and need_bytes > 0.9 * limit_bytes:
        return f"skipped: memory (~{need_bytes / 2**30:.0f} GiB)"
    if left_s <= 0 or (guess_s is not None and guess_s > left_s):
        return "skipped: budget"
    return None


def _log(msg: str) -> None:
    print(msg, flush=True)


def run(out: pathlib.Path, budget_s: float, sizes: tuple[int, ...], repeats: int,
        max_case_s: float, ops: tuple[str, ...] = tuple(c[0] for c in CASES),
        impls: tuple[str, ...] = DEFAULT_IMPLS, nrhs: tuple[int, ...] = (1,),
        tile: int | None = None) -> list[dict]:
    """Measures every case of ops at every size with every implementation of
    impls, potrs and lu_solve once per number of right-hand sides in nrhs
    (the budget and memory rules of the module docstring)."""
    start = time.perf_counter()
    dev = jax.devices()[0]
    mesh = Mesh(np.array([dev]), (inputs.AXIS,))
    limit = device_bytes(dev)
    _log(f"one_gpu: {dev.device_kind} ({dev.platform}), jax {jax.__version__}, "
         f"budget {budget_s:.0f} s, memory limit "
         f"{'unknown' if limit is None else f'{limit / 2**30:.1f} GiB'}")
    rows: list[dict] = []
    times: dict = {}
    seed = 0
    cases = [(op, dtype, k) for op, dtype in CASES if op in ops
             for k in (nrhs if op in RHS_OPS else (1,))]
    for n in sizes:
        for op, dtype, k in cases:
            esize = np.dtype(dtype).itemsize
            need = COPIES[op] * n * n * esize
            jax_s = None
            for impl, engine in (i for i in IMPLS if i[0] in impls):
                seed += 1
                row = dict(op=op, dtype=dtype, n=n, nrhs=k, impl=impl)
                left = budget_s - (time.perf_counter() - start)
                guess = predict(times, (op, dtype, k, impl), n, repeats, max_case_s)
                skip = skip_reason(need, limit, left, guess)
                if (engine, op) in NO_ROUTINE or op not in IMPL_OPS.get(impl, (op,)):
                    row["status"] = "skipped: no routine"
                elif skip:
                    row["status"] = skip
                else:
                    if engine is None:
                        fn = measure.jax_fn(op)
                    else:
                        fn = measure.jaxmg_fn(op, tile, mesh)
                    try:
                        with measure.environ({"JAXMG_ENGINE": engine or None,
                                              **IMPL_ENV.get(impl, {})}):
                            m = measure.measure(op, dtype, n, mesh, fn, seed, repeats,
                                                max_case_s, _log, nrhs=k)
                    except Exception as e:  # noqa: BLE001  (a row, not a crash)
                        m = measure.Measured(status=f"error: {type(e).__name__}: "
                                             f"{str(e).splitlines()[0][:200]}")
                    row.update(status=m.status, median_s=m.median_s, min_s=m.min_s,
                               max_s=m.max_s, runs=m.runs, residual=m.residual,
                               compile_s=m.compile_s)
                    if m.median_s is not None:
                        times[((op, dtype, k, impl), n)] = m.median_s
                    if impl == "jax" and m.ok:
                        jax_s = m.median_s
                    if jax_s is not None and m.ok and m.median_s:
                        row["speed_vs_jax"] = jax_s / m.median_s
                rows.append(row)
                _log(_line(row))
                write_csv(out / "results.csv", rows)
    _log(f"one_gpu: done in {time.perf_counter() - start:.0f} s")
    return rows


def trace_small(out: pathlib.Path, n: int = 1024, calls: int = 3,
                impls: tuple[str, ...] = DEFAULT_IMPLS) -> None:
    """Where a small call's time goes inside jaxmg: every op at N = n, with
    each engine, `calls` times after a warm-up, with JAXMG_TRACE=1 (one line
    per call from the C library's leader, on stderr, redirected to
    OUTDIR/trace.txt)."""
    dev = jax.devices()[0]
    mesh = Mesh(np.array([dev]), (inputs.AXIS,))
    path = out / "trace.txt"
    saved = {k: os.environ.get(k) for k in ("JAXMG_TRACE", "JAXMG_ENGINE")}
    sys.stderr.flush()
    fd = os.dup(2)
    with path.open("w") as f:
        os.dup2(f.fileno(), 2)
        try:
            for _, engine in (i for i in IMPLS[1:] if i[0] in impls):
                for op, dtype in CASES:
                    if (engine, op) in NO_ROUTINE:
                        continue
                    if engine:
                        os.environ["JAXMG_ENGINE"] = engine
                    else:
                        os.environ.pop("JAXMG_ENGINE", None)
                    os.environ.pop("JAXMG_TRACE", None)
                    a = (inputs.general if op in measure.GENERAL
                         else inputs.hpd)(n, dtype, mesh, 1)
                    b = jax.numpy.ones((n, 1), dtype)
                    fn = measure.jaxmg_fn(op, None, mesh)
                    jax.block_until_ready(fn(a, b))
                    os.environ["JAXMG_TRACE"] = "1"
                    for _ in range(calls):
                        jax.block_until_ready(fn(a, b))
                    os.environ.pop("JAXMG_TRACE", None)
        except Exception as e:  # noqa: BLE001  (the trace is an extra)
            print(f"trace_small: {type(e).__name__}: {e}", file=sys.stderr)
        finally:
            sys.stderr.flush()
            os.dup2(fd, 2)
            os.close(fd)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    print(path.read_text(), end="")


def _fmt(v, spec: str) -> str:
    return "" if v is None else format(v, spec)


def _line(r: dict) -> str:
    return (f"{_case(r):12s} {r['dtype']:10s} N={r['n']:6d} {r['impl']:17s} "
            f"{r['status'][:40]:40s} {_fmt(r.get('median_s'), '.4f'):>9s} s "
            f"x{_fmt(r.get('speed_vs_jax'), '.2f')}")


def _case(r: dict) -> str:
    """The op, with its right-hand sides where it has them: "potrs/16"."""
    return f"{r['op']}/{r['nrhs']}" if r["op"] in RHS_OPS else r["op"]


def write_csv(path: pathlib.Path, rows: list[dict],
              fields: tuple[str, ...] = FIELDS) -> None:
    """Writes rows (dicts) as CSV with the given columns (absent: empty)."""
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: "" if r.get(k) is None else r.get(k) for k in fields})


def table(rows: list[dict]) -> str:
    """Seconds per implementation and jaxmg's speed against JAX (JAX's time
    over jaxmg's: > 1 is faster), one line per case and size."""
    names = [impl for impl, _ in IMPLS if any(r["impl"] == impl for r in rows)]
    head = f"{'op/nrhs':12s} {'dtype':10s} {'N':>6s}  " + "  ".join(
        f"{name:>17s}" for name in names)
    lines = [head, "-" * len(head)]
    by = {(_case(r), r["dtype"], r["n"], r["impl"]): r for r in rows}
    order = list(dict.fromkeys((_case(r), r["dtype"]) for r in rows))
    for case, dtype in order:
        for n in sorted({r["n"] for r in rows}):
            cells = []
            for name in names:
                r = by.get((case, dtype, n, name))
                if r is None:
                    cells.append(f"{'':>17s}")
                elif r["status"] != "ok":
                    cells.append(f"{r['status'].split(':')[0][:17]:>17s}")
                elif name == "jax" or r.get("speed_vs_jax") is None:
                    cells.append(f"{r['median_s']:>15.4f} s")
                else:
                    cells.append(f"{r['median_s']:>8.4f} s x{r['speed_vs_jax']:5.2f}")
            if any(c.strip() for c in cells):
                lines.append(f"{case:12s} {dtype:10s} {n:6d}  " + "  ".join(cells))
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: pathlib.Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    panels = list(dict.fromkeys((_case(r), r["dtype"]) for r in rows))
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4), squeeze=False)
    for ax, (case, dtype) in zip(axes[0], panels):
        for impl, _ in IMPLS:
            pts = sorted((r["n"], r["median_s"]) for r in rows
                         if _case(r) == case and r["dtype"] == dtype and r["impl"] == impl
                         and r["status"] == "ok")
            if pts:
                ax.loglog(*zip(*pts), marker="o", label=impl)
        ax.set_title(f"{case} {dtype}, one GPU")
        ax.set_xlabel("N")
        ax.set_ylabel("seconds (median)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("outdir", type=pathlib.Path)
    p.add_argument("--budget-s", type=float, default=400.0,
                   help="seconds for all measurements (default 400)")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)))
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--max-case-s", type=float, default=30.0,
                   help="fewer timed runs (at least 2) beyond this per measurement")
    p.add_argument("--ops", default=",".join(c[0] for c in CASES),
                   help="the cases to run (default: all)")
    p.add_argument("--impls", default=",".join(DEFAULT_IMPLS),
                   help="the implementations to run (default: "
                   f"{','.join(DEFAULT_IMPLS)}; also jaxmg-cusolvermp)")
    p.add_argument("--nrhs", default="1",
                   help="right-hand sides of potrs and lu_solve, e.g. 1,16,256 (default 1)")
    p.add_argument("--tile", type=int, default=0,
                   help="T_A of jaxmg's calls (default 0: left out)")
    p.add_argument("--no-trace", action="store_true",
                   help="skip the JAXMG_TRACE lines at N = 1024")
    args = p.parse_args()
    ops = tuple(o for o in args.ops.split(",") if o)
    impls = tuple(i for i in args.impls.split(",") if i)
    for name, known in (("--ops", [c[0] for c in CASES]), ("--impls", [i[0] for i in IMPLS])):
        bad = [x for x in (ops if name == "--ops" else impls) if x not in known]
        if bad:
            p.error(f"{name}: unknown {bad} (known: {known})")
    args.outdir.mkdir(parents=True, exist_ok=True)
    sizes = tuple(int(s) for s in args.sizes.split(",") if s)
    nrhs = tuple(int(k) for k in args.nrhs.split(",") if k)
    if not args.no_trace:
        trace_small(args.outdir, impls=impls)
    rows = run(args.outdir, args.budget_s, sizes, args.repeats, args.max_case_s, ops, impls,
               nrhs, args.tile or None)
    text = table(rows)
    (args.outdir / "table.txt").write_text(text)
    print(text)
    if plot(rows, args.outdir / "one_gpu.png"):
        print(f"plot: {args.outdir / 'one_gpu.png'}")


if __name__ == "__main__":
    main()
