"""Every engine side by side on one mesh of all the GPUs (issue 20): for each
case, JAX's own one-GPU routine on GPU 0, jaxmg with its default choice, and
jaxmg with each engine forced through JAXMG_ENGINE, one run of this script,
every result checked (bench/measure.py).

    python bench/engines.py OUTDIR [--preset issue20|smoke] [--gpus K]
                            [--ops potrs,syevd,potri,lu_solve]
                            [--engines jax,default,cusolvermg,...]
                            [--sizes N,N,...] [--sizes OP=N,N,...]
                            [--repeats 5] [--max-case-s 10] [--budget-s 400]
                            [--tile T_A] [--platform gpu|cpu]

Engines (ENGINES): ``jax`` (jax.scipy.linalg.cho_factor + cho_solve,
jnp.linalg.eigh, jnp.linalg.inv, jnp.linalg.solve on the first device, as
bench/one_gpu.py), ``default`` (JAXMG_ENGINE unset: the engine the library
chooses, read from the warm-up call's JAXMG_TRACE line into the ``engine_ran``
column), ``cusolvermg`` (jaxmg's tiled Cholesky and LU with cuSOLVERMg),
``cusolvermg-potrf`` (the same with JAXMG_POTRF=cusolvermg, cuSOLVERMg's own
potrf: potrs and potri only), ``cusolvermp`` (a 1 x P grid; skipped, with the
reason, where ``jaxmg.cusolvermp_available()`` says no), ``cusolverdn-gather``
(A gathered onto the first GPU) and, on CPU devices, ``lapack``. Every jaxmg
engine runs on a 1-D mesh of the first K devices (--gpus, default all), with
T_A left to jaxmg unless --tile is given (the T_A that ran is read from the
trace). JAXMG_ENGINE and JAXMG_POTRF are set per measurement and restored.

Cases (CASES, --preset issue20): potrs float64 N = 8192 to 131072, syevd
float64 4096 to 65536, potri complex128 8192 to 32768, lu_solve float64 8192
to 65536 (a general random matrix: inputs.general). Every engine of a case
solves the same matrix. Cases run from the cheapest to the dearest (REF_S:
one-GPU seconds at N = 32768 scaled by N^3), so sizes increase within each
op and the small sizes of every op come before the large ones of any.

Skips (bench/one_gpu.py's rules): "skipped: budget" when a measurement's
predicted time (the same op and engine's last size scaled by N^3, times the
runs) exceeds what is left of --budget-s; "skipped: memory" when its
matrices would not fit the fullest device (a few copies of A on GPU 0 for
``jax``, of a shard for jaxmg's engines); "skipped: error at N=..." for the
larger sizes of an op and engine that failed with an error (out of memory,
an engine refusing the call); "n/a: ..." where an engine does not do the op.
SIGTERM (from `timeout`) stops the run and writes what was measured.

Writes OUTDIR/results.csv (one row per op, dtype, N and engine, rewritten
after every measurement), OUTDIR/table.txt (seconds and speed against JAX,
side by side), OUTDIR/engines.png (one panel per op, where matplotlib
imports), OUTDIR/trace.txt (the warm-up's JAXMG_TRACE line of every jaxmg
measurement) and OUTDIR/meta.txt (devices, versions, commit, command;
appended to when scripts/device-bench.sh wrote it first).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import pathlib
import platform as _platform
import signal
import sys
import time
import zlib
from dataclasses import dataclass
from typing import Any, Callable

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import one_gpu  # noqa: E402  (sets jax_enable_x64 and XLA_PYTHON_CLIENT_PREALLOCATE)

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh  # noqa: E402

import cases  # noqa: E402
import inputs  # noqa: E402
import measure  # noqa: E402
from shared import Interrupted, commit, on_sigterm  # noqa: E402

# The dtype of each op (issue 20).
CASES = {"potrs": "float64", "syevd": "float64", "potri": "complex128",
         "lu_solve": "float64"}


def _pow2(lo: int, hi: int) -> tuple[int, ...]:
    """lo, 2 lo, 4 lo, ... up to hi."""
    out, n = [], lo
    while n <= hi:
        out.append(n)
        n *= 2
    return tuple(out)


PRESETS: dict[str, dict[str, tuple[int, ...]]] = {
    "issue20": {"potrs": _pow2(8192, 131072), "syevd": _pow2(4096, 65536),
                "potri": _pow2(8192, 32768), "lu_solve": _pow2(8192, 65536)},
    # Tiny, for CPU devices (tests/python/test_bench_engines.py).
    "smoke": {"potrs": (64, 128), "syevd": (64,), "potri": (64,), "lu_solve": (64,)},
}
# The order of the work only: about one-GPU JAX's seconds at N = 32768 on an
# H200 (bench/results/2026-11-24-h200x1-one-gpu, README's table; lu_solve a
# guess: twice potrs's flops plus the row swaps).
REF_S = {"potrs": 0.28, "syevd": 22.5, "potri": 8.2, "lu_solve": 0.7}


@dataclass(frozen=True)
class Engine:
    """One column of the comparison: how it is run, and which ops it does."""

    name: str
    env: dict[str, str | None] | None  # JAXMG_* settings; None: JAX's own routine
    ops: tuple[str, ...] = tuple(CASES)
    note: str = ""


ENGINES: dict[str, Engine] = {e.name: e for e in (
    Engine("jax", None, note="JAX's one-device routine on the first device"),
    Engine("default", {"JAXMG_ENGINE": None, "JAXMG_POTRF": None},
           note="JAXMG_ENGINE unset: the library's choice"),
    Engine("cusolvermg", {"JAXMG_ENGINE": "cusolvermg", "JAXMG_POTRF": None}),
    Engine("cusolvermg-potrf", {"JAXMG_ENGINE": "cusolvermg", "JAXMG_POTRF": "cusolvermg"},
           ops=("potrs", "potri"), note="cuSOLVERMg's own potrf"),
    Engine("cusolvermp", {"JAXMG_ENGINE": "cusolvermp", "JAXMG_POTRF": None}),
    Engine("cusolverdn-gather", {"JAXMG_ENGINE": "cusolverdn-gather", "JAXMG_POTRF": None}),
    Engine("lapack", {"JAXMG_ENGINE": "lapack", "JAXMG_POTRF": None}),
)}
DEFAULT_ENGINES = {
    "gpu": ("jax", "default", "cusolvermg", "cusolvermg-potrf", "cusolvermp",
            "cusolverdn-gather"),
    "cpu": ("jax", "default", "lapack"),
}
FIELDS = ("op", "dtype", "n", "engine", "gpus", "status", "median_s", "min_s", "max_s",
          "runs", "residual", "tolerance", "compile_s", "engine_ran", "tile",
          "speed_vs_jax")


_START = time.perf_counter()


def _log(msg: str) -> None:
    """Prints msg with the seconds since this module was imported."""
    print(f"[{time.perf_counter() - _START:6.1f}s] {msg}", flush=True)


def parse_sizes(specs: list[str] | None, preset: str,
                ops: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """The sizes of each op: the preset's, replaced by ``N,N,...`` (every op)
    or ``OP=N,N,...`` (that op) from --sizes, in the order given."""
    sizes = {op: PRESETS[preset][op] for op in ops}
    for spec in specs or []:
        target, _, values = spec.rpartition("=")
        ns = tuple(sorted(int(v) for v in values.split(",") if v))
        if not target:
            sizes = {op: ns for op in ops}
        elif target in CASES:
            if target in ops:
                sizes[target] = ns
        else:
            raise ValueError(f"--sizes {spec}: unknown op {target!r} (known: {list(CASES)})")
    return sizes


def plan(sizes: dict[str, tuple[int, ...]]) -> list[tuple[str, str, int]]:
    """(op, dtype, N) from the cheapest to the dearest (REF_S scaled by N^3);
    within an op, N increasing."""
    todo = [(op, CASES[op], n) for op, ns in sizes.items() for n in ns]
    return sorted(todo, key=lambda c: (REF_S[c[0]] * (c[2] / 32768) ** 3, c[2], c[0]))


def need_bytes(op: str, dtype: str, n: int, engine: str, gpus: int) -> float:
    """Bytes on the fullest device (an estimate: one_gpu.COPIES copies of A
    on the first device for ``jax``, of a shard of A for jaxmg's engines; the
    gather engine falls back on cuSOLVERMg when its copy does not fit)."""
    whole = one_gpu.COPIES[op] * float(n) * n * np.dtype(dtype).itemsize
    return whole if engine == "jax" else whole / gpus


def _error_status(e: BaseException) -> str:
    """A row's status for an exception: its type and first line."""
    text = str(e).strip()
    first = text.splitlines()[0][:200] if text else ""
    return f"error: {type(e).__name__}: {first}"


def run(out: pathlib.Path, devices: list, sizes: dict[str, tuple[int, ...]],
        engines: tuple[str, ...], repeats: int, max_case_s: float, budget_s: float,
        tile: int | None, rows: list[dict], log: Callable[[str], None] = _log) -> None:
    """Measures every (op, dtype, N) of sizes with every engine (the module
    docstring's order and skips), appending one row per measurement to rows
    and rewriting OUTDIR/results.csv after each. Interrupted (SIGTERM) leaves
    the rows measured so far."""
    start = time.perf_counter()
    k = len(devices)
    mesh = Mesh(np.array(devices), (inputs.AXIS,))
    one = Mesh(np.array(devices[:1]), (inputs.AXIS,))
    limit = one_gpu.device_bytes(devices[0])
    mp_ok, mp_why = (True, "")
    if "cusolvermp" in engines:
        import jaxmg

        mp_ok, mp_why = jaxmg.cusolvermp_available()
    times: dict = {}
    failed: dict[tuple[str, str], int] = {}
    trace_path = out / "trace.txt"
    trace_path.write_text("")
    for op, dtype, n in plan(sizes):
        seed = zlib.crc32(f"{op} {dtype} {n}".encode()) % 2 ** 31  # one A per case
        jax_s = None
        for name in engines:
            e = ENGINES[name]
            row: dict[str, Any] = dict(op=op, dtype=dtype, n=n, engine=name,
                                       gpus=1 if e.env is None else k,
                                       tolerance=cases.tolerance(dtype, n))
            rows.append(row)
            left = budget_s - (time.perf_counter() - start)
            guess = one_gpu.predict(times, (op, dtype, name), n, repeats, max_case_s)
            if op not in e.ops:
                row["status"] = f"n/a: {name} runs {', '.join(e.ops)} only"
            elif name == "cusolvermp" and not mp_ok:
                row["status"] = f"skipped: cuSOLVERMp not available: {mp_why}"
            elif (op, name) in failed:
                row["status"] = f"skipped: error at N={failed[(op, name)]}"
            elif n % k and e.env is not None:
                row["status"] = f"n/a: N not a multiple of {k} devices"
            elif name == "cusolverdn-gather" and k == 1:
                row["status"] = "n/a: one device, nothing to gather"
            else:
                row["status"] = one_gpu.skip_reason(
                    need_bytes(op, dtype, n, name, k), limit, left, guess) or "running"
            if row["status"] == "running":
                _measure(row, op, dtype, n, e, one if e.env is None else mesh, tile, seed,
                         repeats, max_case_s, trace_path, log)
                if row["status"].startswith("error"):
                    failed[(op, name)] = n
                if row.get("median_s") is not None:
                    times[((op, dtype, name), n)] = row["median_s"]
            if name == "jax" and row["status"] == "ok":
                jax_s = row["median_s"]
            if jax_s is not None and row["status"] == "ok" and row.get("median_s"):
                row["speed_vs_jax"] = jax_s / row["median_s"]
            log(_line(row))
            one_gpu.write_csv(out / "results.csv", rows, FIELDS)
    log(f"engines: measured in {time.perf_counter() - start:.0f} s")


def _measure(row: dict, op: str, dtype: str, n: int, e: Engine, mesh: Mesh,
             tile: int | None, seed: int, repeats: int, max_case_s: float,
             trace_path: pathlib.Path, log: Callable[[str], None]) -> None:
    """One measurement into row (status, times, residual, engine that ran)."""
    try:
        if e.env is None:
            m = measure.measure(op, dtype, n, mesh, measure.jax_fn(op), seed, repeats,
                                max_case_s, log)
        else:
            with measure.environ(e.env):
                fn = measure.jaxmg_fn(op, tile, mesh)
                m = measure.measure(op, dtype, n, mesh, fn, seed, repeats, max_case_s,
                                    log, trace=True)
    except Interrupted:
        row["status"] = "skipped: interrupted"
        raise
    except Exception as ex:  # noqa: BLE001  (a row, not a crash)
        m = measure.Measured(status=_error_status(ex))
    finally:
        gc.collect()
    row.update(status=m.status, median_s=m.median_s, min_s=m.min_s, max_s=m.max_s,
               runs=m.runs, residual=m.residual, compile_s=m.compile_s,
               engine_ran=m.engine, tile=m.tile)
    if m.trace:
        with trace_path.open("a") as f:
            f.write(f"# {op} {dtype} N={n} engine {e.name}\n")
            f.writelines(line + "\n" for line in m.trace)


def _line(r: dict) -> str:
    """One row as a progress line."""
    t, speed, ran = r.get("median_s"), r.get("speed_vs_jax"), r.get("engine_ran")
    return (f"{r['op']:8s} {r['dtype']:10s} N={r['n']:6d} {r['engine']:17s} "
            f"{r['status'][:60]:60s} {'' if t is None else format(t, '.4f') + ' s':>10s}"
            f"{'' if speed is None else ' x' + format(speed, '.2f')}"
            f"{'' if not ran else ' [' + ran + ']'}")


def _cell(r: dict | None, width: int) -> str:
    """One engine's table cell: seconds and speed, or why there is none."""
    if r is None:
        return " " * width
    status = r["status"]
    if status == "ok":
        text = f"{r['median_s']:.4f} s"
        if r["engine"] != "jax" and r.get("speed_vs_jax") is not None:
            text += f" x{r['speed_vs_jax']:.2f}"
    elif status.startswith("skipped: "):
        text = "skip: " + status[len("skipped: "):].split(" ")[0].split(":")[0]
    elif status.startswith("n/a"):
        text = "n/a"
    else:
        text = status.split(":")[0]
    return f"{text[:width]:>{width}s}"


def table(rows: list[dict], engines: tuple[str, ...]) -> str:
    """Seconds per engine side by side, one line per (op, dtype, N), with
    each engine's speed against one-GPU JAX (xS: JAX's time over the
    engine's, above 1 faster), the engine the default ran, and below, each
    status that is neither ok nor a skip for budget, once, with its cases."""
    w = 18
    head = (f"{'op':8s} {'dtype':10s} {'N':>6s}  " + "  ".join(f"{e:>{w}s}" for e in engines)
            + "  default ran")
    lines = [head, "-" * len(head)]
    by = {(r["op"], r["dtype"], r["n"], r["engine"]): r for r in rows}
    for op in CASES:
        for n in sorted({r["n"] for r in rows if r["op"] == op}):
            dtype = CASES[op]
            cells = [_cell(by.get((op, dtype, n, e)), w) for e in engines]
            ran = (by.get((op, dtype, n, "default")) or {}).get("engine_ran") or ""
            lines.append(f"{op:8s} {dtype:10s} {n:6d}  " + "  ".join(cells) + f"  {ran}")
    grouped: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        if r["status"] not in ("ok", "skipped: budget"):
            grouped.setdefault((r["engine"], r["status"]), []).append(f"{r['op']} {r['n']}")
    notes = [f"{engine}: {status} ({', '.join(where)})"
             for (engine, status), where in grouped.items()]
    text = "\n".join(lines) + "\n"
    text += ("\nseconds: median of the timed runs after a warm-up; xS: one-GPU JAX's "
             "median over the engine's (above 1: faster than JAX on one device)\n")
    if notes:
        text += "\n" + "\n".join(notes) + "\n"
    return text


def plot(rows: list[dict], path: pathlib.Path, engines: tuple[str, ...], gpus: int) -> bool:
    """One log-log panel per op: median seconds against N, one line per
    engine (ok results only). False when matplotlib does not import."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ops = [op for op in CASES if any(r["op"] == op for r in rows)]
    if not ops:
        return False
    fig, axes = plt.subplots(1, len(ops), figsize=(4.8 * len(ops), 4.2), squeeze=False)
    for ax, op in zip(axes[0], ops):
        for name in engines:
            pts = sorted((r["n"], r["median_s"]) for r in rows
                         if r["op"] == op and r["engine"] == name and r["status"] == "ok")
            if pts:
                ax.loglog(*zip(*pts), marker="o", label=name)
        ax.set_title(f"{op} {CASES[op]}, {gpus} devices")
        ax.set_xlabel("N")
        ax.set_ylabel("seconds (median)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def meta(devices: list, argv: list[str], settings: dict[str, Any]) -> str:
    """What meta.txt records: date, devices, versions, commit, command."""
    import jaxlib

    import jaxmg

    mp = jaxmg.cusolvermp_available() if devices[0].platform != "cpu" else (False, "CPU")
    lines = [
        "== bench/engines.py",
        f"date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        f"host: {_platform.node()}",
        f"devices: {len(devices)} x {devices[0].device_kind} ({devices[0].platform})",
        f"python: {sys.version.split()[0]}",
        f"jax: {jax.__version__}, jaxlib {jaxlib.__version__}",
        f"jaxmg: {getattr(jaxmg, '__version__', '?')} ({pathlib.Path(jaxmg.__file__).parent})",
        f"cusolvermp_available: {mp[0]}{'' if mp[0] else f' ({mp[1]})'}",
        f"commit: {commit()}",
        f"command: bench/engines.py {' '.join(argv)}",
        f"settings: {settings}",
        "env: " + " ".join(f"{k}={v}" for k, v in sorted(os.environ.items())
                           if k.startswith(("JAXMG_", "XLA_", "NCCL_"))),
    ]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("outdir", type=pathlib.Path)
    p.add_argument("--preset", choices=sorted(PRESETS), default="issue20",
                   help="the sizes of each op (default issue20)")
    p.add_argument("--ops", default=",".join(CASES), help="comma list (default: all)")
    p.add_argument("--engines", default=None,
                   help=f"comma list of {list(ENGINES)} (default: gpu "
                   f"{','.join(DEFAULT_ENGINES['gpu'])}; cpu {','.join(DEFAULT_ENGINES['cpu'])})")
    p.add_argument("--sizes", action="append",
                   help="N,N,... for every op, or OP=N,N,... for one (repeatable; "
                   "replaces the preset's)")
    p.add_argument("--gpus", type=int, default=0,
                   help="a mesh of the first K devices (default: all)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--max-case-s", type=float, default=10.0,
                   help="fewer timed runs (at least 2) beyond this per measurement")
    p.add_argument("--budget-s", type=float, default=400.0,
                   help="seconds for all measurements (default 400)")
    p.add_argument("--tile", type=int, default=None, help="T_A (default: jaxmg's choice)")
    p.add_argument("--platform", choices=["gpu", "cpu"], default="gpu")
    args = p.parse_args(argv)
    args.ops = tuple(o for o in args.ops.split(",") if o)
    bad = [o for o in args.ops if o not in CASES]
    if bad:
        p.error(f"--ops: unknown {bad} (known: {list(CASES)})")
    args.engines = tuple(e for e in (args.engines or ",".join(
        DEFAULT_ENGINES[args.platform])).split(",") if e)
    bad = [e for e in args.engines if e not in ENGINES]
    if bad:
        p.error(f"--engines: unknown {bad} (known: {list(ENGINES)})")
    try:
        args.size_map = parse_sizes(args.sizes, args.preset, args.ops)
    except ValueError as e:
        p.error(str(e))
    return args


def main(argv: list[str] | None = None) -> int:
    """Runs the comparison and writes OUTDIR's files; 1 when a result failed
    its check, else 0 (errors and skips are rows, not failures)."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    out: pathlib.Path = args.outdir
    out.mkdir(parents=True, exist_ok=True)
    devices = jax.devices(args.platform)
    if args.gpus:
        if args.gpus > len(devices):
            raise SystemExit(f"engines.py: --gpus {args.gpus}: only {len(devices)} devices")
        devices = devices[:args.gpus]
    settings = dict(ops=args.ops, engines=args.engines, sizes=args.size_map,
                    repeats=args.repeats, max_case_s=args.max_case_s,
                    budget_s=args.budget_s, tile=args.tile)
    text = meta(devices, argv, settings)
    with (out / "meta.txt").open("a") as f:
        f.write(text)
    print(text, end="", flush=True)
    rows: list[dict] = []
    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        run(out, devices, args.size_map, args.engines, args.repeats, args.max_case_s,
            args.budget_s, args.tile, rows)
    except (Interrupted, KeyboardInterrupt):
        _log("interrupted: writing what was measured")
        for r in rows:
            if r["status"] == "running":
                r["status"] = "skipped: interrupted"
    finally:
        signal.signal(signal.SIGTERM, previous)
    one_gpu.write_csv(out / "results.csv", rows, FIELDS)
    text = table(rows, args.engines)
    (out / "table.txt").write_text(text)
    print("\n" + text, flush=True)
    try:
        if plot(rows, out / "engines.png", args.engines, len(devices)):
            print(f"plot: {out / 'engines.png'}")
    except Exception as e:  # noqa: BLE001  (never lose the table to a plot)
        print(f"plot not written: {type(e).__name__}: {e}")
    return 1 if any(r["status"] == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
