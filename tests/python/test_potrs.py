"""jaxmg.potrs: A x = b for Hermitian positive definite A, on 4 CPU devices."""

import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import jaxmg
import jaxmg_testing as jt

SPECS = (P("x", None), P(None, None))

# (N, T_A). Shard sizes N/4 = 2, 5, 9, 16; T_A 1, 2, 3, 5 and 1000 (above any
# shard size: reduced to one tile per device). Padded where the shard size is
# not a multiple of min(T_A, shard): (20, 2), (20, 3), (36, 2), (36, 5),
# (64, 3), (64, 5).
SIZES = [(n, t) for n in (8, 20, 36, 64) for t in (1, 2, 3, 5, 1000)]


def _check_solution(mesh, a, b, x, dtype):
    n = a.shape[0]
    assert x.shape == b.shape
    assert np.dtype(x.dtype) == np.dtype(dtype)
    jt.assert_finite(x)
    jt.assert_replicated(x, mesh)
    be = jt.solve_backward_error(a, x, b)
    assert be < jt.tol(dtype, n), f"backward error {be:.3e}"
    # Forward error, bounded by cond(A) times the backward error.
    ref = np.linalg.solve(jt.to_ref(a), jt.to_ref(b))
    cond = np.linalg.cond(jt.to_ref(a))
    fe = jt.fro(jt.to_ref(x) - ref) / jt.fro(ref)
    assert fe < cond * jt.tol(dtype, n), f"forward error {fe:.3e} (cond {cond:.1f})"


@pytest.mark.parametrize("n,T_A", SIZES, ids=[f"N{n}-T{t}" for n, t in SIZES])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_potrs_grid(mesh, hpd, rhs, dtype, n, T_A):
    a = hpd(n, dtype)
    b = rhs(n, 3, dtype)
    x, status = jaxmg.potrs(jt.shard_rows(a, mesh), jt.replicate(b, mesh), T_A, mesh,
                            SPECS, return_status=True)
    jt.assert_status_ok(status)
    _check_solution(mesh, a, b, x, dtype)


RHS_SIZES = [(20, 2), (24, 5), (16, 4)]


@pytest.mark.parametrize("nrhs", [None, 1, 3, 17], ids=["b1d", "nrhs1", "nrhs3", "nrhs17"])
@pytest.mark.parametrize("n,T_A", RHS_SIZES, ids=[f"N{n}-T{t}" for n, t in RHS_SIZES])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_potrs_rhs_shapes(mesh, hpd, rhs, dtype, n, T_A, nrhs):
    """b (N,) gives x (N,); b (N, k) gives x (N, k), for any k."""
    a = hpd(n, dtype)
    b = rhs(n, nrhs, dtype)
    x = jaxmg.potrs(jt.shard_rows(a, mesh), jt.replicate(b, mesh), T_A, mesh, SPECS)
    _check_solution(mesh, a, b, x, dtype)


def test_potrs_1d_b_matches_2d(mesh, hpd, rhs):
    a = jt.shard_rows(hpd(24, np.float64), mesh)
    b = rhs(24, None, np.float64)
    x1 = jaxmg.potrs(a, b, 5, mesh, SPECS)
    x2 = jaxmg.potrs(a, b[:, None], 5, mesh, SPECS)
    assert x1.shape == (24,) and x2.shape == (24, 1)
    np.testing.assert_allclose(np.asarray(x1), np.asarray(x2)[:, 0], rtol=1e-13)


@pytest.mark.parametrize("n,T_A", [(200, 7), (200, 25), (192, 1000)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=["f64", "c64"])
def test_potrs_larger(mesh, hpd, rhs, dtype, n, T_A):
    a = hpd(n, dtype)
    b = rhs(n, 4, dtype)
    x = jaxmg.potrs(jt.shard_rows(a, mesh), jt.replicate(b, mesh), T_A, mesh, SPECS)
    _check_solution(mesh, a, b, x, dtype)


@pytest.mark.parametrize("specs", [(P("x", None),), (P("x", None), P(None, None)),
                                   P("x", None), (P("x"),), (P("x", None), P())],
                         ids=["one-spec", "two-specs", "bare-spec", "short-spec", "P()-for-b"])
def test_potrs_in_specs_forms(mesh, hpd, rhs, specs):
    """The seed README passes one spec; the tutorial two. Both work."""
    a, b = hpd(20, np.float64), rhs(20, 2, np.float64)
    x = jaxmg.potrs(jt.shard_rows(a, mesh), jt.replicate(b, mesh), 3, mesh, specs)
    _check_solution(mesh, a, b, x, np.float64)


@pytest.mark.parametrize("n,T_A", [(36, 3), (16, 4), (24, 2)])
def test_potrs_pad_false_when_no_padding_needed(mesh, hpd, rhs, n, T_A):
    """pad=False is fine when N/devices is a multiple of T_A, and agrees with pad=True."""
    a, b = jt.shard_rows(hpd(n, np.float64), mesh), rhs(n, 2, np.float64)
    x0 = jaxmg.potrs(a, b, T_A, mesh, SPECS, pad=False)
    x1 = jaxmg.potrs(a, b, T_A, mesh, SPECS, pad=True)
    _check_solution(mesh, np.asarray(a), b, x0, np.float64)
    np.testing.assert_allclose(np.asarray(x0), np.asarray(x1), rtol=1e-12)


@pytest.mark.parametrize("T_A", [5, 6], ids=["padded", "unpadded"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
def test_potrs_reads_only_upper_triangle(mesh, hpd, rhs, rng, dtype, T_A):
    """Documented: only A's upper triangle is read. Garbage in the strictly
    lower triangle must not change x."""
    n = 24
    a = hpd(n, dtype)
    b = rhs(n, 2, dtype)
    garbage = jt.random_matrix(rng, (n, n), dtype) * 100
    a_upper = (np.triu(a) + np.tril(garbage, -1)).astype(dtype)
    x = jaxmg.potrs(jt.shard_rows(a_upper, mesh), b, T_A, mesh, SPECS)
    _check_solution(mesh, a, b, x, dtype)


def test_potrs_unsharded_inputs(mesh, hpd, rhs):
    """NumPy inputs (not yet on the mesh) are placed as in_specs say."""
    a, b = hpd(20, np.complex128), rhs(20, 2, np.complex128)
    x = jaxmg.potrs(a, b, 2, mesh, SPECS)
    _check_solution(mesh, a, b, x, np.complex128)


def test_potrs_diagonal_exact(mesh):
    """A = diag(1..N), b = 1: x = 1/k (the seed README's example, float32)."""
    n = 12
    a = np.diag(np.arange(1, n + 1)).astype(np.float32)
    b = np.ones((n, 1), np.float32)
    x = jaxmg.potrs(jt.shard_rows(a, mesh), b, 3, mesh, (P("x", None),))
    np.testing.assert_allclose(np.asarray(x)[:, 0], 1.0 / np.arange(1, n + 1), rtol=1e-6)


# --- not positive definite: NaN and the failing leading minor, no exception ------


@pytest.mark.parametrize("k", [0, 5, 6, 13, 23])
@pytest.mark.parametrize("T_A", [5, 6, 4, 2], ids=["T5-padded", "T6", "T4-padded", "T2"])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_potrs_not_positive_definite_identity(mesh, dtype, T_A, k):
    """I with A[k, k] = -1: the leading minor of order k+1 fails, status k+1."""
    n = 24
    a = np.eye(n, dtype=dtype)
    a[k, k] = -1
    b = np.ones((n, 2), dtype)
    x, status = jaxmg.potrs(jt.shard_rows(a, mesh), b, T_A, mesh, SPECS, return_status=True)
    assert int(status) == k + 1
    assert x.shape == (n, 2)
    assert np.isnan(np.asarray(x)).all(), "x must be all NaN when A is not positive definite"


@pytest.mark.parametrize("k", [0, 7, 19, 35])
@pytest.mark.parametrize("T_A", [5, 3], ids=["T5-padded", "T3"])
def test_potrs_not_positive_definite_dense(mesh, hpd, rhs, T_A, k):
    """A dense SPD matrix with A[k, k] made negative: minors 1..k are untouched
    (still positive definite), the minor of order k+1 is not: status k+1."""
    n = 36
    a = hpd(n, np.complex128)
    a[k, k] = -1.0
    b = rhs(n, None, np.complex128)
    x, status = jaxmg.potrs(jt.shard_rows(a, mesh), b, T_A, mesh, SPECS, return_status=True)
    assert int(status) == k + 1
    assert x.shape == (n,)
    assert np.isnan(np.asarray(x)).all()


def test_potrs_not_positive_definite_without_status_is_nan(mesh):
    a = np.eye(8)
    a[3, 3] = 0.0  # singular: positive semi-definite only
    x = jaxmg.potrs(jt.shard_rows(a, mesh), np.ones(8), 2, mesh, SPECS)
    assert np.isnan(np.asarray(x)).all()
