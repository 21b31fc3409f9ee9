"""Derivatives and vmap of potrs, potri and syevd on 4 CPU devices.

check_grads (finite differences against forward and reverse mode) takes
every op to second order here on a mesh with Auto axes. That is this file's
choice, not a limit: the plain forms run the ctx forms' local cores inside
their own shard_map and differentiate on Explicit meshes too
(test_mesh_derivatives.py runs check_grads on both kinds). Gradients of
scalar losses are also checked under Explicit axes, against the same loss
through jnp.linalg on the Hermitian matrix of a's upper triangle (the matrix
the ops read).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

import jaxmg
import jaxmg_testing as jt
from jaxmg_testing import herm

SPEC = (P("x", None),)
DTYPES = [np.float64, np.complex128]
# check_grads compares with central differences of step 1e-4 (its default
# for float64): their error, not ours, sets this tolerance.
GRAD_TOL = 2e-5
IDS = ["f64", "c128"]




def weights(n, dtype):
    w = np.arange(n * n, dtype=np.float64).reshape(n, n) / (n * n)
    return (w + 1j * w[::-1]).astype(dtype) if jt.is_complex(dtype) else w.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("T_A", [3, 5], ids=["exact", "padded"])
def test_check_grads_potrs_in_a_and_b(auto_mesh, hpd, rhs, dtype, T_A):
    n = 12
    a, b = hpd(n, dtype), rhs(n, 2, dtype)
    f = lambda a, b: jaxmg.potrs(a, b, T_A, auto_mesh, SPEC)  # noqa: E731
    check_grads(f, (a, b), order=2, modes=("fwd", "rev"), atol=GRAD_TOL, rtol=GRAD_TOL)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("T_A", [3, 5], ids=["exact", "padded"])
def test_check_grads_potri(auto_mesh, hpd, dtype, T_A):
    a = hpd(12, dtype)
    check_grads(lambda a: jaxmg.potri(a, T_A, auto_mesh, SPEC), (a,), order=2,
                modes=("fwd", "rev"), atol=GRAD_TOL, rtol=GRAD_TOL)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("T_A", [3, 5], ids=["exact", "padded"])
def test_check_grads_syevd(auto_mesh, hermitian, dtype, T_A):
    """Eigenvalues to second order; eigenvectors through a gauge-invariant
    function (their phases are arbitrary): V sin(w) V^H."""
    a = hermitian(12, dtype)
    w_only = lambda a: jaxmg.syevd(a, T_A, auto_mesh, SPEC, return_eigenvectors=False)  # noqa: E731
    check_grads(w_only, (a,), order=2, modes=("fwd", "rev"), atol=GRAD_TOL, rtol=GRAD_TOL)

    def function_of_a(a):
        w, v = jaxmg.syevd(a, T_A, auto_mesh, SPEC)
        return (v * jnp.sin(w)) @ jnp.conj(v).T

    check_grads(function_of_a, (a,), order=1, modes=("fwd", "rev"), atol=GRAD_TOL, rtol=GRAD_TOL)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_grads_match_jnp_linalg_under_explicit_axes(mesh, hpd, rhs, dtype):
    n = 16
    a, b = hpd(n, dtype), rhs(n, 3, dtype)
    wa, wb = weights(n, dtype), weights(n, dtype)[:, :3]
    ours = {
        "potrs": lambda a, b: jnp.real(jnp.sum(wb * jaxmg.potrs(a, b, 3, mesh, SPEC))),
        "potri": lambda a, b: jnp.real(jnp.sum(wa * jaxmg.potri(a, 5, mesh, SPEC))),
        # Under Explicit axes a product contracting V's sharded columns
        # needs V laid out first: the user's call, as here.
        "syevd": lambda a, b: _eigh_loss(*_replicated(jaxmg.syevd(a, 4, mesh, SPEC))),
    }
    reference = {
        "potrs": lambda a, b: jnp.real(jnp.sum(wb * jnp.linalg.solve(herm(a), b))),
        "potri": lambda a, b: jnp.real(jnp.sum(wa * jnp.linalg.inv(herm(a)))),
        "syevd": lambda a, b: _eigh_loss(*jnp.linalg.eigh(herm(a))),
    }
    for name in ours:
        with jax.set_mesh(mesh):
            got = jax.jit(jax.grad(ours[name], argnums=(0, 1), allow_int=True))(a, b)
        want = jax.grad(reference[name], argnums=(0, 1))(a, b)
        for g, r in zip(got, want):
            err = np.linalg.norm(np.asarray(g) - np.asarray(r)) / max(np.linalg.norm(r), 1e-300)
            assert err < 1e-10 or np.linalg.norm(r) == 0, (name, err)


def _replicated(arrays):
    return tuple(jax.sharding.reshard(x, P()) for x in arrays)


def _eigh_loss(w, v):
    # Gauge invariant: eigenvector phases are arbitrary.
    weights = jnp.exp(-jnp.arange(w.shape[0], dtype=w.dtype))
    return jnp.sum(jnp.sin(w)) + jnp.sum(jnp.abs((v * weights) @ jnp.conj(v).T) ** 2)


def test_minsr_step_gradient_matches_jnp(mesh, rng):
    """A minSR-like step: T = X X^T + lambda I built inside the jitted
    function, v = T^-1 e, loss through X^T v; gradient in X."""
    ns, npar = 16, 40
    x = rng.standard_normal((ns, npar))
    e = rng.standard_normal((ns, 1))

    def step(x, solve):
        t = x @ x.T + 1e-2 * jnp.eye(ns)
        v = solve(t, e)
        return jnp.sum((x.T @ v) ** 2)

    ours = lambda x: step(x, lambda t, e: jaxmg.potrs(t, e, 4, mesh, SPEC))  # noqa: E731
    ref = lambda x: step(x, jnp.linalg.solve)  # noqa: E731
    with jax.set_mesh(mesh):
        g = jax.jit(jax.grad(ours))(x)
    r = jax.grad(ref)(x)
    assert np.linalg.norm(np.asarray(g) - np.asarray(r)) / np.linalg.norm(r) < 1e-10


@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=["f32", "c128"])
def test_vmap_equals_unbatched_calls(mesh, hpd, hermitian, rhs, dtype):
    n, batch = 12, 3
    a = np.stack([hpd(n, dtype) for _ in range(batch)])
    h = np.stack([hermitian(n, dtype) for _ in range(batch)])
    b = np.stack([rhs(n, 2, dtype) for _ in range(batch)])
    xs = jax.vmap(lambda a, b: jaxmg.potrs(a, b, 3, mesh, SPEC))(a, b)
    invs = jax.vmap(lambda a: jaxmg.potri(a, 5, mesh, SPEC))(a)
    ws, vs = jax.vmap(lambda a: jaxmg.syevd(a, 3, mesh, SPEC))(h)
    tol = jt.tol(dtype, n)
    for i in range(batch):
        assert jt.solve_backward_error(a[i], xs[i], b[i]) < tol
        np.testing.assert_allclose(np.asarray(xs[i]),
                                   np.asarray(jaxmg.potrs(a[i], b[i], 3, mesh, SPEC)),
                                   rtol=tol * 10, atol=tol * 10)
        assert jt.inverse_residual(a[i], invs[i]) < tol
        assert jt.eig_residual(h[i], ws[i], vs[i]) < tol
        assert jt.orthogonality(vs[i]) < tol


def test_vmap_status_and_nan_per_matrix(mesh):
    """A batch with one matrix that is not positive definite: that one alone
    gets its status and NaN."""
    n = 12
    good = np.eye(n) * 2
    bad = np.eye(n)
    bad[7, 7] = -1
    a = np.stack([good, bad, good])
    x, status = jax.vmap(lambda a: jaxmg.potrs(a, np.ones((n, 1)), 3, mesh, SPEC,
                                               return_status=True))(a)
    assert np.asarray(status).tolist() == [0, 8, 0]
    x = np.asarray(x)
    assert np.allclose(x[0], 0.5) and np.allclose(x[2], 0.5)
    assert np.all(np.isnan(x[1]))


def test_gradient_of_a_failed_solve_is_nan_not_an_error(mesh):
    """NaN in every entry the result depends on: the upper triangle (the
    strict lower one is never read, its derivative is exactly 0)."""
    n = 12
    bad = np.eye(n)
    bad[3, 3] = -1
    loss = lambda a: jnp.sum(jaxmg.potrs(a, jnp.ones((n, 1)), 3, mesh, SPEC))  # noqa: E731
    with jax.set_mesh(mesh):
        g = np.asarray(jax.grad(loss)(bad))
    upper = np.triu(np.ones((n, n), bool))
    assert np.all(np.isnan(g[upper]))
    assert np.all(g[~upper] == 0)
