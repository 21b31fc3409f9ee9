"""The CUDA library's engine check, asked without a GPU: the choice between
cusolverdn (one GPU), cusolverdn-gather (several GPUs, N below
engine/gather/thresholds.c's sizes) and cusolvermg (the rest) is pure
selection, which runs anywhere libjaxmg_cuda.so loads; and the Python layer's
pre-trace check (_geometry.choose_geometry) keeps its defaults with it.

Skipped where jaxmg was built without CUDA or its CUDA libraries cannot be
loaded."""

import ctypes

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
