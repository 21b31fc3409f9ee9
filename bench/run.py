"""The benchmark: jaxmg against the single-GPU JAX routine a user would
otherwise call and against the engine's ceiling (cuSOLVERMg driven directly),
in one run, with a table, a CSV and plots.

    python bench/run.py --preset h200x4 --ceiling BUILD/ceiling --out DIR
    python bench/run.py --preset smoke --platform cpu --out DIR   # 4 CPU devices
    python bench/run.py --ops potrs --dtypes float64 --n 16384,32768 --tiles 1024 --gpus 4
    python bench/run.py --largest ...                              # bench/largest.py

On GPU machines scripts/device-bench.sh builds jaxmg and the ceiling and runs
this. Order: the ceiling first (a separate process per GPU count, before JAX
takes GPU memory it would keep), then for each (op, dtype, N): the JAX
routine on the first device, and jaxmg on the first k devices for each k and
T_A. measure.py says how each case is timed and checked; cases.py what the
presets hold. Results go to OUT: results.csv (rewritten after every case, so
that a run cut short keeps what it measured), table.txt, PNG plots, and
raw/ (logs). The table is printed last.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pathlib
import signal
import sys
import time
import zlib
from typing import Any, Callable

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cases  # noqa: E402
from shared import Interrupted, on_sigterm  # noqa: E402

# The ceiling's share of --budget-s; the JAX phase gets the rest and whatever
# the ceiling leaves.
CEILING_SHARE = 0.42


def _csv_list(kind: Callable[[str], Any]) -> Callable[[str], list[Any]]:
    return lambda s: [kind(x) for x in s.split(",") if x]


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", choices=sorted(cases.PRESET_SETTINGS),
                   help="a set of cases and settings (explicit flags override)")
    p.add_argument("--ops", type=_csv_list(str), help=f"comma list of {cases.OPS}")
    p.add_argument("--dtypes", type=_csv_list(str),
                   help="comma list (default per op: the seed paper's Figure 3)")
    p.add_argument("--n", type=_csv_list(int), help="comma list of N (replaces the preset's cases)")
    p.add_argument("--tiles", type=_csv_list(int), help="comma list of T_A (default 1024)")
    p.add_argument("--gpus", type=_csv_list(int),
                   help="comma list of device counts (default: all devices)")
    p.add_argument("--repeats", type=int, help="timed runs per case (default 5)")
    p.add_argument("--max-case-s", type=float,
                   help="fewer timed runs (at least 2) when a case would take longer (default 10)")
    p.add_argument("--budget-s", type=float,
                   help="skip the remaining cases once this many seconds are spent (0: none)")
    p.add_argument("--no-jax", action="store_true", help="skip the single-device JAX routines")
    p.add_argument("--no-ceiling", action="store_true", help="skip the engine's ceiling")
    p.add_argument("--ceiling", type=pathlib.Path,
                   default=os.environ.get("JAXMG_CEILING"),
                   help="the ceiling binary (scripts/device-bench.sh builds it)")
    p.add_argument("--platform", default="gpu", choices=["gpu", "cpu"])
    p.add_argument("--peak-tflops", type=float, default=None,
                   help="per-device peak for the %%peak column (default: 67, H200 FP64 "
                        "tensor core, on GPUs; none on CPUs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=pathlib.Path, default=HERE / "results" / "latest")
    return p.parse_args(argv)


def plan(args: argparse.Namespace) -> tuple[list[cases.Case], dict[str, float]]:
    """The cases (in priority order) and settings the arguments ask for."""
    bad = [op for op in (args.ops or []) if op not in cases.OPS]
    bad += [dt for dt in (args.dtypes or []) if dt not in cases.DTYPES]
    if bad:
        raise SystemExit(f"run.py: unknown op or dtype: {', '.join(bad)}")
    settings = dict(repeats=5, max_case_s=10.0, budget_s=0.0)
    if args.preset:
        settings.update(cases.PRESET_SETTINGS[args.preset])
    for name in settings:
        if getattr(args, name) is not None:
            settings[name] = getattr(args, name)
    if args.n:
        ops = args.ops or list(cases.OPS)
        dtypes = {op: tuple(args.dtypes) if args.dtypes else cases.DEFAULT_DTYPES[op]
                  for op in ops}
        gpus = args.gpus or [0]  # 0: every device, resolved once they are known
        case_list = cases.dedupe(cases.expand(ops, dtypes, args.n, args.tiles or [1024], gpus))
    elif args.preset:
        case_list = cases.preset(args.preset)
        if args.ops:
            case_list = [c for c in case_list if c.op in args.ops]
        if args.dtypes:
            case_list = [c for c in case_list if c.dtype in args.dtypes]
        if args.gpus:
            case_list = [c for c in case_list if c.gpus in args.gpus]
    else:
        raise SystemExit("run.py: give --preset or --n (see --help)")
    return case_list, settings


def resolve_all_devices(case_list: list[cases.Case], ndev: int) -> list[cases.Case]:
    """Cases asked on "all devices" (gpus=0) get the device count."""
    out = []
    for c in case_list:
        g = c.gpus or ndev
        out.append(cases.Case(c.op, c.dtype, c.n, cases.effective_tile(c.n, g, c.tile), g))
    return cases.dedupe(out)


class Log:
    """Prints progress and keeps it in raw/bench.log."""

    def __init__(self, path: pathlib.Path) -> None:
        self.f = open(path, "a")
        self.start = time.perf_counter()

    def __call__(self, msg: str) -> None:
        line = f"[{time.perf_counter() - self.start:6.1f}s] {msg}"
        print(line, flush=True)
        self.f.write(line + "\n")
        self.f.flush()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def main(argv: list[str]) -> int:
    if "--largest" in argv:
        import largest

        return largest.main([a for a in argv if a != "--largest"])
    args = parse_args(argv)
    case_list, settings = plan(args)
    out, raw = args.out, args.out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    log = Log(raw / "bench.log")
    signal.signal(signal.SIGTERM, on_sigterm)
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    if args.platform == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        ndev = max([c.gpus for c in case_list] + [4])
        flags = os.environ.get("XLA_FLAGS", "")
        if "xla_force_host_platform_device_count" not in flags:
            flag = f"--xla_force_host_platform_device_count={ndev}"
            os.environ["XLA_FLAGS"] = f"{flags} {flag}".strip()
    budget = settings["budget_s"]
    log(f"run.py {' '.join(argv)}: {len(case_list)} case(s), repeats {settings['repeats']:g}, "
        f"max {settings['max_case_s']:g} s per case, budget {budget:g} s")

    from measure import Measured

    ceiling: dict = {}
    jaxmg_res: dict = {}
    jax_res: dict = {}
    interrupted = False
    peak = args.peak_tflops if args.peak_tflops is not None else (
        67.0 if args.platform == "gpu" else 0.0)
    try:
        ceiling = run_ceiling(args, case_list, settings, raw, log)
        import jax

        jax.config.update("jax_enable_x64", True)
        devices = jax.devices(args.platform)
        case_list = resolve_all_devices(case_list, len(devices))
        log(f"jax {jax.__version__}, {len(devices)} {devices[0].platform} device(s): "
            f"{devices[0].device_kind}")

        def save() -> None:
            import report

            report.write_csv(report.build_rows(case_list, jaxmg_res, ceiling, jax_res, peak),
                             out / "results.csv")

        run_jax_side(args, case_list, settings, devices, jaxmg_res, jax_res, log, save)
    except (Interrupted, KeyboardInterrupt):
        interrupted = True
        log("interrupted: writing what was measured")
    import report

    for c in case_list:
        key = (c.op, c.dtype, c.n, c.tile, c.gpus)
        jaxmg_res.setdefault(key, Measured(status="skipped (interrupted)" if interrupted
                                           else "skipped"))
    rows = report.build_rows(case_list, jaxmg_res, ceiling, jax_res, peak)
    report.write_csv(rows, out / "results.csv")
    (out / "run.json").write_text(json.dumps(
        {"argv": argv, "settings": settings, "elapsed_s": round(log.elapsed(), 1),
         "interrupted": interrupted, "cases": len(case_list)}, indent=1) + "\n")
    try:
        import plot

        for path in plot.plot_all(out / "results.csv", out):
            log(f"plot: {path.name}")
    except Exception as e:  # plots are a convenience: never lose the table to them
        log(f"plots not written: {type(e).__name__}: {e}")
    text = report.table(rows) + "\n\n" + report.targets(rows)
    (out / "table.txt").write_text(text + "\n")
    log(f"done in {log.elapsed():.0f} s; results in {out}")
    print("\n" + text, flush=True)
    failed = any(r.jaxmg is not None and r.jaxmg.status == "FAIL" for r in rows)
    return 1 if failed else 0


def run_ceiling(args: argparse.Namespace, case_list: list[cases.Case],
                settings: dict[str, float], raw: pathlib.Path, log: Log) -> dict:
    """The ceiling phase (GPUs only, when the binary is there)."""
    if args.no_ceiling or args.platform != "gpu":
        return {}
    if args.ceiling is None or not pathlib.Path(args.ceiling).is_file():
        log(f"ceiling: binary not found ({args.ceiling}); no ceiling column")
        return {}
    import ceiling_runner

    ngpu = ceiling_runner.gpu_count(args.ceiling)
    if ngpu == 0:
        log("ceiling: it sees no GPU; no ceiling column")
        return {}
    todo = [c for c in resolve_all_devices(case_list, ngpu) if c.gpus <= ngpu]
    budget = settings["budget_s"] * CEILING_SHARE if settings["budget_s"] > 0 else 0.0
    return ceiling_runner.run(args.ceiling, todo, int(settings["repeats"]),
                              settings["max_case_s"], budget, raw / "ceiling.log", log)


def run_jax_side(args: argparse.Namespace, case_list: list[cases.Case],
                 settings: dict[str, float], devices: list, jaxmg_res: dict, jax_res: dict,
                 log: Log, save: Callable[[], None]) -> None:
    """jaxmg and the single-device JAX routine, group by group."""
    import numpy as np
    from jax.sharding import Mesh

    import measure
    from measure import Measured

    repeats, max_case_s, budget = (int(settings["repeats"]), settings["max_case_s"],
                                   settings["budget_s"])
    groups: dict[tuple[str, str, int], list[cases.Case]] = {}
    for c in case_list:
        groups.setdefault(c.group, []).append(c)

    def spent() -> bool:
        return budget > 0 and log.elapsed() > budget

    def run_one(label: str, op: str, dtype: str, n: int, mesh: Mesh, fn: Any) -> Measured:
        if spent():
            return Measured(status="skipped (budget)")
        seed = (args.seed * 1000003 + zlib.crc32(label.encode())) % 2 ** 31
        try:
            m = measure.measure(op, dtype, n, mesh, fn, seed, repeats, max_case_s, log)
        except (Interrupted, KeyboardInterrupt):
            raise
        except Exception as e:  # e.g. out of memory: reported, the run goes on
            msg = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
            m = Measured(status=f"error: {type(e).__name__}: {msg}")
        gc.collect()
        if m.median_s is not None:
            log(f"{label}: median {m.median_s:.4f} s of {m.runs} (min {m.min_s:.4f}, "
                f"max {m.max_s:.4f}), residual {m.residual:.2e}, compile {m.compile_s:.1f} s: "
                f"{m.status}")
        else:
            log(f"{label}: {m.status}")
        return m

    one = Mesh(np.array(devices[:1]), ("x",))
    for (op, dtype, n), members in groups.items():
        if not args.no_jax:
            jax_res[(op, dtype, n)] = run_one(f"JAX {cases.JAX_ROUTINE[op]} {dtype} N={n} on 1",
                                              op, dtype, n, one, measure.jax_fn(op))
            save()
        for c in sorted(members, key=lambda c: -c.gpus):
            key = (c.op, c.dtype, c.n, c.tile, c.gpus)
            if c.gpus > len(devices):
                jaxmg_res[key] = Measured(status=f"n/a ({len(devices)} devices)")
                continue
            mesh = Mesh(np.array(devices[:c.gpus]), ("x",))
            jaxmg_res[key] = run_one(f"jaxmg {c.label()}", op, dtype, n, mesh,
                                     measure.jaxmg_fn(op, c.tile, mesh))
            save()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
