"""jaxmg.potri: the inverse of a Hermitian positive definite A, on 4 CPU devices."""

import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import jaxmg
import jaxmg_testing as jt

SPECS = (P("x", None),)

# As in test_potrs: shard sizes 2, 5, 9, 16; T_A 1, 2, 3, 5 and one above
# every shard size; padded where the shard size is not a multiple of T_A.
SIZES = [(n, t) for n in (8, 20, 36, 64) for t in (1, 2, 3, 5, 1000)]


def _check_inverse(mesh, a, ainv, dtype):
    n = a.shape[0]
    assert ainv.shape == (n, n)
    assert np.dtype(ainv.dtype) == np.dtype(dtype)
    jt.assert_finite(ainv)
    jt.assert_sharded_like(ainv, mesh, P("x", None))
    t = jt.tol(dtype, n)
    res = jt.inverse_residual(a, ainv)
    assert res < t, f"||A A^-1 - I|| / (||A|| ||A^-1||) = {res:.3e}"
    inv = jt.to_ref(ainv)
    # Both triangles are filled, and the result is Hermitian.
    herm = jt.fro(inv - inv.conj().T) / jt.fro(inv)
    assert herm < t, f"inverse not Hermitian: {herm:.3e}"
    ref = np.linalg.inv(jt.to_ref(a))
    cond = np.linalg.cond(jt.to_ref(a))
    lower = jt.fro(np.tril(inv, -1) - np.tril(ref, -1)) / jt.fro(np.tril(ref, -1))
    assert lower < cond * t, f"strictly lower triangle off by {lower:.3e}"
    rel = jt.fro(inv - ref) / jt.fro(ref)
    assert rel < cond * t, f"||A^-1 - inv(A)|| / ||inv(A)|| = {rel:.3e} (cond {cond:.1f})"


@pytest.mark.parametrize("n,T_A", SIZES, ids=[f"N{n}-T{t}" for n, t in SIZES])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_potri_grid(mesh, hpd, dtype, n, T_A):
    a = hpd(n, dtype)
    ainv, status = jaxmg.potri(jt.shard_rows(a, mesh), T_A, mesh, SPECS, return_status=True)
    jt.assert_status_ok(status)
    _check_inverse(mesh, a, ainv, dtype)


@pytest.mark.parametrize("n,T_A", [(200, 7), (200, 25), (192, 1000)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=["f64", "c64"])
def test_potri_larger(mesh, hpd, dtype, n, T_A):
    a = hpd(n, dtype)
    ainv = jaxmg.potri(jt.shard_rows(a, mesh), T_A, mesh, SPECS)
    _check_inverse(mesh, a, ainv, dtype)


@pytest.mark.parametrize("specs", [(P("x", None),), P("x", None), (P("x"),)],
                         ids=["tuple", "bare-spec", "short-spec"])
def test_potri_in_specs_forms(mesh, hpd, specs):
    a = hpd(20, np.float32)
    _check_inverse(mesh, a, jaxmg.potri(jt.shard_rows(a, mesh), 2, mesh, specs), np.float32)


def test_potri_pad_false_when_no_padding_needed(mesh, hpd):
    a = jt.shard_rows(hpd(24, np.complex128), mesh)
    x0 = jaxmg.potri(a, 3, mesh, SPECS, pad=False)
    x1 = jaxmg.potri(a, 3, mesh, SPECS, pad=True)
    _check_inverse(mesh, np.asarray(a), x0, np.complex128)
    np.testing.assert_allclose(np.asarray(x0), np.asarray(x1), rtol=1e-12)


@pytest.mark.parametrize("T_A", [5, 6], ids=["padded", "unpadded"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
def test_potri_reads_only_upper_triangle(mesh, hpd, rng, dtype, T_A):
    n = 24
    a = hpd(n, dtype)
    garbage = jt.random_matrix(rng, (n, n), dtype) * 100
    a_upper = (np.triu(a) + np.tril(garbage, -1)).astype(dtype)
    _check_inverse(mesh, a, jaxmg.potri(jt.shard_rows(a_upper, mesh), T_A, mesh, SPECS), dtype)


def test_potri_unsharded_input(mesh, hpd):
    a = hpd(16, np.complex64)
    _check_inverse(mesh, a, jaxmg.potri(a, 2, mesh, SPECS), np.complex64)


def test_potri_diagonal_exact(mesh):
    n = 16
    d = np.arange(1, n + 1, dtype=np.float64)
    ainv = jaxmg.potri(jt.shard_rows(np.diag(d), mesh), 3, mesh, SPECS)
    np.testing.assert_allclose(np.asarray(ainv), np.diag(1 / d), rtol=1e-14, atol=0)


# --- not positive definite -------------------------------------------------------


@pytest.mark.parametrize("k", [0, 5, 6, 13, 23])
@pytest.mark.parametrize("T_A", [5, 6, 4, 2], ids=["T5-padded", "T6", "T4-padded", "T2"])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_potri_not_positive_definite_identity(mesh, dtype, T_A, k):
    n = 24
    a = np.eye(n, dtype=dtype)
    a[k, k] = -1
    ainv, status = jaxmg.potri(jt.shard_rows(a, mesh), T_A, mesh, SPECS, return_status=True)
    assert int(status) == k + 1
    assert ainv.shape == (n, n)
    assert np.isnan(np.asarray(ainv)).all(), "A^-1 must be all NaN when A is not positive definite"


@pytest.mark.parametrize("k", [0, 7, 19, 35])
@pytest.mark.parametrize("T_A", [5, 3], ids=["T5-padded", "T3"])
def test_potri_not_positive_definite_dense(mesh, hpd, T_A, k):
    n = 36
    a = hpd(n, np.float64)
    a[k, k] = -1.0
    ainv, status = jaxmg.potri(jt.shard_rows(a, mesh), T_A, mesh, SPECS, return_status=True)
    assert int(status) == k + 1
    assert np.isnan(np.asarray(ainv)).all()


def test_potri_not_positive_definite_without_status_is_nan(mesh):
    a = np.eye(8, dtype=np.complex64)
    a[6, 6] = -2
    assert np.isnan(np.asarray(jaxmg.potri(jt.shard_rows(a, mesh), 2, mesh, SPECS))).all()
