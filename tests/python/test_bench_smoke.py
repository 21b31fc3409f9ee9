"""The benchmark harness (bench/) on 4 CPU devices: it runs, its results pass
their checks, and it prints its table. Never a timing assertion: CPU times
say nothing about GPUs.

The ceiling (bench/ceiling/, cuSOLVERMg) needs GPUs; here its runner and the
merge of its rows are exercised with a stand-in program that speaks the
ceiling's protocol (cases on stdin, CSV rows on stdout).
"""

from __future__ import annotations

import csv
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

from mpmd_launch import xla_flags

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = "cpu"
    env["XLA_FLAGS"] = xla_flags(4)
    return env


def _bench_modules():
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    import cases
    import ceiling_runner
    import report
    from measure import Measured

    return cases, ceiling_runner, report, Measured


def test_smoke_preset_runs_checks_and_prints_its_table(tmp_path):
    out = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--preset", "smoke", "--platform", "cpu",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=180, env=_env(), cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    # The table comes last, with the targets.
    tail = out.stdout[-4000:]
    assert "jaxmg_s" in tail and "ceil_s" in tail and "targets (issue 4" in tail, tail
    rows = list(csv.DictReader(open(tmp_path / "results.csv")))
    assert len(rows) == 7, rows
    for r in rows:
        assert r["jaxmg_status"] == "ok", r
        assert r["jax1_status"] == "ok", r
        for who in ("jaxmg", "jax1"):
            assert float(r[f"{who}_residual"]) < float(r["tolerance"]), r
            assert int(r[f"{who}_runs"]) >= 2
        assert float(r["speedup_vs_jax1"]) > 0
    assert {(r["op"], r["dtype"], r["gpus"]) for r in rows} >= {
        ("potrs", "float64", "1"), ("potrs", "float64", "2"), ("potrs", "float64", "4"),
        ("potrs", "float32", "4"), ("potri", "complex128", "4"), ("syevd", "float64", "4")}
    assert (tmp_path / "table.txt").read_text().startswith("op ")
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "headline.png").stat().st_size > 0
        assert (tmp_path / "potrs_float64.png").stat().st_size > 0


def test_largest_mode_solves_and_checks_on_cpu(tmp_path):
    out = subprocess.run(
        [sys.executable, str(BENCH / "run.py"), "--largest", "--platform", "cpu",
         "--n", "256", "--tile", "16", "--gpus", "4", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120, env=_env(), cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "potrs float32 jaxmg (jaxmg.potrs): largest N solved 256" in out.stdout, out.stdout


STAND_IN = """#!{python}
# Speaks the ceiling's protocol: --list, or cases on stdin -> CSV rows.
import sys
if "--list" in sys.argv:
    print("gpus,4")
    sys.exit(0)
gpus = sys.argv[sys.argv.index("--gpus") + 1]
print("op,dtype,N,T_A,gpus,median_s,min_s,max_s,runs,residual,status")
for line in sys.stdin:
    op, dtype, n, tile = line.split()
    if op == "potri_mg":
        print(f"{{op}},{{dtype}},{{n}},{{tile}},{{gpus}},0.5,0.4,0.6,3,1.0e-04,FAIL")
    else:
        print(f"{{op}},{{dtype}},{{n}},{{tile}},{{gpus}},0.5,0.4,0.6,3,1.0e-16,ok")
"""


def test_ceiling_rows_are_read_and_merged(tmp_path):
    cases, ceiling_runner, report, Measured = _bench_modules()
    binary = tmp_path / "ceiling"
    binary.write_text(STAND_IN.format(python=sys.executable))
    binary.chmod(0o755)
    assert ceiling_runner.gpu_count(binary) == 4
    todo = [cases.Case("potrs", "float64", 8192, 1024, 4),
            cases.Case("potri", "complex128", 8192, 1024, 2),
            cases.Case("potrs", "float64", 8192, 3000, 4)]  # not a multiple: not sent
    logged = []
    got = ceiling_runner.run(binary, todo, 3, 10.0, 0.0, tmp_path / "ceiling.log", logged.append)
    assert set(got) == {("potrs", "float64", 8192, 1024, 4),
                        ("potri", "complex128", 8192, 1024, 2),
                        ("potri_mg", "complex128", 8192, 1024, 2)}
    assert got[("potrs", "float64", 8192, 1024, 4)].median_s == 0.5

    jaxmg = {("potrs", "float64", 8192, 1024, 4): Measured("ok", 0.55, 0.5, 0.6, 5, 1e-16),
             ("potri", "complex128", 8192, 1024, 2): Measured("FAIL", 0.1, 0.1, 0.1, 5, 1e-3)}
    jax1 = {("potrs", "float64", 8192): Measured("ok", 1.1, 1.0, 1.2, 5, 1e-16)}
    rows = report.build_rows(todo[:2], jaxmg, got, jax1, peak_tflops=67.0)
    assert [r.op for r in rows] == ["potrs", "potri", "potri_mg"]
    potrs, potri, potri_mg = rows
    assert potrs.ratio_to_ceiling() == pytest.approx(1.1)
    assert potrs.speedup_vs_jax() == pytest.approx(2.0)
    gflops, frac = potrs.rate(potrs.jaxmg, 4)
    assert gflops == pytest.approx(cases.flops("potrs", "float64", 8192) / 0.55 / 1e9)
    assert frac == pytest.approx(gflops / (4 * 67e3))
    # A result that failed its check gives no ratio, no rate, and no time.
    assert potri.ratio_to_ceiling() is None and potri.rate(potri.jaxmg, 2) == (None, None)
    text = report.table(rows)
    assert "FAIL" in text.splitlines()[3] and "0.1000" not in text
    assert potri_mg.ceiling.status == "FAIL"
    report.write_csv(rows, tmp_path / "results.csv")
    written = list(csv.DictReader(open(tmp_path / "results.csv")))
    assert written[0]["jaxmg_over_ceiling"] == "1.1"
    assert written[1]["jaxmg_status"] == "FAIL" and written[1]["jaxmg_over_ceiling"] == ""


def test_presets_are_sane():
    cases, *_ = _bench_modules()
    h = cases.preset("h200x4")
    assert len(h) == len(set(h))
    # The targets come first, so that the budget never drops them.
    assert h[0] == cases.Case("potrs", "float64", 65536, 256, 4)
    assert cases.Case("potri", "complex128", 32768, 1024, 4) in h[:8]
    for c in h:
        assert c.n % (c.gpus * c.tile) == 0, c  # the ceiling can lay every case out
        assert c.tile == cases.effective_tile(c.n, c.gpus, c.tile)
    assert {c.gpus for c in h} == {1, 2, 4}
    assert cases.flops("potri", "complex128", 10) == 4000.0
    assert cases.flops("syevd", "float64", 10) is None
