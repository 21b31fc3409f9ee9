"""The CUDA library's engine check, asked without a GPU: the choice between
cusolverdn (one GPU), cusolverdn-gather (several GPUs, N below
engine/gather/thresholds.c's sizes) and cusolvermg (the rest) is pure
selection, which runs anywhere libjaxmg_cuda.so loads; and the Python layer's
pre-trace check (_geometry.choose_geometry) keeps its defaults with it.
README.md's table of crossovers is checked against the same choice.

Skipped where jaxmg was built without CUDA or its CUDA libraries cannot be
loaded."""

import ctypes
import pathlib
import re

import numpy as np
import pytest

from jaxmg._src import _geometry, _native
from jaxmg._src.core import gesvd as gesvd_core, qr as qr_core


@pytest.fixture
def cuda(monkeypatch):
    """The installed libjaxmg_cuda.so as _native's CUDA library."""
    _native.load()
    path = _native._find_library("jaxmg_cuda")
    if path is None:
        pytest.skip("jaxmg was built without CUDA")
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as e:
        pytest.skip(f"libjaxmg_cuda.so does not load here: {e}")
    monkeypatch.setitem(_native._LIBS, "CUDA", lib)
    monkeypatch.delenv("JAXMG_ENGINE", raising=False)
    return lib


def _engine(op, nparts, dtype, n, tile):
    ok, name = _native.engine_check("CUDA", op, nparts, dtype, n, tile)
    assert ok, name
    return name


def test_one_gpu_small_several_and_large_several(cuda):
    assert _engine("potrs", 1, "float64", 8192, 2048) == "cusolverdn"
    assert _engine("potrs", 4, "float64", 8192, 2048) == "cusolverdn-gather"
    assert _engine("potrs", 4, "float64", 16384, 2048) == "cusolvermg"
    assert _engine("syevd", 4, "float64", 8192, 1024) == "cusolverdn-gather"
    assert _engine("syevd", 4, "float32", 16384, 1024) == "cusolverdn-gather"
    assert _engine("syevd", 4, "float64", 65536, 1024) == "cusolvermg"
    assert _engine("potri", 2, "complex128", 4096, 1024) == "cusolverdn-gather"
    # potri: the tiled inverse from N = 8192 (bench/results/2026-11-28-s20-h200x4-scaling).
    assert _engine("potri", 2, "float64", 4096, 1024) == "cusolverdn-gather"
    assert _engine("potri", 2, "float64", 8192, 1024) == "cusolvermg"
    assert _engine("potri", 4, "float64", 16384, 2048) == "cusolvermg"
    assert _engine("lu_solve", 2, "float32", 4096, 1024) == "cusolverdn-gather"
    # No sizes measured for more than 4 GPUs: the distributed engine.
    assert _engine("potrs", 8, "float64", 1024, 128) == "cusolvermg"


def test_multi_gpu_eigensolver_where_it_was_measured_faster(cuda, monkeypatch):
    """float64 syevd on 2 to 4 GPUs from N = 16384 to 32768 runs eig-mgpu by
    default (engine/eig_mgpu/context.c); JAXMG_SYEVD_MGPU=1 takes it at every
    N, "0" never."""
    monkeypatch.delenv("JAXMG_SYEVD_MGPU", raising=False)
    for nparts in (2, 4):
        assert _engine("syevd", nparts, "float64", 16384, 1024) == "eig-mgpu"
        assert _engine("syevd", nparts, "float64", 32768, 256) == "eig-mgpu"
    assert _engine("syevd", 8, "float64", 16384, 256) == "cusolvermg"
    monkeypatch.setenv("JAXMG_SYEVD_MGPU", "0")
    assert _engine("syevd", 2, "float64", 16384, 1024) != "eig-mgpu"
    monkeypatch.setenv("JAXMG_SYEVD_MGPU", "1")
    assert _engine("syevd", 2, "float64", 1024, 256) == "eig-mgpu"
    assert _engine("syevd", 2, "float32", 1024, 256) != "eig-mgpu"


def test_jaxmg_engine_forces_either_on_several_gpus(cuda, monkeypatch):
    monkeypatch.setenv("JAXMG_ENGINE", "cusolvermg")
    assert _engine("potrs", 4, "float64", 1024, 256) == "cusolvermg"
    monkeypatch.setenv("JAXMG_ENGINE", "cusolverdn-gather")
    assert _engine("potrs", 4, "float64", 65536, 1024) == "cusolverdn-gather"
    ok, why = _native.engine_check("CUDA", "potrs", 1, "float64", 1024, 1024)
    assert not ok and "JAXMG_ENGINE" in why and "one GPU" in why


def test_gather_engine_takes_tiles_its_fall_back_refuses(cuda):
    """Below the table's size the gather engine runs syevd with any T_A,
    though cuSOLVERMg's syevd (its fall back, where the gathered copy does not
    fit) refuses T_A > 1024: refusing it there sent the default T_A (2048) on
    4 GPUs to cuSOLVERMp wherever that loads, at 0.36x one GPU
    (bench/results/2026-11-27-h200x4-scaling). From the table's size on,
    cuSOLVERMg runs it (past the multi-GPU eigensolver's sizes), so the
    default T_A narrows to 1024 there."""
    f64 = np.dtype(np.float64)
    g = _geometry.choose_geometry("syevd", 8192, 4, f64, None, True, "CUDA")
    assert g.tile == 2048 and g.engine == "cusolverdn-gather"
    assert _engine("syevd", 4, "float64", 8192, 2048) == "cusolverdn-gather"
    g = _geometry.choose_geometry("potrs", 8192, 4, f64, None, True, "CUDA")
    assert g.tile == 2048
    # Past the multi-GPU eigensolver's sizes (engine/eig_mgpu/context.c).
    ok, why = _native.engine_check("CUDA", "syevd", 4, "float64", 65536, 2048)
    if ok:  # cuSOLVERMp loads here: it takes what the leader engines refuse
        assert why == "cusolvermp", why
    else:
        assert "N=65536 >= 32768" in why and "T_A=2048 > 1024" in why, why
        g = _geometry.choose_geometry("syevd", 65536, 4, f64, None, True, "CUDA")
        assert g.tile == 1024 and g.engine == "cusolvermg"


def test_qr_past_orgqr_s_32_bit_sizes_is_refused_before_tracing(cuda):
    """cuSOLVERDn's qr runs cusolverDn<t>orgqr, whose sizes are ints: an
    M x N A with M * N past INT_MAX is refused by the check that the Python
    layer asks before tracing (qr_core.geometry, which qr and least_squares
    call), naming the op, M, N and the limit; N alone would pass."""
    f32 = np.dtype(np.float32)
    assert _native.engine_check("CUDA", "qr", 1, "float32", 32768, 32768, m=65534) == (
        True, "cusolverdn")
    ok, why = _native.engine_check("CUDA", "qr", 1, "float32", 32768, 32768, m=65536)
    assert not ok
    assert "qr float32 M=65536 N=32768" in why
    assert "cusolverDn<t>orgqr takes 32-bit int sizes (M, N and M * N at most 2147483647)" in why
    # The same limit for the copy gathered onto one of several GPUs.
    ok, why = _native.engine_check("CUDA", "qr", 4, "float32", 32768, 32768, m=65536)
    assert not ok and "cusolverdn-gather: qr of a 65536 x 32768 A" in why
    with pytest.raises(ValueError, match=r"jaxmg\.least_squares: no engine runs the QR of a "
                       r"65536 x 32768 float32 matrix on 1 CUDA.*orgqr takes 32-bit"):
        qr_core.geometry("least_squares", 65536, 32768, 1, f32, None, "CUDA")
    assert qr_core.geometry("qr", 65534, 32768, 1, f32, None, "CUDA").engine == "cusolverdn"


def test_gesvd_of_a_tall_a_past_cublas_s_int_is_refused_before_tracing(cuda):
    """cuSOLVERDn's gesvd decomposes a tall A's transpose, made by cuBLAS
    geam with int sizes: M past INT_MAX is refused before tracing; a wide A
    of as many columns has no such transpose."""
    f32 = np.dtype(np.float32)
    big = 2 ** 31 + 1
    ok, why = _native.engine_check("CUDA", "gesvd", 1, "float32", 2, 2, m=big)
    assert not ok and "gesvd float32 M=2147483649 N=2" in why
    assert "a tall A is transposed by cuBLAS geam" in why
    assert _native.engine_check("CUDA", "gesvd", 1, "float32", big, big, m=2) == (
        True, "cusolverdn")
    with pytest.raises(ValueError, match=r"jaxmg\.polar: no engine runs a 2147483649 x 2 "
                       r"float32 SVD.*M at most 2147483647"):
        gesvd_core.geometry("polar", big, 2, 1, f32, None, "CUDA")


def test_mixed_solves_on_several_gpus_go_to_the_gather_engine(cuda, monkeypatch):
    """precision="mixed" on several GPUs: the gather engine (cuSOLVERDn's
    mixed routine on the gathered copy) at every size, since no other engine
    of several GPUs has a mixed routine; the exact path keeps its table."""
    for op in ("potrs", "lu_solve"):
        for nparts, n in ((2, 4096), (4, 16384), (4, 65536), (8, 1024)):
            ok, name = _native.engine_check("CUDA", op, nparts, "float64", n, 1024,
                                            precision="mixed")
            assert ok and name == "cusolverdn-gather", (op, nparts, n, name)
    assert _engine("potrs", 4, "float64", 65536, 1024) == "cusolvermg"
    ok, name = _native.engine_check("CUDA", "potrs", 1, "complex128", 4096, 1024,
                                    precision="mixed")
    assert ok and name == "cusolverdn", name
    # The distributed engines have none: forcing one names what to pass.
    for engine in ("cusolvermg", "cusolvermp"):
        monkeypatch.setenv("JAXMG_ENGINE", engine)
        ok, why = _native.engine_check("CUDA", "lu_solve", 2, "float64", 4096, 1024,
                                       precision="mixed")
        assert not ok and 'precision="mixed"' in why and 'precision="exact"' in why, why


# ---- README's crossover table against the library's choice -----------------

ROOT = pathlib.Path(__file__).resolve().parents[2]
DTYPES = {"real": ("float32", "float64"), "complex": ("complex64", "complex128"),
          "float32": ("float32",), "float64": ("float64",),
          "any": ("float32", "float64", "complex64", "complex128")}
# thresholds.c's rows: {op, complex, min_parts, max_parts, below, measured,
# "source" ..., local_below}.
ROW = re.compile(r"\{JMG_OP_(\w+), (\d), (\d+), (\d+), (\d+), ([01]),\s*"
                 r"(?:\"(?:[^\"\\]|\\.)*\"\s*)+,\s*(\d+)\}")


def _readme_crossovers() -> tuple[list[dict], str]:
    """The rows of README.md's crossover table, and the section's text."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Never slower than one GPU: the crossovers\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert head[:4] == ["op", "dtype", "GPUs", "several GPUs from N"], head
    rows = []
    for ln in lines[2:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        rows.append(dict(zip(("ops", "dtype", "gpus", "n", "engine", "status", "local"),
                             cells)))
    return rows, section


def _gpus(cell: str) -> list[int]:
    """The GPU counts of a cell ("2", "3-4"; "5 or more": 5 and 8)."""
    if cell.endswith(" or more"):
        first = int(cell.split()[0])
        return [first, first + 3]
    lo, _, hi = cell.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def _c_rows() -> list[tuple]:
    src = (ROOT / "csrc/engine/gather/thresholds.c").read_text()
    rows = [(op.lower(), int(c), int(lo), int(hi), int(below), int(measured), int(local))
            for op, c, lo, hi, below, measured, local in ROW.findall(src)]
    assert len(rows) == src.count("{JMG_OP_"), rows
    return rows


def _check_every_n(r: dict, op: str, dtype: str, g: int, engines: list[str],
                   rows: list[dict]) -> None:
    """A row with no crossover: the gather engine ("never") or the named
    engine ("every N") at every N, and the local model's cell (rows: the
    table's, for syevd's N)."""
    engine = "cusolverdn-gather" if r["n"] == "never" else engines[0]
    for n in (1024, 16384, 32768):
        assert _engine(op, g, dtype, n, 256) == engine, (r, op, dtype, g, n)
    local = dict(part.strip().split(": ") for part in r["local"].split(";")) \
        if ":" in r["local"] else {op: r["local"]}
    ok, name = _native.engine_check("CUDA", op, g, dtype, 1024, 256, nodes=2)
    if local[op] == "every N":  # cuSOLVERMp, or its refusal where it does not load
        assert (ok and name == "cusolvermp") or (
            not ok and "cusolverdn-local: no size" in name), (op, g, name)
    elif local[op] == "no engine":
        assert not ok and "cusolverdn-local: it has no" in name, (op, g, name)
    else:  # "syevd's N": the local model's N of syevd's row
        assert local[op] == "syevd's N", local
        syevd = [s for s in rows if s["ops"] == "syevd" and s["n"].isdigit()
                 and dtype in DTYPES[s["dtype"]] and g in _gpus(s["gpus"])]
        if not syevd:  # more GPUs than syevd's rows: no crossover
            return
        n = int(syevd[0]["local"])
        assert _native.engine_check("CUDA", op, g, dtype, n - 1, 256, nodes=2) == (
            True, "cusolverdn-local"), (op, g, n)
        assert _native.engine_check("CUDA", op, g, dtype, n, 256, nodes=2)[1] != (
            "cusolverdn-local"), (op, g, n)


def test_readme_crossover_table_is_the_library_s_choice(cuda, monkeypatch):
    """README.md's "Never slower than one GPU" table says, per op, dtype class
    and GPU count, from which N several GPUs run the call and with which
    engine (below it: cusolverdn-gather), whether that N was measured, and the
    local model's N (below it cusolverdn-local, from it cuSOLVERMp): each is
    asked of the library here, and the measured flag and local_below read from
    engine/gather/thresholds.c's rows, so that the README cannot drift from
    the code."""
    for var in ("JAXMG_SYEVD_MGPU", "JAXMG_LOCAL_GATHER"):
        monkeypatch.delenv(var, raising=False)
    rows, section = _readme_crossovers()
    c_rows = _c_rows()
    mgpu = (ROOT / "csrc/engine/eig_mgpu/context.c").read_text()
    window = re.search(r"MGPU_FROM_N = (\d+), MGPU_TO_N = (\d+), MGPU_MAX_PARTS = (\d+)", mgpu)
    assert window, "eig-mgpu's window not found in engine/eig_mgpu/context.c"
    covered = set()
    for r in rows:
        ops = [o.strip() for o in r["ops"].split(",")]
        engines = re.findall(r"`([\w-]+)`", r["engine"])
        for op in ops:
            for dtype in DTYPES[r["dtype"]]:
                for g in _gpus(r["gpus"]):
                    covered.add((op, dtype, g))
                    if r["n"] in ("never", "every N"):
                        _check_every_n(r, op, dtype, g, engines, rows)
                        continue
                    n = int(r["n"])
                    where = (op, dtype, g, n)
                    assert _engine(op, g, dtype, n - 1, 256) == "cusolverdn-gather", where
                    assert _engine(op, g, dtype, n, 256) == engines[0], where
                    to = re.search(r"to N = (\d+)", r["engine"])
                    if to:
                        last = int(to.group(1))
                        assert _engine(op, g, dtype, last, 256) == engines[0], where
                        assert _engine(op, g, dtype, last + 1, 256) == engines[1], where
                    # The local model: a group across two nodes.
                    local = int(r["local"])
                    ok, name = _native.engine_check("CUDA", op, g, dtype, local - 1, 256, nodes=2)
                    assert ok and name == "cusolverdn-local", (where, local, name)
                    ok, name = _native.engine_check("CUDA", op, g, dtype, local, 256, nodes=2)
                    # cuSOLVERMp, or (where it does not load here) no engine,
                    # cusolverdn-local saying N is past its size (the reasons
                    # are cut at the message's length: its start is there).
                    assert (ok and name == "cusolvermp") or (
                        not ok and "cusolverdn-local: N=" in name), (where, local, name)
                    # The row of thresholds.c behind it: measured or a guess,
                    # and local_below.
                    cplx = int(dtype.startswith("complex"))
                    (c,) = [c for c in c_rows
                            if c[0] == op and c[1] == cplx and c[2] <= g <= c[3]]
                    assert local == (c[6] or c[4]), (where, c)
                    if engines[0] == "eig-mgpu":  # its window, not the table's
                        assert (n, last, g <= int(window.group(3))) == (
                            int(window.group(1)), int(window.group(2)), True), where
                        continue
                    assert n == c[4], (where, c)
                    assert r["status"].startswith("measured" if c[5] else "guess"), (where, c)
    # Every row of thresholds.c (and so every op, dtype and GPU count the
    # table decides) has its row in the README.
    for op, cplx, lo, hi, *_ in c_rows:
        for dtype in DTYPES["complex" if cplx else "real"]:
            for g in range(lo, hi + 1):
                assert (op, dtype, g) in covered, (op, dtype, g)
    # The results folders the section cites are committed.
    for path in re.findall(r"`((?:bench/results|docs/gpu-runs)/[^`]+)`", section):
        assert (ROOT / path).exists(), path
