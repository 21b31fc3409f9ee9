"""bench/scaling.py on 4 CPU devices: a tiny sweep with the CPU engines
(JAX's routine, jaxmg's default, lapack and lapack-local on all 4 devices,
lapack-local with one process per device on 2), run as the GPU machine runs
it (a parent process, a worker per lane, a job of 2 processes for the
one-process-per-device engine). Its rows, statuses, columns, table, README and plots are checked;
never a time: CPU times say nothing about GPUs."""

from __future__ import annotations

import csv
import importlib.util
import os
import pathlib
import subprocess
import sys

from mpmd_launch import xla_flags

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
ENGINES = ("default", "lapack", "lapack-local", "lapack-local-mpmd")
OPS = ("potrs", "syevd")
COLUMNS = ("op", "dtype", "n", "gpus", "engine", "status", "median_s", "jax1_median_s",
           "speed_vs_jax1", "tflops", "efficiency", "peak_tflops", "peak_bytes")


def _scaling_module():
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    import scaling

    return scaling


def test_scaling_sweep_on_cpu_devices(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("JAXMG_ENGINE", "JAXMG_POTRF")}
    env["XLA_FLAGS"] = xla_flags(None)  # scaling.py sets each lane's device count
    # The lanes' workers compile the same checks and inputs: one cache.
    env.update(JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jax-cache"),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    out = tmp_path / "scaling"
    proc = subprocess.run(
        [sys.executable, str(BENCH / "scaling.py"), "--platform", "cpu", "--sizes", "32",
         "--gpus", "4", "--mpmd-gpus", "2", "--ops", ",".join(OPS), "--budget-s", "150", "--peak-tflops", "0.5",
         "--out", str(out)],
        capture_output=True, text=True, timeout=170, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]

    rows = list(csv.DictReader(open(out / "results.csv")))
    assert set(COLUMNS) <= set(rows[0]), rows[0].keys()
    got = {(r["op"], r["n"], r["gpus"], r["engine"]) for r in rows}
    want = ({(op, "32", "1", "jax") for op in OPS}
            | {(op, "32", "4", e) for op in OPS for e in ENGINES[:3]}
            | {(op, "32", "2", ENGINES[3]) for op in OPS})
    assert got == want, got ^ want
    for r in rows:
        assert r["status"] == "ok", r
        assert r["dtype"] == "float64" and float(r["peak_tflops"]) == 0.5
        assert float(r["median_s"]) > 0 and int(r["runs"]) >= 3, r
        assert float(r["residual"]) < float(r["tolerance"]), r
        assert float(r["speed_vs_jax1"]) > 0 and float(r["tflops"]) > 0, r
        # efficiency = TFLOP/s over devices x the per-device peak
        eff = float(r["tflops"]) / (int(r["gpus"]) * 0.5)
        assert abs(float(r["efficiency"]) - eff) <= 1e-4 * eff, r
        if r["engine"] != "jax":
            assert r["engine_ran"].startswith("lapack"), r
            assert r["processes"] == ("2" if r["engine"].endswith("-mpmd") else "1"), r

    table = (out / "table.md").read_text()
    head = table.splitlines()[0]
    assert head == "| op | N | GPUs | JAX, 1 GPU | " + " | ".join(ENGINES) + " |", head
    for op in OPS:
        line = next(ln for ln in table.splitlines() if ln.startswith(f"| {op} | 32 | 4 |"))
        assert line.count("x,") == 3 and line.endswith("|  |"), line
        line = next(ln for ln in table.splitlines() if ln.startswith(f"| {op} | 32 | 2 |"))
        assert line.count("x,") == 1, line
    # The table is a function of results.csv alone.
    scaling = _scaling_module()
    assert scaling.markdown_table(out / "results.csv") == table
    readme = (out / "README.md").read_text()
    assert "bench/scaling.py --platform cpu" in readme and table.splitlines()[2] in readme
    if importlib.util.find_spec("matplotlib") is not None:
        for op in OPS:
            assert (out / f"{op}.png").stat().st_size > 0
