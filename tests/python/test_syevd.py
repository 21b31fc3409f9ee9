"""jaxmg.syevd: eigenvalues and eigenvectors of a Hermitian A, on 4 CPU devices.

Eigenvectors are checked through ||A V - V diag(w)|| and ||V^H V - I||, never
element by element (they are unique only up to phase, and not at all within a
degenerate eigenspace).
"""

import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import jaxmg
import jaxmg_testing as jt

SPECS = (P("x", None),)

SIZES = [(n, t) for n in (8, 20, 36, 64) for t in (1, 2, 3, 5, 1000)]


def _real(dtype):
    return np.float32 if np.dtype(dtype) in (np.float32, np.complex64) else np.float64


def _check_eigenvalues(mesh, a, w, dtype):
    n = a.shape[0]
    assert w.shape == (n,)
    assert np.dtype(w.dtype) == np.dtype(_real(dtype)), f"w has dtype {w.dtype}"
    jt.assert_finite(w)
    jt.assert_replicated(w, mesh)
    wn = np.asarray(w, np.float64)
    assert np.all(np.diff(wn) >= 0), "eigenvalues are not in ascending order"
    ref = np.linalg.eigvalsh(jt.to_ref(a))
    scale = np.linalg.norm(jt.to_ref(a), 2)
    err = np.max(np.abs(wn - ref)) / scale
    assert err < jt.tol(dtype, n), f"max |w - eigvalsh(A)| / ||A|| = {err:.3e}"


def _check_eigenvectors(mesh, a, w, v, dtype):
    n = a.shape[0]
    assert v.shape == (n, n)
    assert np.dtype(v.dtype) == np.dtype(dtype)
    jt.assert_finite(v)
    jt.assert_sharded_like(v, mesh, P(None, "x"))
    t = jt.tol(dtype, n)
    res = jt.eig_residual(a, w, v)
    assert res < t, f"||A V - V diag(w)|| / ||A|| = {res:.3e}"
    orth = jt.orthogonality(v)
    assert orth < t, f"||V^H V - I|| = {orth:.3e}"


@pytest.mark.parametrize("n,T_A", SIZES, ids=[f"N{n}-T{t}" for n, t in SIZES])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_syevd_grid(mesh, hermitian, dtype, n, T_A):
    a = hermitian(n, dtype)  # indefinite: eigenvalues of both signs
    w, v, status = jaxmg.syevd(jt.shard_rows(a, mesh), T_A, mesh, SPECS, return_status=True)
    jt.assert_status_ok(status)
    _check_eigenvalues(mesh, a, w, dtype)
    _check_eigenvectors(mesh, a, w, v, dtype)


@pytest.mark.parametrize("n,T_A", [(20, 3), (24, 6), (36, 5)])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_syevd_positive_definite(mesh, hpd, dtype, n, T_A):
    a = hpd(n, dtype)
    w, v = jaxmg.syevd(jt.shard_rows(a, mesh), T_A, mesh, SPECS)
    _check_eigenvalues(mesh, a, w, dtype)
    _check_eigenvectors(mesh, a, w, v, dtype)
    assert float(w[0]) > 0


@pytest.mark.parametrize("n,T_A", [(200, 7), (200, 25), (192, 1000)])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=["f64", "c64"])
def test_syevd_larger(mesh, hermitian, dtype, n, T_A):
    a = hermitian(n, dtype)
    w, v = jaxmg.syevd(jt.shard_rows(a, mesh), T_A, mesh, SPECS)
    _check_eigenvalues(mesh, a, w, dtype)
    _check_eigenvectors(mesh, a, w, v, dtype)


@pytest.mark.parametrize("n,T_A", [(20, 3), (24, 5), (16, 4)])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_syevd_eigenvalues_only(mesh, hermitian, dtype, n, T_A):
    a = jt.shard_rows(hermitian(n, dtype), mesh)
    w = jaxmg.syevd(a, T_A, mesh, SPECS, return_eigenvectors=False)
    assert not isinstance(w, tuple)
    _check_eigenvalues(mesh, np.asarray(a), w, dtype)
    out = jaxmg.syevd(a, T_A, mesh, SPECS, return_eigenvectors=False, return_status=True)
    assert isinstance(out, tuple) and len(out) == 2
    w2, status = out
    jt.assert_status_ok(status)
    _check_eigenvalues(mesh, np.asarray(a), w2, dtype)


def test_syevd_return_forms(mesh, hermitian):
    a = jt.shard_rows(hermitian(24, np.float64), mesh)
    out = jaxmg.syevd(a, 5, mesh, SPECS)
    assert isinstance(out, tuple) and len(out) == 2
    out = jaxmg.syevd(a, 5, mesh, SPECS, return_status=True)
    assert isinstance(out, tuple) and len(out) == 3
    w, v, status = out
    assert w.shape == (24,) and v.shape == (24, 24) and status.shape == ()


@pytest.mark.parametrize("specs", [(P("x", None),), P("x", None), (P("x"),)],
                         ids=["tuple", "bare-spec", "short-spec"])
def test_syevd_in_specs_forms(mesh, hermitian, specs):
    a = hermitian(20, np.complex128)
    w, v = jaxmg.syevd(jt.shard_rows(a, mesh), 2, mesh, specs)
    _check_eigenvectors(mesh, a, w, v, np.complex128)


def test_syevd_pad_false_when_no_padding_needed(mesh, hermitian):
    a = jt.shard_rows(hermitian(24, np.float64), mesh)
    w0, v0 = jaxmg.syevd(a, 3, mesh, SPECS, pad=False)
    w1, _ = jaxmg.syevd(a, 3, mesh, SPECS, pad=True)
    _check_eigenvectors(mesh, np.asarray(a), w0, v0, np.float64)
    np.testing.assert_allclose(np.asarray(w0), np.asarray(w1), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("T_A", [5, 6], ids=["padded", "unpadded"])
@pytest.mark.parametrize("kind", ["identity", "repeated", "zero"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=["f32", "c128"])
def test_syevd_degenerate(mesh, rng, dtype, kind, T_A):
    """Degenerate spectra: the eigenvectors must still be orthonormal."""
    n = 24
    if kind == "identity":
        a = 3 * np.eye(n)
    elif kind == "zero":
        a = np.zeros((n, n))
    else:  # a random unitary similarity of diag(-1 x 8, 2 x 8, 5 x 8)
        q, _ = np.linalg.qr(jt.random_matrix(rng, (n, n), dtype))
        a = (q * np.repeat([-1.0, 2.0, 5.0], 8)) @ q.conj().T
    a = jt._exactly_hermitian(a, dtype)
    w, v = jaxmg.syevd(jt.shard_rows(a, mesh), T_A, mesh, SPECS)
    if kind == "zero":  # no scale to be relative to: exact zeros, orthonormal V
        assert np.all(np.asarray(w) == 0)
        jt.assert_finite(v)
        assert jt.orthogonality(v) < jt.tol(dtype, n)
    else:
        _check_eigenvalues(mesh, a, w, dtype)
        _check_eigenvectors(mesh, a, w, v, dtype)


@pytest.mark.parametrize("T_A", [5, 6], ids=["padded", "unpadded"])
def test_syevd_spectrum_far_from_zero(mesh, hermitian, T_A):
    """Padding's eigenpairs must sort after A's for any spectrum: all
    eigenvalues large and negative, and all large and positive."""
    n = 24
    for shift in (-1e4, 1e4):
        a = hermitian(n, np.float64) + shift * np.eye(n)
        w, v = jaxmg.syevd(jt.shard_rows(a, mesh), T_A, mesh, SPECS)
        _check_eigenvalues(mesh, a, w, np.float64)
        _check_eigenvectors(mesh, a, w, v, np.float64)


@pytest.mark.parametrize("T_A", [5, 6], ids=["padded", "unpadded"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
def test_syevd_reads_only_upper_triangle(mesh, hermitian, rng, dtype, T_A):
    """Documented: only A's upper triangle is read. Garbage in the strictly
    lower triangle must not change the result. (The garbage is of A's own
    magnitude: syevd's padding value is derived from whole rows, lower triangle
    included, and the eigensolver's errors scale with the padded matrix's norm,
    so much larger garbage costs accuracy when padding; see the arrow test.)"""
    n = 24
    a = hermitian(n, dtype)
    garbage = jt.random_matrix(rng, (n, n), dtype)
    a_upper = (np.triu(a) + np.tril(garbage, -1)).astype(dtype)
    w, v = jaxmg.syevd(jt.shard_rows(a_upper, mesh), T_A, mesh, SPECS)
    _check_eigenvalues(mesh, a, w, dtype)
    _check_eigenvectors(mesh, a, w, v, dtype)


@pytest.mark.parametrize("T_A", [6, 5], ids=["unpadded", "padded"])
def test_syevd_upper_triangle_only_arrow(mesh, T_A):
    """An "arrow" matrix (last row and column all ones, zero elsewhere) given by
    its upper triangle only, the lower one left zero, as the docs allow.
    Eigenvalues +-sqrt(N-1) and zeros; every upper-triangle row sums to 1, so
    a padding value derived from the rows of the given array (3) lies below
    sqrt(23) ~ 4.8."""
    n = 24
    arrow = np.zeros((n, n))
    arrow[-1, :] = arrow[:, -1] = 1.0
    arrow[-1, -1] = 0.0
    w, v = jaxmg.syevd(jt.shard_rows(np.triu(arrow), mesh), T_A, mesh, SPECS)
    _check_eigenvalues(mesh, arrow, w, np.float64)
    _check_eigenvectors(mesh, arrow, w, v, np.float64)
