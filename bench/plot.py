"""Plots of a benchmark run, from its results.csv (matplotlib, Agg backend).

    python bench/plot.py RESULTS_DIR      # writes the PNGs beside results.csv

* ``<op>_<dtype>.png``: time against N (log-log): jaxmg on each GPU count
  (best T_A), the ceiling on each GPU count (dashed), the single-GPU JAX
  routine (black); for potri also cusolverMgPotri (dotted, the ceiling's
  reference);
* ``potrs_float64_tiles.png``: jaxmg and the ceiling against T_A on the most
  GPUs, one colour per N;
* ``headline.png``: potrs float64 time against N, and the speedup over the
  single-GPU JAX routine of each op at its largest N on the most GPUs.

Only measurements that passed their checks are drawn.
"""

from __future__ import annotations

import csv
import pathlib
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

Rows = list[dict[str, str]]
COLORS = {1: "tab:blue", 2: "tab:orange", 4: "tab:green", 8: "tab:red"}


def _read(path: pathlib.Path) -> Rows:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _title_suffix(out: pathlib.Path) -> str:
    """"H200, 2026-11-22, abc1234" from meta.txt (written by device-bench.sh)."""
    meta = {}
    path = out / "meta.txt"
    if path.is_file():
        for line in path.read_text().splitlines():
            if ":" in line:
                k, v = line.split(":", 1)
                meta[k.strip()] = v.strip()
    parts = [meta.get("gpu_name", ""), meta.get("date", "")[:10], meta.get("commit", "")[:10]]
    return ", ".join(p for p in parts if p)


def _best(rows: Rows, prefix: str) -> dict[int, dict[int, float]]:
    """gpus -> N -> the best passed median time over T_A."""
    out: dict[int, dict[int, float]] = defaultdict(dict)
    for r in rows:
        if r.get(f"{prefix}_status") == "ok" and r.get(f"{prefix}_median_s"):
            g, n, t = int(r["gpus"]), int(r["N"]), float(r[f"{prefix}_median_s"])
            out[g][n] = min(t, out[g].get(n, t))
    return out


def _jax(rows: Rows) -> dict[int, float]:
    out = {}
    for r in rows:
        if r.get("jax1_status") == "ok" and r.get("jax1_median_s"):
            out[int(r["N"])] = float(r["jax1_median_s"])
    return out


def _time_axes(ax: plt.Axes, rows: Rows, op: str, dtype: str,
               ceiling_most_gpus_only: bool = False) -> bool:
    """Draws time against N for one (op, dtype); False when nothing passed."""
    mine = [r for r in rows if r["op"] == op and r["dtype"] == dtype]
    drew = False
    for g, pts in sorted(_best(mine, "jaxmg").items()):
        n = sorted(pts)
        ax.plot(n, [pts[k] for k in n], "o-", color=COLORS.get(g), label=f"jaxmg, {g} GPU(s)")
        drew = True
    ceiling = _best(mine, "ceiling")
    if ceiling_most_gpus_only and ceiling:
        ceiling = {max(ceiling): ceiling[max(ceiling)]}
    for g, pts in sorted(ceiling.items()):
        n = sorted(pts)
        ax.plot(n, [pts[k] for k in n], "s--", color=COLORS.get(g), alpha=0.7,
                label=f"ceiling (cuSOLVERMg), {g} GPU(s)")
        drew = True
    if op == "potri":
        mg = [r for r in rows if r["op"] == "potri_mg" and r["dtype"] == dtype]
        for g, pts in sorted(_best(mg, "ceiling").items()):
            n = sorted(pts)
            ax.plot(n, [pts[k] for k in n], "^:", color=COLORS.get(g), alpha=0.6,
                    label=f"cusolverMgPotri, {g} GPU(s)")
    jx = _jax(mine)
    if jx:
        n = sorted(jx)
        ax.plot(n, [jx[k] for k in n], "k*-", label="JAX, 1 GPU")
        drew = True
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("N")
    ax.set_ylabel("time (s), median")
    ax.grid(True, which="both", alpha=0.3)
    if drew:
        ax.legend(fontsize=7)
    return drew


def _tiles(rows: Rows, out: pathlib.Path, suffix: str) -> pathlib.Path | None:
    mine = [r for r in rows if (r["op"], r["dtype"]) == ("potrs", "float64")]
    if not mine:
        return None
    gmax = max(int(r["gpus"]) for r in mine)
    by_n: dict[int, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in mine:
        if int(r["gpus"]) != gmax:
            continue
        for prefix in ("jaxmg", "ceiling"):
            if r.get(f"{prefix}_status") == "ok" and r.get(f"{prefix}_median_s"):
                by_n[int(r["N"])][prefix][int(r["T_A"])] = float(r[f"{prefix}_median_s"])
    by_n = {n: d for n, d in by_n.items() if len(d.get("jaxmg", {})) > 1}
    if not by_n:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, (n, d) in enumerate(sorted(by_n.items())):
        color = f"C{i}"
        for prefix, style in (("jaxmg", "o-"), ("ceiling", "s--")):
            pts = d.get(prefix, {})
            t = sorted(pts)
            if t:
                ax.plot(t, [pts[k] for k in t], style, color=color, label=f"{prefix}, N={n}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("T_A")
    ax.set_ylabel("time (s), median")
    ax.set_title(f"potrs float64 on {gmax} GPU(s) against T_A\n{suffix}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    path = out / "potrs_float64_tiles.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _speedups(rows: Rows) -> list[tuple[str, float]]:
    """(label, speedup over one-GPU JAX) per (op, dtype) at its largest N
    measured on the most GPUs, best T_A."""
    out = []
    for op, dtype in sorted({(r["op"], r["dtype"]) for r in rows if r["op"] != "potri_mg"}):
        ok = [r for r in rows if (r["op"], r["dtype"]) == (op, dtype) and r.get("speedup_vs_jax1")]
        if not ok:
            continue
        gmax = max(int(r["gpus"]) for r in ok)
        ok = [r for r in ok if int(r["gpus"]) == gmax]
        nmax = max(int(r["N"]) for r in ok)
        best = max(float(r["speedup_vs_jax1"]) for r in ok if int(r["N"]) == nmax)
        out.append((f"{op} {dtype}\nN={nmax}, {gmax} GPUs", best))
    return out


def plot_all(csv_path: pathlib.Path, out: pathlib.Path) -> list[pathlib.Path]:
    """Writes every plot the results allow; returns their paths."""
    rows = _read(csv_path)
    suffix = _title_suffix(out)
    written = []
    for op, dtype in sorted({(r["op"], r["dtype"]) for r in rows if r["op"] != "potri_mg"}):
        fig, ax = plt.subplots(figsize=(6, 4.5))
        if _time_axes(ax, rows, op, dtype):
            ax.set_title(f"{op} {dtype}\n{suffix}", fontsize=9)
            fig.tight_layout()
            path = out / f"{op}_{dtype}.png"
            fig.savefig(path, dpi=120)
            written.append(path)
        plt.close(fig)
    path = _tiles(rows, out, suffix)
    if path is not None:
        written.append(path)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    drew = _time_axes(left, rows, "potrs", "float64", ceiling_most_gpus_only=True)
    left.set_title("potrs float64: time against N", fontsize=10)
    speed = _speedups(rows)
    if speed:
        labels, values = zip(*speed)
        bars = right.bar(range(len(values)), values, color="tab:green")
        right.bar_label(bars, labels=[f"{v:.2f}x" for v in values], fontsize=8)
        right.axhline(1.0, color="k", lw=0.8)
        right.set_xticks(range(len(values)), labels, fontsize=7)
        right.set_ylabel("speedup over one-GPU JAX")
        right.set_title("jaxmg against the single-GPU JAX routine", fontsize=10)
    if drew or speed:
        fig.suptitle(f"jaxmg benchmarks ({suffix})" if suffix else "jaxmg benchmarks",
                     fontsize=11)
        fig.tight_layout()
        path = out / "headline.png"
        fig.savefig(path, dpi=120)
        written.append(path)
    plt.close(fig)
    return written


if __name__ == "__main__":
    d = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    for p in plot_all(d / "results.csv", d):
        print(p)
