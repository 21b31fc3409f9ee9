"""jaxmg.lu_solve: A x = b for a general nonsingular A (LU with partial
pivoting), on 4 CPU devices: every dtype, several N and T_A (padded and
not), strongly non-symmetric matrices (a solve with Aᵀ or conj(A) instead of
A fails them), singular, near-singular and badly scaled matrices,
derivatives (check_grads, forward and reverse), vmap, the shard_map form and
misuse."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

import jaxmg
import jaxmg_testing as jt

SPECS = (P("x", None), P(None, None))
SPEC = (P("x", None),)
GRAD_TOL = 2e-5

# (N, T_A): shards of 2, 5, 9, 16 rows; padded where the shard is not a
# multiple of min(T_A, shard).
SIZES = [(n, t) for n in (8, 20, 36, 64) for t in (1, 3, 5, 1000)]


general = jt.make_general  # a random, strongly non-symmetric matrix


def check_solution(mesh, a, b, x, dtype, c=None):
    n = a.shape[0]
    assert x.shape == b.shape
    assert np.dtype(x.dtype) == np.dtype(dtype)
    jt.assert_finite(x)
    jt.assert_replicated(x, mesh)
    tol = jt.tol(dtype, n) if c is None else jt.tol(dtype, n, c)
    be = jt.solve_backward_error(a, x, b)
    assert be < tol, f"backward error {be:.3e}"
    ref = np.linalg.solve(jt.to_ref(a), jt.to_ref(b))
    cond = np.linalg.cond(jt.to_ref(a))
    fe = jt.fro(jt.to_ref(x) - ref) / jt.fro(ref)
    assert fe < cond * tol, f"forward error {fe:.3e} (cond {cond:.1f})"


@pytest.mark.parametrize("n,T_A", SIZES, ids=[f"N{n}-T{t}" for n, t in SIZES])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_lu_solve_grid(mesh, rng, dtype, n, T_A):
    a = general(rng, n, dtype)
    b = jt.make_rhs(rng, n, 3, dtype)
    x, status = jaxmg.lu_solve(jt.shard_rows(a, mesh), jt.replicate(b, mesh), T_A, mesh,
                               SPECS, return_status=True)
    jt.assert_status_ok(status)
    check_solution(mesh, a, b, x, dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
def test_lu_solve_is_not_a_transposed_or_conjugated_solve(mesh, rng, dtype):
    """x solves A x = b, and visibly not Aᵀ x = b or conj(A) x = b."""
    n = 24
    a = general(rng, n, dtype, scale_upper=10.0)
    b = jt.make_rhs(rng, n, 2, dtype)
    x = np.asarray(jaxmg.lu_solve(jt.shard_rows(a, mesh), b, 5, mesh, SPECS))
    assert jt.solve_backward_error(a, x, b) < jt.tol(dtype, n)
    assert jt.solve_backward_error(a.T, x, b) > 1e-3
    if jt.is_complex(dtype):
        assert jt.solve_backward_error(np.conj(a), x, b) > 1e-3


@pytest.mark.parametrize("nrhs", [None, 1, 17], ids=["b1d", "nrhs1", "nrhs17"])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_lu_solve_rhs_shapes(mesh, rng, dtype, nrhs):
    n = 20
    a, b = general(rng, n, dtype), jt.make_rhs(rng, n, nrhs, dtype)
    x = jaxmg.lu_solve(jt.shard_rows(a, mesh), jt.replicate(b, mesh), 2, mesh, SPECS)
    check_solution(mesh, a, b, x, dtype)


def test_lu_solve_needs_pivoting(mesh, rng):
    """A zero leading entry (and zero leading blocks of every tile): only a
    pivoted LU solves it."""
    n = 16
    a = general(rng, n, np.float64)
    a[np.arange(n), np.arange(n)] = 0.0
    b = jt.make_rhs(rng, n, 2, np.float64)
    x, status = jaxmg.lu_solve(jt.shard_rows(a, mesh), b, 2, mesh, SPECS, return_status=True)
    jt.assert_status_ok(status)
    check_solution(mesh, a, b, x, np.float64)


def test_lu_solve_permutation_matrix_exact(mesh):
    n = 12
    perm = np.roll(np.arange(n), 5)
    a = np.eye(n)[perm]
    b = np.arange(1.0, n + 1)
    x = jaxmg.lu_solve(jt.shard_rows(a, mesh), b, 3, mesh, SPECS)
    np.testing.assert_array_equal(np.asarray(x), np.linalg.solve(a, b))


@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=["f64", "c64"])
def test_lu_solve_badly_scaled(mesh, rng, dtype):
    """Rows and columns scaled over 1e-6 .. 1e6: LU with partial pivoting
    stays backward stable, whatever the condition number."""
    n = 20
    d = np.logspace(-6, 6, n)
    a = (d[:, None] * general(rng, n, np.complex128 if jt.is_complex(dtype) else np.float64)
         * d[::-1][None, :]).astype(dtype)
    b = jt.make_rhs(rng, n, 2, dtype)
    x, status = jaxmg.lu_solve(jt.shard_rows(a, mesh), b, 5, mesh, SPECS, return_status=True)
    jt.assert_status_ok(status)
    jt.assert_finite(x)
    # Backward error against each row's own scale.
    a_r, x_r, b_r = jt.to_ref(a), jt.to_ref(x), jt.to_ref(b)
    res = np.abs(a_r @ x_r - b_r).max(axis=1)
    scale = np.abs(a_r).max(axis=1) * np.abs(x_r).max() + np.abs(b_r).max(axis=1)
    assert (res / scale).max() < jt.tol(dtype, n)


def test_lu_solve_near_singular(mesh, rng):
    """cond ~ 1e12: status 0, small backward error (the forward error is
    cond times larger, as for LAPACK)."""
    n = 20
    u, _ = np.linalg.qr(rng.standard_normal((n, n)))
    v, _ = np.linalg.qr(rng.standard_normal((n, n)))
    a = (u * np.logspace(0, -12, n)) @ v.T
    b = jt.make_rhs(rng, n, 1, np.float64)
    x, status = jaxmg.lu_solve(jt.shard_rows(a, mesh), b, 5, mesh, SPECS, return_status=True)
    jt.assert_status_ok(status)
    jt.assert_finite(x)
    assert jt.solve_backward_error(a, x, b) < jt.tol(np.float64, n)


@pytest.mark.parametrize("k", [0, 4, 5, 13, 23])
@pytest.mark.parametrize("T_A", [5, 4, 2], ids=["T5-padded", "T4-padded", "T2"])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_lu_solve_singular_gives_first_zero_pivot_and_nan(mesh, rng, dtype, T_A, k):
    """Row k of A zero: the engine factors Aᵀ, whose column k stays zero, so
    U(k+1, k+1) is the first zero pivot: status k+1, x NaN, no exception."""
    n = 24
    a = general(rng, n, dtype)
    a[k, :] = 0
    b = jt.make_rhs(rng, n, 2, dtype)
    x, status = jaxmg.lu_solve(jt.shard_rows(a, mesh), b, T_A, mesh, SPECS, return_status=True)
    assert int(status) == k + 1
    assert x.shape == (n, 2)
    assert np.isnan(np.asarray(x)).all()


def test_lu_solve_singular_without_status_is_nan(mesh):
    a = np.ones((8, 8))
    x = jaxmg.lu_solve(jt.shard_rows(a, mesh), np.ones(8), 2, mesh, SPECS)
    assert np.isnan(np.asarray(x)).all()


def test_lu_solve_unsharded_inputs_and_one_spec(mesh, rng):
    a, b = general(rng, 20, np.complex128), jt.make_rhs(rng, 20, 2, np.complex128)
    x = jaxmg.lu_solve(a, b, 3, mesh, SPEC)
    check_solution(mesh, a, b, x, np.complex128)


def test_lu_solve_pad_false(mesh, rng):
    a, b = general(rng, 36, np.float64), jt.make_rhs(rng, 36, 2, np.float64)
    x = jaxmg.lu_solve(jt.shard_rows(a, mesh), b, 3, mesh, SPECS, pad=False)
    check_solution(mesh, a, b, x, np.float64)
    with pytest.raises(ValueError, match="lu_solve"):
        jaxmg.lu_solve(jt.shard_rows(a, mesh), b, 5, mesh, SPECS, pad=False)


# --- derivatives and vmap ------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
@pytest.mark.parametrize("T_A", [3, 5], ids=["exact", "padded"])
def test_check_grads_lu_solve_in_a_and_b(auto_mesh, rng, dtype, T_A):
    n = 12
    a = general(rng, n, dtype) + 3 * np.eye(n, dtype=dtype)
    b = jt.make_rhs(rng, n, 2, dtype)
    f = lambda a, b: jaxmg.lu_solve(a, b, T_A, auto_mesh, SPEC)  # noqa: E731
    check_grads(f, (a, b), order=2, modes=("fwd", "rev"), atol=GRAD_TOL, rtol=GRAD_TOL)


@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
def test_lu_solve_grads_match_jnp_linalg_solve(mesh, rng, dtype):
    """Under Explicit axes and jit: the gradient of a scalar loss in a and b
    equals jnp.linalg.solve's."""
    n = 16
    a, b = general(rng, n, dtype), jt.make_rhs(rng, n, 3, dtype)
    w = jt.make_rhs(rng, n, 3, dtype)
    ours = lambda a, b: jnp.real(jnp.sum(w * jaxmg.lu_solve(a, b, 3, mesh, SPEC)))  # noqa: E731
    ref = lambda a, b: jnp.real(jnp.sum(w * jnp.linalg.solve(a, b)))  # noqa: E731
    with jax.set_mesh(mesh):
        got = jax.jit(jax.grad(ours, argnums=(0, 1)))(a, b)
    want = jax.grad(ref, argnums=(0, 1))(a, b)
    for g, r in zip(got, want):
        err = np.linalg.norm(np.asarray(g) - np.asarray(r)) / np.linalg.norm(r)
        assert err < 1e-10, err


@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=["f32", "c128"])
def test_lu_solve_vmap_equals_unbatched_calls(mesh, rng, dtype):
    n, batch = 12, 3
    a = np.stack([general(rng, n, dtype) for _ in range(batch)])
    b = np.stack([jt.make_rhs(rng, n, 2, dtype) for _ in range(batch)])
    xs = jax.vmap(lambda a, b: jaxmg.lu_solve(a, b, 3, mesh, SPEC))(a, b)
    for i in range(batch):
        assert jt.solve_backward_error(a[i], xs[i], b[i]) < jt.tol(dtype, n)
        np.testing.assert_allclose(np.asarray(xs[i]),
                                   np.asarray(jaxmg.lu_solve(a[i], b[i], 3, mesh, SPEC)),
                                   rtol=10 * jt.eps(dtype), atol=10 * jt.eps(dtype))


# --- the shard_map form ----------------------------------------------------------


@pytest.mark.parametrize("check_vma", [True, False], ids=["vma", "no-vma"])
@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=["f32", "c128"])
def test_lu_solve_shardmap_ctx(mesh, rng, dtype, check_vma):
    n = 20
    a, b = general(rng, n, dtype), jt.make_rhs(rng, n, 2, dtype)

    def body(a_local, b):
        return jaxmg.lu_solve_shardmap_ctx(a_local, b, 2)

    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("x", None), P(None, None)),
                              out_specs=(P(None, None), P(None)), check_vma=check_vma))
    x, status = f(jt.shard_rows(a, mesh), jt.replicate(b, mesh))
    assert int(status[0]) == 0
    assert jt.solve_backward_error(a, x, b) < jt.tol(dtype, n)


@pytest.mark.parametrize("check_vma", [True, False], ids=["vma", "no-vma"])
def test_lu_solve_shardmap_ctx_grads_match_jnp(mesh, rng, check_vma):
    n = 12
    a, b = general(rng, n, np.complex128), jt.make_rhs(rng, n, 2, np.complex128)
    w = jt.make_rhs(rng, n, 2, np.complex128)

    def body(a_local, b):
        return jaxmg.lu_solve_shardmap_ctx(a_local, b, 3)[0]

    f = jax.shard_map(body, mesh=mesh, in_specs=(P("x", None), P(None, None)),
                      out_specs=P(None, None), check_vma=check_vma)
    ours = lambda a, b: jnp.real(jnp.sum(w * f(a, b)))  # noqa: E731
    ref = lambda a, b: jnp.real(jnp.sum(w * jnp.linalg.solve(a, b)))  # noqa: E731
    with jax.set_mesh(mesh):
        got = jax.jit(jax.grad(ours, argnums=(0, 1)))(jt.shard_rows(a, mesh),
                                                      jt.replicate(b, mesh))
    want = jax.grad(ref, argnums=(0, 1))(a, b)
    for g, r in zip(got, want):
        err = np.linalg.norm(np.asarray(g) - np.asarray(r)) / np.linalg.norm(r)
        assert err < 1e-10, err


# --- misuse: clear errors before anything runs ----------------------------------


def test_lu_solve_misuse(mesh):
    a = np.eye(8)
    with pytest.raises(ValueError, match="lu_solve: a must be square"):
        jaxmg.lu_solve(np.ones((8, 4)), np.ones(8), 2, mesh, SPECS)
    with pytest.raises(ValueError, match="lu_solve: b has 6 rows"):
        jaxmg.lu_solve(a, np.ones(6), 2, mesh, SPECS)
    with pytest.raises(TypeError, match="lu_solve"):
        jaxmg.lu_solve(a, np.ones(8, np.float32), 2, mesh, SPECS)
    with pytest.raises(TypeError, match="lu_solve"):
        jaxmg.lu_solve(a.astype(np.int32), np.ones(8, np.int32), 2, mesh, SPECS)
    # lu_solve_shardmap_ctx outside a shard_map is JAXMg 1.x's global-level
    # form now, as potrs's and syevd's: test_v1_api.py checks it.
