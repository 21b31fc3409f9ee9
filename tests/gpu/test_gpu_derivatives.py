"""Derivatives, vmap and array-only calls on GPUs (the CPU suite's
tests/python/test_derivatives.py and test_inferred_layout.py, smaller).
Skipped without GPUs."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
from jax.test_util import check_grads  # noqa: E402


def _gpus() -> list:
    try:
        return jax.devices("gpu")
    except RuntimeError:
        return []


GPUS = _gpus()
pytestmark = pytest.mark.skipif(not GPUS, reason="no GPU")

import jaxmg  # noqa: E402

SPEC = (P("x", None),)


def _hpd(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, n))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((n, n))
    return (x @ x.conj().T / n + np.eye(n)).astype(dtype)


def _separated(n, dtype, seed=0):
    """A Hermitian matrix with eigenvalues 1, 2, ..., n: check_grads' central
    differences (step 1e-4) are accurate only when eigenvalue gaps are large
    against the step (a Wishart matrix's smallest eigenvalues are not)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, n))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((n, n))
    q, _ = np.linalg.qr(x)
    return ((q * np.arange(1, n + 1)) @ q.conj().T).astype(dtype)


def _herm(a):
    strict = jnp.triu(a, 1)
    return strict + jnp.conj(strict).T + jnp.diag(jnp.real(jnp.diagonal(a))).astype(a.dtype)


@pytest.fixture(scope="module")
def auto_mesh():
    return Mesh(np.array(GPUS), ("x",), axis_types=(AxisType.Auto,))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
def test_check_grads_all_ops(auto_mesh, dtype):
    n = 16 * len(GPUS)
    a = _hpd(n, dtype)
    b = np.random.default_rng(1).standard_normal((n, 2)).astype(dtype)
    tol = 2e-5
    check_grads(lambda a, b: jaxmg.potrs(a, b, 8, auto_mesh, SPEC), (a, b), order=2,
                modes=("fwd", "rev"), atol=tol, rtol=tol)
    check_grads(lambda a: jaxmg.potri(a, 8, auto_mesh, SPEC), (a,), order=1,
                modes=("fwd", "rev"), atol=tol, rtol=tol)
    check_grads(lambda a: jaxmg.syevd(a, 8, auto_mesh, SPEC, return_eigenvectors=False),
                (_separated(n, dtype),), order=1, modes=("fwd", "rev"), atol=tol, rtol=tol)


def test_grad_matches_jnp_on_gpus(auto_mesh):
    n = 128 * len(GPUS)
    a = _hpd(n, np.float64)
    b = np.random.default_rng(2).standard_normal((n, 1))
    ours = jax.grad(lambda a, b: jnp.sum(jaxmg.potrs(a, b, 64, auto_mesh, SPEC) ** 2),
                    argnums=(0, 1))(a, b)
    ref = jax.grad(lambda a, b: jnp.sum(jnp.linalg.solve(_herm(a), b) ** 2), argnums=(0, 1))(a, b)
    for g, r in zip(ours, ref):
        assert float(jnp.linalg.norm(g - r) / jnp.linalg.norm(r)) < 1e-10


def test_vmap_and_array_only_calls():
    n = 64 * len(GPUS)
    mesh = Mesh(np.array(GPUS), ("x",))
    a = np.stack([_hpd(n, np.float64, s) for s in range(3)])
    b = np.ones((3, n, 1))
    xs = jax.vmap(lambda a, b: jaxmg.potrs(a, b, 32, mesh, SPEC))(a, b)
    for i in range(3):
        np.testing.assert_allclose(np.asarray(xs[i]), np.linalg.solve(a[i], b[i]), rtol=1e-10)
    placed = jax.device_put(a[0], NamedSharding(mesh, P("x", None)))
    x = jaxmg.potrs(placed, b[0])
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(a[0], b[0]), rtol=1e-10)
