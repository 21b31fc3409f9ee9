"""The benchmark's results: rows merged from the three measurements, the CSV,
the printed table and the issue's targets.

A row is one case (op, dtype, N, T_A, GPUs) with jaxmg's measurement, the
ceiling's for the same case, and the single-GPU JAX routine's for its
(op, dtype, N). Ratios and rates are given only between measurements whose
results passed their checks.
"""

from __future__ import annotations

import csv
import pathlib
from dataclasses import dataclass

import cases
from shared import csv_cell
from measure import Measured

Key = tuple[str, str, int, int, int]  # op, dtype, N, T_A, gpus


@dataclass
class Row:
    op: str
    dtype: str
    n: int
    tile: int
    gpus: int
    jaxmg: Measured | None
    ceiling: Measured | None
    jax: Measured | None  # on one device, shared by the rows of (op, dtype, N)
    peak_tflops: float  # per device; 0 when not meaningful

    @property
    def flop(self) -> float | None:
        return cases.flops(self.op.replace("_mg", ""), self.dtype, self.n)

    def ratio_to_ceiling(self) -> float | None:
        if _ok(self.jaxmg) and _ok(self.ceiling):
            return self.jaxmg.median_s / self.ceiling.median_s
        return None

    def speedup_vs_jax(self) -> float | None:
        if _ok(self.jaxmg) and _ok(self.jax):
            return self.jax.median_s / self.jaxmg.median_s
        return None

    def rate(self, m: Measured | None, devices: int) -> tuple[float | None, float | None]:
        """(GFLOP/s, fraction of the devices' peak) of a passed measurement."""
        if not _ok(m) or self.flop is None:
            return None, None
        gflops = self.flop / m.median_s / 1e9
        peak = self.peak_tflops * 1e3 * devices
        return gflops, (gflops / peak if peak > 0 else None)


def _ok(m: Measured | None) -> bool:
    return m is not None and m.ok and m.median_s is not None and m.median_s > 0


def build_rows(case_list: list[cases.Case], jaxmg: dict[Key, Measured],
               ceiling: dict[Key, Measured], jax: dict[tuple[str, str, int], Measured],
               peak_tflops: float) -> list[Row]:
    """One row per case, plus a potri_mg row (cusolverMgPotri, ceiling only)
    after each potri case the ceiling measured it for."""
    rows = []
    for c in case_list:
        key = (c.op, c.dtype, c.n, c.tile, c.gpus)
        rows.append(Row(c.op, c.dtype, c.n, c.tile, c.gpus, jaxmg.get(key),
                        ceiling.get(key), jax.get(c.group), peak_tflops))
        mg_key = ("potri_mg",) + key[1:]
        if c.op == "potri" and mg_key in ceiling:
            rows.append(Row("potri_mg", c.dtype, c.n, c.tile, c.gpus, None,
                            ceiling[mg_key], jax.get(c.group), peak_tflops))
    return rows


COLUMNS = [
    "op", "dtype", "N", "T_A", "gpus",
    "jaxmg_median_s", "jaxmg_min_s", "jaxmg_max_s", "jaxmg_runs", "jaxmg_residual",
    "jaxmg_status", "jaxmg_compile_s",
    "ceiling_median_s", "ceiling_min_s", "ceiling_max_s", "ceiling_runs",
    "ceiling_residual", "ceiling_status",
    "jax1_median_s", "jax1_min_s", "jax1_max_s", "jax1_runs", "jax1_residual",
    "jax1_status",
    "jaxmg_over_ceiling", "speedup_vs_jax1", "gflop",
    "jaxmg_gflops", "jaxmg_peak_frac", "ceiling_gflops", "ceiling_peak_frac",
    "jax1_gflops", "jax1_peak_frac", "tolerance",
]


def _measured(prefix: str, m: Measured | None) -> dict[str, object]:
    if m is None:
        return {f"{prefix}_status": ""}
    d = {f"{prefix}_median_s": m.median_s, f"{prefix}_min_s": m.min_s,
         f"{prefix}_max_s": m.max_s, f"{prefix}_runs": m.runs or None,
         f"{prefix}_residual": m.residual, f"{prefix}_status": m.status}
    if prefix == "jaxmg":
        d["jaxmg_compile_s"] = m.compile_s
    return d


def write_csv(rows: list[Row], path: pathlib.Path) -> None:
    """results.csv: every measured number, FAIL and skipped cases included."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            d: dict[str, object] = {"op": r.op, "dtype": r.dtype, "N": r.n, "T_A": r.tile,
                                    "gpus": r.gpus}
            d.update(_measured("jaxmg", r.jaxmg))
            d.update(_measured("ceiling", r.ceiling))
            d.update(_measured("jax1", r.jax))
            d["jaxmg_over_ceiling"] = r.ratio_to_ceiling()
            d["speedup_vs_jax1"] = r.speedup_vs_jax()
            d["gflop"] = r.flop / 1e9 if r.flop is not None else None
            d["jaxmg_gflops"], d["jaxmg_peak_frac"] = r.rate(r.jaxmg, r.gpus)
            d["ceiling_gflops"], d["ceiling_peak_frac"] = r.rate(r.ceiling, r.gpus)
            d["jax1_gflops"], d["jax1_peak_frac"] = r.rate(r.jax, 1)
            d["tolerance"] = cases.tolerance(r.dtype, r.n)
            w.writerow({k: csv_cell(v) for k, v in d.items()})


def _time(m: Measured | None) -> str:
    """A time for the table: only for results that passed their checks."""
    if m is None:
        return "-"
    if m.ok and m.median_s is not None:
        return f"{m.median_s:.4f}" if m.median_s < 10 else f"{m.median_s:.2f}"
    return m.status.split(":")[0].split(" ")[0][:7]  # FAIL, error, skipped, n/a


def _status(r: Row) -> str:
    bad = [f"{name} {m.status}" for name, m in
           (("jaxmg", r.jaxmg), ("ceil", r.ceiling), ("jax", r.jax))
           if m is not None and not m.ok]
    return "; ".join(bad)[:40] if bad else "ok"


def table(rows: list[Row]) -> str:
    """The compact table printed last (the device tool keeps only the tail)."""
    head = (f"{'op':8} {'dtype':5} {'N':>6} {'T_A':>4} {'G':>1} | {'jaxmg_s':>8} "
            f"{'ceil_s':>8} {'/ceil':>5} | {'jax1_s':>8} {'speedup':>7} | "
            f"{'TF/s':>5} {'%pk':>4} | {'resid':>7} status")
    lines = [head, "-" * len(head)]
    for r in rows:
        ratio, speed = r.ratio_to_ceiling(), r.speedup_vs_jax()
        gf, frac = r.rate(r.jaxmg, r.gpus)
        res = r.jaxmg.residual if r.jaxmg is not None else (
            r.ceiling.residual if r.ceiling is not None else None)
        lines.append(
            f"{r.op:8} {cases.SHORT.get(r.dtype, r.dtype):5} {r.n:>6} {r.tile:>4} {r.gpus:>1} | "
            f"{_time(r.jaxmg):>8} {_time(r.ceiling):>8} "
            f"{(f'{ratio:.3f}' if ratio else '-'):>5} | {_time(r.jax):>8} "
            f"{(f'{speed:.2f}x' if speed else '-'):>7} | "
            f"{(f'{gf / 1e3:.1f}' if gf else '-'):>5} {(f'{frac:.0%}' if frac else '-'):>4} | "
            f"{(f'{res:.0e}' if res is not None else '-'):>7} {_status(r)}")
    return "\n".join(lines)


def targets(rows: list[Row]) -> str:
    """Issue 4's targets (4 H200s with NVLink), measured or not."""
    def pick(op: str, dtype: str, n_min: int, gpus: int = 4) -> list[Row]:
        return [r for r in rows if (r.op, r.dtype, r.gpus) == (op, dtype, gpus) and r.n >= n_min]

    out = ["targets (issue 4, on 4 GPUs):"]
    # jaxmg at its best T_A against the ceiling at its best T_A, per N.
    best: dict[int, dict[str, tuple[float, int]]] = {}
    for r in pick("potrs", "float64", 32768):
        for who, m in (("jaxmg", r.jaxmg), ("ceiling", r.ceiling)):
            if _ok(m):
                t = best.setdefault(r.n, {}).get(who)
                if t is None or m.median_s < t[0]:
                    best[r.n][who] = (m.median_s, r.tile)
    ratios = {n: (d["jaxmg"][0] / d["ceiling"][0], d["jaxmg"][1], d["ceiling"][1])
              for n, d in sorted(best.items()) if len(d) == 2}
    if ratios:
        txt = ", ".join(f"N={n}: {q:.3f} (T_A {tj} vs {tc})" for n, (q, tj, tc) in ratios.items())
        ok = all(q <= 1.05 for q, _, _ in ratios.values())
        out.append(f"  potrs f64 N>=32768, jaxmg/ceiling <= 1.05 (each at its best T_A): {txt} "
                   f"{'MET' if ok else 'NOT MET'}")
    else:
        out.append("  potrs f64 N>=32768 jaxmg/ceiling: not measured")
    speed = [r.speedup_vs_jax() for r in pick("potrs", "float64", 65536) if r.n == 65536]
    speed = [s for s in speed if s is not None]
    out.append("  potrs f64 N=65536 speedup vs one-GPU JAX >= 2.3: " +
               (f"{max(speed):.2f}x {'MET' if max(speed) >= 2.3 else 'NOT MET'}" if speed
                else "not measured"))
    speed = [r.speedup_vs_jax() for r in pick("potri", "complex128", 32768) if r.n == 32768]
    speed = [s for s in speed if s is not None]
    out.append("  potri c128 N=32768 speedup vs jnp.linalg.inv >= 1.7: " +
               (f"{max(speed):.2f}x {'MET' if max(speed) >= 1.7 else 'NOT MET'}" if speed
                else "not measured"))
    out.append("  largest f32 potrs N >= 360000: measured by run.py --largest")
    return "\n".join(out)
