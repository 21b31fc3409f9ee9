"""Helpers shared by the Python tests: random Hermitian inputs, tolerances in
units of the dtype's epsilon, residuals against a float64/complex128 NumPy
reference, and sharding checks.

Accuracy is judged by backward errors and residuals (as LAPACK's and BLIS's
testers do), never by comparing eigenvectors element by element.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

DTYPES = (np.float32, np.float64, np.complex64, np.complex128)
DTYPE_IDS = ("f32", "f64", "c64", "c128")

# Residuals are allowed C * N * eps: generous enough for any correct
# backward-stable algorithm at these sizes, tight enough that a wrong answer
# (a permuted tile, a missing conjugation, a dropped triangle) fails by orders
# of magnitude.
TOL_C = 30.0


def herm(a):
    """The Hermitian matrix of a's upper triangle with a real diagonal (what
    the ops read, so what their derivatives are taken with respect to),
    written out independently of jaxmg's own."""
    import jax.numpy as jnp

    strict = jnp.triu(a, 1)
    return strict + jnp.conj(strict).T + jnp.diag(jnp.real(jnp.diagonal(a))).astype(a.dtype)


def second_group_shifted(a_local, n: int, group_axis: str = "S", row_axis: str = "T"):
    """Inside a shard_map whose rows are sharded over row_axis: the rows of A
    (n x n) for group 0 of group_axis, those of 2A + I for every other group,
    so that the groups solve different matrices."""
    import jax.numpy as jnp

    s = jax.lax.axis_index(group_axis)
    t = jax.lax.axis_index(row_axis)
    rows = jnp.arange(a_local.shape[0]) + t * a_local.shape[0]
    eye_rows = jax.nn.one_hot(rows, n, dtype=a_local.dtype)
    return jnp.where(s == 0, a_local, 2 * a_local + eye_rows)


def is_complex(dtype) -> bool:
    return np.issubdtype(np.dtype(dtype), np.complexfloating)


def eps(dtype) -> float:
    """Machine epsilon of the dtype's precision (complex64 -> float32's)."""
    return float(np.finfo(np.dtype(dtype)).eps)


def tol(dtype, n: int, c: float = TOL_C) -> float:
    return c * max(n, 1) * eps(dtype)


def ref_dtype(dtype):
    """The dtype the NumPy reference computes in."""
    return np.complex128 if is_complex(dtype) else np.float64


def to_ref(x) -> np.ndarray:
    """An array (JAX or NumPy) as a float64/complex128 NumPy array."""
    x = np.asarray(x)
    return x.astype(ref_dtype(x.dtype))


def random_matrix(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Standard normal entries (complex: unit variance, real and imaginary
    parts each of variance 1/2), in float64/complex128."""
    if is_complex(dtype):
        z = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        return z / np.sqrt(2.0)
    return rng.standard_normal(shape)


def _exactly_hermitian(a: np.ndarray, dtype) -> np.ndarray:
    """Casts to ``dtype`` keeping A exactly Hermitian (real diagonal, mirrored
    triangles bit for bit), so that "only the upper triangle is read" cannot
    change the answer."""
    a = np.triu(a) + np.triu(a, 1).conj().T
    a = a.astype(dtype)
    a[np.diag_indices_from(a)] = a.diagonal().real
    return a


def make_hpd(rng: np.random.Generator, n: int, dtype, shift: float = 1.0) -> np.ndarray:
    """A random well-conditioned symmetric/Hermitian positive definite matrix,
    X X^H / n + shift * I (condition number about 5 for shift 1), dense (not
    diagonal), in ``dtype``."""
    x = random_matrix(rng, (n, n), dtype)
    a = x @ x.conj().T / n + shift * np.eye(n)
    return _exactly_hermitian(a, dtype)


def make_hermitian(rng: np.random.Generator, n: int, dtype) -> np.ndarray:
    """A random symmetric/Hermitian matrix, indefinite."""
    x = random_matrix(rng, (n, n), dtype)
    return _exactly_hermitian((x + x.conj().T) / 2, dtype)


def make_separated(rng: np.random.Generator, n: int, dtype) -> np.ndarray:
    """A Hermitian matrix with eigenvalues 1, 2, ..., n: check_grads' central
    differences (step 1e-4) are accurate only when eigenvalue gaps are large
    against the step (a random matrix's close eigenvalues are not)."""
    x = rng.standard_normal((n, n))
    if np.issubdtype(dtype, np.complexfloating):
        x = x + 1j * rng.standard_normal((n, n))
    q, _ = np.linalg.qr(x)
    return ((q * np.arange(1, n + 1)) @ q.conj().T).astype(dtype)


def make_general(rng: np.random.Generator, n: int, dtype,
                 scale_upper: float = 4.0) -> np.ndarray:
    """A random, strongly non-symmetric matrix: standard normal entries, the
    strict upper triangle times scale_upper (complex: both parts random)."""
    a = random_matrix(rng, (n, n), dtype)
    a = a * np.where(np.triu(np.ones((n, n)), 1) > 0, scale_upper, 1.0)
    return a.astype(dtype)


def make_rhs(rng: np.random.Generator, n: int, nrhs, dtype) -> np.ndarray:
    """b of shape (n,) when ``nrhs`` is None, else (n, nrhs)."""
    shape = (n,) if nrhs is None else (n, nrhs)
    return random_matrix(rng, shape, dtype).astype(dtype)


def shard_rows(x, mesh, axis="x"):
    return jax.device_put(x, NamedSharding(mesh, P(axis, None)))


def replicate(x, mesh):
    return jax.device_put(x, NamedSharding(mesh, P(*([None] * np.ndim(x)))))


def fro(x) -> float:
    return float(np.linalg.norm(x))


def assert_finite(*arrays) -> None:
    for x in arrays:
        x = np.asarray(x)
        bad = np.size(x) - int(np.isfinite(x).sum())
        assert bad == 0, f"{bad} of {np.size(x)} output elements are not finite"


def assert_status_ok(status) -> None:
    assert status.shape == ()
    assert np.dtype(status.dtype) == np.int32
    assert int(status) == 0, f"status {int(status)}, expected 0"


# --- residuals, all in the reference precision --------------------------------


def solve_backward_error(a, x, b) -> float:
    """||A x - b|| / (||A|| ||x||)."""
    a, x, b = to_ref(a), to_ref(x), to_ref(b)
    return fro(a @ x - b) / (fro(a) * fro(x))


def inverse_residual(a, ainv) -> float:
    """||A A^-1 - I|| / (||A|| ||A^-1||)."""
    a, ainv = to_ref(a), to_ref(ainv)
    return fro(a @ ainv - np.eye(a.shape[0])) / (fro(a) * fro(ainv))


def eig_residual(a, w, v) -> float:
    """||A V - V diag(w)|| / ||A||."""
    a, w, v = to_ref(a), np.asarray(w, np.float64), to_ref(v)
    return fro(a @ v - v * w[None, :]) / fro(a)


def orthogonality(v) -> float:
    """||V^H V - I||."""
    v = to_ref(v)
    return fro(v.conj().T @ v - np.eye(v.shape[1]))


# --- shardings -------------------------------------------------------------------


def assert_replicated(x, mesh) -> None:
    assert x.sharding.is_fully_replicated, f"not replicated: {x.sharding}"
    assert set(x.sharding.device_set) == set(mesh.devices.flat)


def assert_sharded_like(x, mesh, spec) -> None:
    """x's sharding is NamedSharding(mesh, spec), up to equivalence (e.g.
    P("x", None) and P("x") are the same layout)."""
    want = NamedSharding(mesh, spec)
    assert x.sharding.is_equivalent_to(want, x.ndim), (
        f"sharding {x.sharding}, expected {want}"
    )


def minsr_ising_chain(nk: Any, steps: int = 30) -> tuple[float, float]:
    """minSR (NetKet's VMC_SR, use_ntk=True, jaxmg's distributed Cholesky) on
    the 8-site transverse-field Ising chain (h = 1), an RBM, 512 samples:
    (the last step's energy, the exact ground-state energy). nk: the netket
    module (imported by the caller, which skips without it)."""
    graph = nk.graph.Chain(8, pbc=True)
    hilbert = nk.hilbert.Spin(0.5, N=8)
    ham = nk.operator.IsingJax(hilbert, graph, h=1.0)
    exact = float(nk.exact.lanczos_ed(ham)[0])
    vstate = nk.vqs.MCState(nk.sampler.MetropolisLocal(hilbert, n_chains=16),
                            nk.models.RBM(alpha=1, param_dtype=float),
                            n_samples=512, seed=0, sampler_seed=1)
    driver = nk.driver.VMC_SR(ham, nk.optimizer.Sgd(learning_rate=0.05),
                              variational_state=vstate, diag_shift=0.01, use_ntk=True,
                              linear_solver=nk.optimizer.solver.cholesky_distributed)
    log = nk.logging.RuntimeLog()
    driver.run(steps, out=log, show_progress=False)
    return float(np.asarray(log.data["Energy"]["Mean"]).real[-1]), exact
