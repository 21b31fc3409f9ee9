"""bench/engines.py on the 4 CPU devices of the test suite (conftest.py):
every op at tiny sizes with the engines a CPU has (JAX's routine, jaxmg's
default choice, LAPACK), in this process through engines.main. Its rows,
statuses, the engine the default ran (read from JAXMG_TRACE) and the table
are checked; never a time: CPU times say nothing about GPUs."""

from __future__ import annotations

import csv
import importlib.util
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"

ENGINES = ("jax", "default", "lapack")


def _engines_module():
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    import engines

    return engines


def test_every_engine_side_by_side_on_cpu(tmp_path, cpu_devices, monkeypatch):
    engines = _engines_module()
    monkeypatch.delenv("JAXMG_ENGINE", raising=False)
    monkeypatch.delenv("JAXMG_POTRF", raising=False)
    rc = engines.main([str(tmp_path), "--platform", "cpu", "--gpus", "4", "--preset", "smoke",
                       "--sizes", "potrs=64,128", "--engines", ",".join(ENGINES),
                       "--repeats", "2", "--max-case-s", "1", "--budget-s", "120"])
    assert rc == 0
    # JAXMG_ENGINE and JAXMG_POTRF are restored after each measurement.
    assert "JAXMG_ENGINE" not in os.environ and "JAXMG_POTRF" not in os.environ

    rows = list(csv.DictReader(open(tmp_path / "results.csv")))
    cases = [("potrs", "float64", 64), ("potrs", "float64", 128), ("syevd", "float64", 64),
             ("potri", "complex128", 64), ("lu_solve", "float64", 64)]
    assert sorted((r["op"], r["dtype"], int(r["n"]), r["engine"]) for r in rows) == sorted(
        (op, dt, n, e) for op, dt, n in cases for e in ENGINES)
    for r in rows:
        assert r["status"] == "ok", r
        assert float(r["residual"]) < float(r["tolerance"]), r
        assert int(r["runs"]) >= 2 and float(r["median_s"]) > 0, r
        assert float(r["speed_vs_jax"]) > 0, r
        if r["engine"] == "jax":
            assert r["gpus"] == "1" and r["engine_ran"] == "", r
        else:
            # The engine that ran, from the warm-up call's trace line.
            assert r["gpus"] == "4" and r["engine_ran"] == "lapack", r
            assert int(r["tile"]) >= 1, r
    # Within an op the sizes increase.
    potrs = [int(r["n"]) for r in rows if r["op"] == "potrs" and r["engine"] == "jax"]
    assert potrs == [64, 128]

    table = (tmp_path / "table.txt").read_text()
    head = table.splitlines()[0].split()
    assert head[:3] == ["op", "dtype", "N"] and head[3:6] == list(ENGINES), head
    for op, dt, n in cases:
        line = next(ln for ln in table.splitlines() if ln.split()[:3] == [op, dt, str(n)])
        assert line.count(" s") == 3 and line.rstrip().endswith("lapack"), line
    trace = (tmp_path / "trace.txt").read_text()
    assert trace.count("jaxmg trace ") == 2 * len(cases), trace
    meta = (tmp_path / "meta.txt").read_text()
    assert "devices: 4 x" in meta and "jax:" in meta and "commit:" in meta, meta
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "engines.png").stat().st_size > 0


def test_sizes_and_order():
    engines = _engines_module()
    sizes = engines.parse_sizes(["lu_solve=128,64", "potrs=256"], "smoke",
                                ("potrs", "lu_solve"))
    assert sizes == {"potrs": (256,), "lu_solve": (64, 128)}
    assert engines.parse_sizes(["32,16"], "smoke", ("syevd",)) == {"syevd": (16, 32)}
    order = engines.plan(engines.PRESETS["issue20"])
    for op in engines.CASES:  # sizes increase within an op
        ns = [n for o, _, n in order if o == op]
        assert ns == sorted(ns) and ns, op
    # The cheap large potrs before the dear syevd.
    assert order.index(("potrs", "float64", 65536)) < order.index(("syevd", "float64", 32768))
