"""potrs's log-determinant (issue 16, item 2): ``potrs(...,
return_logdet=True)`` and the ctx form at the global level, against
numpy.linalg.slogdet for every dtype, eagerly and under jit; NaN with the
status on a matrix that is not positive definite; derivatives (d logdet =
tr(A^-1 dA)) by check_grads on an Auto and an Explicit mesh, and against
jnp.linalg.slogdet of the Hermitian matrix the op reads."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P
from jax.test_util import check_grads

import jaxmg
import jaxmg_testing as jt
from jaxmg_testing import herm

N = 16
SPEC = (P("x", None), P(None, None))
GRAD_TOL = 2e-5  # check_grads' central differences (test_derivatives.py)


def slogdet(a) -> float:
    sign, value = np.linalg.slogdet(jt.to_ref(a))
    assert abs(sign - 1) < 1e-6
    return float(value)


@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
@pytest.mark.parametrize("T_A", [2, 3], ids=["exact", "padded"])
def test_logdet_against_numpy_eager_and_jit(mesh, hpd, rhs, dtype, T_A):
    a, b = hpd(N, dtype), rhs(N, 2, dtype)
    want = slogdet(a)
    real = np.finfo(dtype).dtype
    x, logdet = jaxmg.potrs(a, b, T_A, mesh, SPEC, return_logdet=True)
    assert logdet.shape == () and logdet.dtype == real
    jt.assert_replicated(logdet, mesh)
    np.testing.assert_allclose(float(logdet), want, rtol=10 * jt.eps(dtype) * N)
    assert jt.solve_backward_error(a, x, b) < jt.tol(dtype, N)
    x2, logdet2, status = jax.jit(
        lambda a, b: jaxmg.potrs(a, b, T_A, mesh, SPEC, return_status=True,
                                 return_logdet=True))(a, b)
    jt.assert_status_ok(status)
    np.testing.assert_allclose(float(logdet2), want, rtol=10 * jt.eps(dtype) * N)
    # The ctx form at the global level: (a_work, x, logdet, status).
    A = jax.device_put(a, NamedSharding(mesh, P("x", None)))
    out = jaxmg.potrs_shardmap_ctx(A, jnp.asarray(b), T_A, return_logdet=True)
    assert len(out) == 4 and out[0].shape == (N, N)
    jt.assert_status_ok(out[3])
    np.testing.assert_allclose(float(out[2]), want, rtol=10 * jt.eps(dtype) * N)


@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_logdet_is_nan_when_not_positive_definite(mesh, hermitian, rhs, dtype):
    a, b = hermitian(N, dtype), rhs(N, None, dtype)
    x, logdet, status = jaxmg.potrs(a, b, 4, mesh, SPEC, return_status=True,
                                    return_logdet=True)
    assert int(status) > 0
    assert np.isnan(float(logdet)) and np.isnan(np.asarray(x)).all()


# (mesh kind, dtype, T_A): each kind meets each dtype and each tiling once.
LOGDET_GRAD_CASES = [("auto", np.float64, 2), ("auto", np.complex128, 3),
                     ("explicit", np.complex128, 2), ("explicit", np.float64, 3)]


@pytest.mark.parametrize(
    "mesh_kind,dtype,T_A", LOGDET_GRAD_CASES,
    ids=[f"{'exact' if t == 2 else 'padded'}-{'f64' if d == np.float64 else 'c128'}-{k}"
         for k, d, t in LOGDET_GRAD_CASES])
def test_check_grads_logdet(request, mesh_kind, hpd, rhs, dtype, T_A):
    mesh = request.getfixturevalue("auto_mesh" if mesh_kind == "auto" else "mesh")
    a, b = hpd(12, dtype), rhs(12, 2, dtype)
    logdet = lambda a: jaxmg.potrs(a, b, T_A, mesh, SPEC, return_logdet=True)[1]  # noqa: E731
    check_grads(logdet, (a,), order=2, modes=("fwd", "rev"), atol=GRAD_TOL, rtol=GRAD_TOL)
    # x and logdet together, in a and b.
    both = lambda a, b: jaxmg.potrs(a, b, T_A, mesh, SPEC, return_logdet=True)  # noqa: E731
    check_grads(both, (a, b), order=1, modes=("fwd", "rev"), atol=GRAD_TOL, rtol=GRAD_TOL)
    # The gradient against jnp.linalg's, of the matrix the op reads.
    with jax.set_mesh(mesh):
        ours = jax.jit(jax.grad(logdet))(a)
    ref = jax.grad(lambda a: jnp.linalg.slogdet(herm(a))[1])(jnp.asarray(a))
    np.testing.assert_allclose(np.asarray(ours), np.asarray(ref), rtol=1e-10, atol=1e-12)


def test_vmap_of_the_logdet_equals_unbatched_calls(mesh, hpd, rhs):
    """vmap maps a batch of matrices through the solver one after the other;
    each gets its own log-determinant and status."""
    dtype = np.float64
    a = jnp.stack([hpd(N, dtype), 2 * hpd(N, dtype)])
    b = jnp.stack([rhs(N, 1, dtype), rhs(N, 1, dtype)])
    xs, logdets, statuses = jax.vmap(
        lambda a, b: jaxmg.potrs(a, b, 3, mesh, SPEC, return_status=True,
                                 return_logdet=True))(a, b)
    assert logdets.shape == (2,) and statuses.shape == (2,)
    for i in range(2):
        jt.assert_status_ok(statuses[i])
        np.testing.assert_allclose(float(logdets[i]), slogdet(a[i]),
                                   rtol=10 * jt.eps(dtype) * N)
        assert jt.solve_backward_error(a[i], xs[i], b[i]) < jt.tol(dtype, N)
