"""The table of bad inputs (bad_inputs.py) on CPU devices, for the two CPU
engines: lapack (the leader model) and lapack-local (the local model, as
cuSOLVERMp runs). A NaN or an Inf anywhere in A gives every op status -1
and NaN outputs, without raising; lu_solve of a singular A gives the first
zero pivot. The same table runs on GPUs in tests/gpu/test_gpu_bad_inputs.py."""

import numpy as np
import pytest
import jax

import bad_inputs as bi
import jaxmg_testing as jt

ENGINES = ("lapack", "lapack-local")
# (N, T_A) on 4 devices: 16 in tiles of 2; 20 pads each shard of 5 to 8.
SIZES = {"exact": (16, 2), "padded": (20, 4)}


@pytest.fixture(params=ENGINES)
def engine(request, monkeypatch):
    monkeypatch.setenv("JAXMG_ENGINE", request.param)
    return request.param


def _skip_unless_runs(engine, op, dtype, n, T_A):
    ok, why = bi.engine_runs(engine, op, "cpu", 4, dtype, n, T_A)
    if not ok:
        # Only gesvd, which has no routine in the local model, may get here
        # (qr, least_squares and polar over qr have lapack-local's).
        assert op == "gesvd" and engine == "lapack-local", why
        pytest.skip(f"{engine} has no {op}: {why}")


# Which bad entry, in which dtype and size: every entry in float64 on exact
# shards (nan_imag is complex's); in complex64 and on padded shards (the padding is filled in by the
# library, so the check must look past it) the entries that differ there
# (an imaginary NaN, either triangle, the diagonal). The check is one step
# before any engine (exec/finite.c), so every op meets every row.
NONFINITE_ROWS = (
    [(np.float64, "exact", case) for case in bi.NONFINITE if case != "nan_imag"]
    + [(np.complex64, "exact", "nan_imag"), (np.complex64, "exact", "nan_upper"),
       (np.float64, "padded", "nan_lower"), (np.float64, "padded", "inf_diag"),
       (np.complex64, "padded", "neg_inf_upper")])


@pytest.mark.parametrize("op", bi.OPS)
@pytest.mark.parametrize(
    "dtype,size,case", NONFINITE_ROWS,
    ids=[f"{'f64' if d == np.float64 else 'c64'}-{s}-{c}" for d, s, c in NONFINITE_ROWS])
def test_nonfinite_a(mesh, rng, engine, dtype, op, case, size):
    n, T_A = SIZES[size]
    _skip_unless_runs(engine, op, dtype, n, T_A)
    bi.check_nonfinite(op, case, dtype, mesh, n, T_A, rng)


@pytest.mark.parametrize("case", bi.SINGULAR)
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_singular_lu_solve(mesh, rng, engine, dtype, case):
    bi.check_singular(case, dtype, mesh, 16, 2, rng)


def test_a_finite_matrix_still_solves(mesh, rng, engine):
    """The check lets a finite A through: the same call as the table's with
    a good A solves it (status 0, a small residual)."""
    n = 16
    a = jt.make_hpd(rng, n, np.float64)
    b = jt.make_rhs(rng, n, 3, np.float64)
    status, out = bi.run_op("potrs", a, mesh, 2, rng, b)
    assert status == 0
    assert jt.solve_backward_error(a, out["x"], b) < jt.tol(np.float64, n)
    sign, logdet = np.linalg.slogdet(a)
    assert sign > 0 and abs(float(out["logdet"]) - logdet) < 1e-10 * max(1.0, abs(logdet))
