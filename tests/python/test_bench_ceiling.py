"""The engine's ceiling (bench/ceiling/) without a GPU: built with gcc against
the CUDA headers and linked with tests/bench/mock_cuda.c, a CPU stand-in for
the CUDA runtime, cuBLAS, cuRAND and cuSOLVERMg that also enforces what the
real libraries require (current device, peer access, pointers on their
GPUs). Under AddressSanitizer and UBSan. This checks the program's logic: the
block-cyclic indexing, the Hermitian fill, jaxmg's potri slab sequence, the
checks (they catch a wrong answer), the CSV, the error paths. Whether
cuSOLVERMg behaves as the stand-in says is for the GPU run to show.

Skipped where gcc or the CUDA headers are missing. Times are never asserted.
"""

from __future__ import annotations

import csv
import io
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CUDA = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))

pytestmark = pytest.mark.skipif(
    shutil.which("gcc") is None or not (CUDA / "include" / "cusolverMg.h").is_file(),
    reason="needs gcc and the CUDA toolkit's headers")


@pytest.fixture(scope="module")
def ceiling(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("ceiling") / "ceiling"
    sources = sorted(str(p) for p in (ROOT / "bench" / "ceiling").glob("*.c"))
    cmd = ["gcc", "-std=c11", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
           "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
           f"-I{CUDA / 'include'}", *sources, str(ROOT / "tests" / "bench" / "mock_cuda.c"),
           "-lm", "-o", str(out)]
    build = subprocess.run(cmd, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    return out


def _run(binary: pathlib.Path, args: list[str], stdin: str = "", **env: str):
    e = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", **env)
    p = subprocess.run([str(binary), *args], input=stdin, capture_output=True, text=True,
                       timeout=120, env=e)
    assert p.returncode != 99, p.stderr  # the stand-in caught a misuse
    assert "Sanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    return p, rows


@pytest.mark.parametrize("gpus", [1, 2, 4])
def test_every_op_and_dtype_checks_out(ceiling, gpus):
    cases = [f"{op} {dt} 96 8" for op in ("potrs", "potri", "potri_mg")
             for dt in ("float32", "float64", "complex64", "complex128")]
    # ... and one tile per device.
    cases += ["syevd float64 64 8", "syevd float32 64 16", f"potrs float64 64 {64 // gpus}"]
    p, rows = _run(ceiling, ["--gpus", str(gpus), "--repeats", "2"], "\n".join(cases) + "\n")
    assert p.returncode == 0, p.stderr
    assert len(rows) == len(cases)
    for r in rows:
        assert r["status"] == "ok", (r, p.stderr)
        assert int(r["runs"]) == 2 and int(r["gpus"]) == gpus
        assert float(r["min_s"]) <= float(r["median_s"]) <= float(r["max_s"])


def test_right_hand_sides_past_one_chunk(ceiling):
    # 2100 right-hand sides: one call of 2048 and one of 52 (cuSOLVERMg's limit).
    p, rows = _run(ceiling, ["--gpus", "2", "--repeats", "1", "--nrhs", "2100",
                             "--case", "potrs,float64,32,16"])
    assert p.returncode == 0 and rows[0]["status"] == "ok", p.stderr


@pytest.mark.parametrize("op,corrupted", [("potrs", "potrs"), ("potri", "potrs"),
                                          ("potri_mg", "potri"), ("syevd", "syevd")])
def test_a_wrong_answer_fails_its_check(ceiling, op, corrupted):
    p, rows = _run(ceiling, ["--gpus", "4", "--repeats", "2", "--case", f"{op},float64,64,8"],
                   MOCK_CUDA_CORRUPT=corrupted)
    assert p.returncode == 0, p.stderr  # a FAIL is a measurement
    assert rows[0]["status"] == "FAIL" and float(rows[0]["residual"]) > 1e-9, rows


def test_errors_are_rows_and_the_run_goes_on(ceiling):
    # Not a multiple of GPUs x T_A, then out of memory, then a case that runs.
    p, rows = _run(ceiling, ["--gpus", "2", "--case", "potrs,float64,100,8",
                             "--case", "potrs,float64,64,8", "--case", "potrs,float64,16,8"],
                   MOCK_CUDA_MAX_ALLOC="8192")
    assert p.returncode == 1
    assert [r["status"] for r in rows] == ["error", "error", "ok"], p.stderr
    assert "must be a multiple" in p.stderr and "cudaMalloc failed" in p.stderr


def test_budget_and_usage(ceiling):
    p, rows = _run(ceiling, ["--gpus", "2", "--budget-s", "0.000001",
                             "--case", "potrs,float64,64,8"])
    assert p.returncode == 0 and rows[0]["status"] == "skipped"
    p, _ = _run(ceiling, ["--gpus", "2", "--case", "potrs,bfloat16,64,8"])
    assert p.returncode == 2 and "bad case" in p.stderr
    p, _ = _run(ceiling, ["--gpus", "5", "--case", "potrs,float64,64,8"])
    assert p.returncode == 1 and "5 GPU(s) asked, 4 present" in p.stderr


def test_the_harness_reads_the_ceiling(ceiling, tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    import cases
    import ceiling_runner

    assert ceiling_runner.gpu_count(ceiling) == 4
    todo = [cases.Case("potrs", "float64", 64, 8, 4), cases.Case("potri", "complex128", 64, 16, 2),
            cases.Case("syevd", "float64", 64, 16, 1)]
    got = ceiling_runner.run(ceiling, todo, 2, 10.0, 60.0, tmp_path / "ceiling.log", print)
    assert set(got) == {("potrs", "float64", 64, 8, 4), ("potri", "complex128", 64, 16, 2),
                        ("potri_mg", "complex128", 64, 16, 2), ("syevd", "float64", 64, 16, 1)}
    assert all(m.ok and m.runs == 2 and m.residual < 1e-12 for m in got.values()), got
