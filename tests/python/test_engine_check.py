"""T_A against the engines' limits before anything is traced
(_geometry.choose_geometry): the C library's own choice (jaxmg_engine_check_*)
says which engine would run; an explicit T_A no engine takes is a ValueError
naming the reason, and a T_A left out narrows until one runs."""

import numpy as np
import pytest

from jaxmg._src import _geometry, _native


def test_the_cpu_library_names_its_engine():
    assert _native.engine_check("cpu", "syevd", 4, "float64", 4096, 2048) == (True, "lapack")


def test_the_check_rejects_unknown_ops():
    with pytest.raises(ValueError, match="unknown op"):
        _native.engine_check("cpu", "getrf", 1, "float64", 16, 4)


def test_jaxmg_engine_is_honoured_by_the_check(monkeypatch):
    monkeypatch.setenv("JAXMG_ENGINE", "cusolvermg")
    ok, why = _native.engine_check("cpu", "potrs", 1, "float64", 16, 4)
    assert not ok and "JAXMG_ENGINE" in why and "lapack" in why


def _mg_like(platform, op, nparts, dtype, n, tile, nodes=1, m=None, precision="exact"):
    """Like the CUDA platform on 4 GPUs of one node (_native.engine_choice's
    answer): syevd refuses T_A > 1024."""
    assert nodes == 1
    if op == "syevd" and tile > 1024:
        why = f"cusolvermg: T_A={tile} > 1024: cusolverMgSyevd rejects wider tiles"
        return _native.EngineChoice(False, why, 0)
    return _native.EngineChoice(True, "cusolvermg", tile)


@pytest.mark.parametrize("pad", [True, False])
def test_default_tile_narrows_to_what_an_engine_runs(monkeypatch, pad):
    monkeypatch.setattr(_native, "engine_choice", _mg_like)
    f64 = np.dtype(np.float64)
    g = _geometry.choose_geometry("syevd", 8192, 4, f64, None, pad, "CUDA")
    assert g.tile == 1024 and g.rp == 2048
    g = _geometry.choose_geometry("potrs", 8192, 4, f64, None, pad, "CUDA")
    assert g.tile == 2048
    g = _geometry.choose_geometry("syevd", 12000, 4, f64, None, pad, "CUDA")
    assert g.tile <= 1024 and g.r % g.tile == 0


def test_explicit_tile_no_engine_takes_is_a_value_error(monkeypatch):
    monkeypatch.setattr(_native, "engine_choice", _mg_like)
    f64 = np.dtype(np.float64)
    with pytest.raises(ValueError, match="T_A=2048 cannot run.*> 1024"):
        _geometry.choose_geometry("syevd", 8192, 4, f64, 2048, True, "CUDA")
    assert _geometry.choose_geometry("syevd", 8192, 4, f64, 1024, True, "CUDA").tile == 1024


def test_the_check_takes_a_s_rows_for_an_m_x_n_a():
    """M rides beside N (None: a square A); an op of a square A takes no
    other M."""
    assert _native.engine_check("cpu", "qr", 4, "float64", 16, 4, m=64) == (True, "lapack")
    assert _native.engine_check("cpu", "potrs", 4, "float64", 16, 4, m=16) == (True, "lapack")
    with pytest.raises(ValueError, match="potrs takes a square A: M=64 for N=16"):
        _native.engine_check("cpu", "potrs", 4, "float64", 16, 4, m=64)


# 2^31 + 4 rows: past LAPACK's int, divisible by the 4 devices.
PAST_INT = 2 ** 31 + 4


@pytest.mark.parametrize("op,method", [("qr", None), ("least_squares", None), ("gesvd", None),
                                       ("polar", "svd"), ("polar", "qdwh")])
def test_an_a_past_lapack_s_int_is_refused_before_tracing(mesh, op, method):
    """An M x N A whose M passes LAPACK's 32-bit int: the LAPACK engines
    refuse it in the check asked before tracing (a ValueError from lowering
    the op on abstract arrays, nothing allocated or run), naming the op, M,
    N and the limit; N alone would pass, and so would M = 2^31 - 4. polar's
    QDWH (its default) is refused for the QRs of its (M + N) x N stacked
    matrix, its SVD method for gesvd's."""
    import functools

    import jax
    import jaxmg
    from jax.sharding import NamedSharding, PartitionSpec as P

    kwargs = {} if method is None else {"method": method}
    fn = functools.partial(getattr(jaxmg, op), mesh=mesh, **kwargs)

    def lower(m):
        a = jax.ShapeDtypeStruct((m, 4), np.float32, sharding=NamedSharding(mesh, P("x", None)))
        args = (a,)
        if op == "least_squares":
            args += (jax.ShapeDtypeStruct((m, 1), np.float32, sharding=NamedSharding(mesh, P())),)
        return jax.jit(fn).lower(*args)

    solver = "gesvd" if op == "gesvd" or method == "svd" else "qr"
    rows = PAST_INT + 4 if method == "qdwh" else PAST_INT  # QDWH's [√c X; I]
    what = "the QR of a" if solver == "qr" else "a"
    with pytest.raises(ValueError, match=(
            rf"jaxmg\.{op}: no engine runs {what} {rows} x 4 float32 .*"
            rf"{solver} float32 M={rows} N=4 .*lapack: {solver} of a {rows} x 4 A: "
            r"M and N must fit LAPACK's 32-bit int \(at most 2147483647\)")):
        lower(PAST_INT)
    if method != "svd":  # memory_estimate answers for the default method
        with pytest.raises(ValueError, match=rf"{solver} of a {rows} x 4 A: M and N must fit"):
            jaxmg.memory_estimate(op, (PAST_INT, 4), np.float32, mesh)
    assert _native.engine_check("cpu", solver, 4, "float32", 4, 4, m=PAST_INT - 8) == (
        True, "lapack")


def test_the_workspace_query_takes_a_s_rows_too():
    """memory_estimate's query of the engine (jmg_engine_workspace) asks
    for the same M x N problem: LAPACK cannot tell qr's workspace (only
    potrs's and lu_solve's), and an M past its int is no engine's."""
    work, note = _native.workspace("cpu", "qr", 4, "float32", 4, 4, m=64)
    assert work is None and note.startswith("lapack: ")
    assert "the engine cannot tell the workspace of qr" in note
    with pytest.raises(ValueError, match=rf"memory_estimate: .*qr float32 M={PAST_INT} N=4"):
        _native.workspace("cpu", "qr", 4, "float32", 4, 4, m=PAST_INT)
