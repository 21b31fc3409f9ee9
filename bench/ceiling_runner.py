"""Runs the engine's ceiling (bench/ceiling/, a C program) for the benchmark's
cases and reads its CSV rows back.

One process per GPU count (its cuSOLVERMg handle and grid are made for one
device set), cases fed on stdin. It runs before JAX touches the GPUs: JAX's
allocator keeps what it has taken, and the ceiling allocates with cudaMalloc.
"""

from __future__ import annotations

import csv
import io
import pathlib
import subprocess
import time
from typing import Callable, Iterable

from cases import Case
from measure import Measured

# jaxmg's potri is potrf + potrs on the identity; the ceiling measures that
# sequence ("potri") and cusolverMgPotri itself ("potri_mg") for reference.
CEILING_OPS = {"potrs": ("potrs",), "potri": ("potri", "potri_mg"), "syevd": ("syevd",)}

Key = tuple[str, str, int, int, int]  # op, dtype, N, T_A, gpus


def gpu_count(binary: pathlib.Path) -> int:
    """The number of GPUs the ceiling sees (0 when it cannot run)."""
    try:
        out = subprocess.run([str(binary), "--list"], capture_output=True, text=True,
                             timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    for line in out.stdout.splitlines():
        if line.startswith("gpus,"):
            return int(line.split(",")[1])
    return 0


def supported(case: Case) -> bool:
    """The ceiling lays the matrix out without padding: N must be a multiple of
    GPUs x T_A, and even (cuRAND draws normals in pairs)."""
    return case.n % (case.gpus * case.tile) == 0 and case.n % 2 == 0


def _parse(text: str) -> dict[Key, Measured]:
    out: dict[Key, Measured] = {}
    rows = [line for line in text.splitlines() if line and not line.startswith("#")]
    for row in csv.DictReader(io.StringIO("\n".join(rows))):
        try:
            key = (row["op"], row["dtype"], int(row["N"]), int(row["T_A"]), int(row["gpus"]))
        except (KeyError, TypeError, ValueError):
            continue
        m = Measured(status=row["status"])
        if row["median_s"]:
            m.median_s, m.min_s, m.max_s = (float(row[k]) for k in ("median_s", "min_s", "max_s"))
            m.runs, m.residual = int(row["runs"]), float(row["residual"])
        out[key] = m
    return out


def run(binary: pathlib.Path, all_cases: Iterable[Case], repeats: int, max_case_s: float,
        budget_s: float, log_path: pathlib.Path, log: Callable[[str], None]) -> dict[Key, Measured]:
    """Measures every supported case; returns results keyed like the rows."""
    by_gpus: dict[int, list[str]] = {}
    for c in all_cases:
        if supported(c):
            for op in CEILING_OPS[c.op]:
                line = f"{op} {c.dtype} {c.n} {c.tile}"
                if line not in by_gpus.setdefault(c.gpus, []):
                    by_gpus[c.gpus].append(line)
    results: dict[Key, Measured] = {}
    start = time.perf_counter()
    with open(log_path, "a") as logf:
        # The target cases are on the most GPUs: those first. Each process gets
        # the budget left in proportion to its number of cases, so that a long
        # first one cannot leave nothing to the others; within a process the
        # cases go in priority order and the ceiling stops starting them when
        # its share is spent.
        order = sorted(by_gpus, reverse=True)
        for i, g in enumerate(order):
            left = budget_s - (time.perf_counter() - start) if budget_s > 0 else 0.0
            if budget_s > 0 and left <= 0:
                log(f"ceiling: budget spent, {len(by_gpus[g])} case(s) on {g} GPU(s) skipped")
                continue
            left *= len(by_gpus[g]) / sum(len(by_gpus[h]) for h in order[i:])
            cmd = [str(binary), "--gpus", str(g), "--repeats", str(repeats),
                   "--max-case-s", str(max_case_s)]
            if budget_s > 0:
                cmd += ["--budget-s", f"{left:.1f}"]
            log(f"ceiling: {len(by_gpus[g])} case(s) on {g} GPU(s)")
            logf.write(f"$ {' '.join(cmd)}\n" + "\n".join(by_gpus[g]) + "\n")
            logf.flush()
            t0 = time.perf_counter()
            try:
                # The ceiling stops starting cases when its budget is spent; the
                # timeout only guards against a hang.
                proc = subprocess.run(cmd, input="\n".join(by_gpus[g]) + "\n",
                                      capture_output=True, text=True,
                                      timeout=(left + 120) if budget_s > 0 else None)
                stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
            except subprocess.TimeoutExpired as e:
                stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
                stderr = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
                rc = "timeout"
            logf.write(stdout + stderr + f"(exit {rc}, {time.perf_counter() - t0:.1f} s)\n")
            logf.flush()
            got = _parse(stdout)
            results.update(got)
            log(f"ceiling: {len(got)} row(s) on {g} GPU(s) in {time.perf_counter() - t0:.0f} s"
                + ("" if rc == 0 else f" (exit {rc}; see {log_path.name})"))
    return results
