"""jaxmg.eigh_generalized (sygvd) on GPUs: A v = λ B v with B Hermitian
positive definite, on every engine that has it, against SciPy's
eigh(a, b) in float64 by residuals (||A V - B V diag(w)|| / (||A|| ||V||),
||V^H B V - I||, never eigenvectors element by element), on fresh random
inputs:
  - cusolverdn on one GPU (every dtype, several sizes and T_A);
  - cusolverdn-gather on 2 and 4 GPUs (the default there: cuSOLVERMg has no
    sygvd), skipped below;
  - cusolvermp (JAXMG_ENGINE=cusolvermp) on 1, 2 and 4 GPUs where
    jaxmg.cusolvermp_available() says it runs;
  - a B that is not positive definite: status N + k and NaN on every engine
    above; a NaN in B: status -1 and NaN;
  - JAXMG_ENGINE=cusolvermg refused, naming the engine's missing sygvd;
  - check_grads (order 1) through cusolverdn on one GPU; the time beside JAX's
    own Cholesky + triangular solves + eigh composed by hand (printed, not
    asserted).

Skipped without GPUs (conftest)."""

from __future__ import annotations

import time

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import scipy.linalg  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import jaxmg_testing as jt  # noqa: E402
from gpu_env import gpu_devices  # noqa: E402

GPUS = gpu_devices()
pytestmark = pytest.mark.skipif(not GPUS, reason="no GPU")

import jaxmg  # noqa: E402

ROWS = (P("x", None),)


def _mp_available() -> tuple[bool, str]:
    if not GPUS:
        return False, "no GPU"
    return jaxmg.cusolvermp_available()


MP_OK, MP_WHY = _mp_available()


def _mesh(k: int) -> Mesh:
    if len(GPUS) < k:
        pytest.skip(f"needs {k} GPUs, {len(GPUS)} here")
    return Mesh(np.array(GPUS[:k]), ("x",))


def _on(mesh: Mesh, x: np.ndarray) -> jax.Array:
    return jax.device_put(x, NamedSharding(mesh, P("x", None)))


def _tol(dtype, n: int) -> float:
    return 50 * jt.eps(dtype) * np.sqrt(n) * 10


def _pencil(rng, n, dtype):
    return jt.make_hermitian(rng, n, dtype), jt.make_hpd(rng, n, dtype)


def _check(a, b, w, v, dtype):
    n = a.shape[0]
    t = _tol(dtype, n)
    wn = np.asarray(w, np.float64)
    assert np.all(np.isfinite(wn)) and np.all(np.diff(wn) >= 0)
    ar, br = jt.to_ref(a), jt.to_ref(b)
    ref = scipy.linalg.eigh(ar, br, eigvals_only=True)
    err = np.max(np.abs(wn - ref)) / np.max(np.abs(ref))
    assert err < t, f"eigenvalues: {err:.3e}"
    if v is None:
        return
    vr = jt.to_ref(v)
    assert np.all(np.isfinite(vr))
    res = jt.fro(ar @ vr - (br @ vr) * wn[None, :]) / (np.linalg.norm(ar, 2)
                                                       * np.linalg.norm(vr, 2))
    assert res < t, f"||A V - B V diag(w)|| / (||A|| ||V||) = {res:.3e}"
    orth = jt.fro(vr.conj().T @ br @ vr - np.eye(n))
    assert orth < t * np.sqrt(n), f"||V^H B V - I|| = {orth:.3e}"


def _run_engine(mesh, rng, dtype, n, T_A, engine):
    a, b = _pencil(rng, n, dtype)
    w, v, status = jaxmg.eigh_generalized(_on(mesh, a), _on(mesh, b), T_A, mesh, ROWS,
                                          return_status=True)
    assert int(status) == 0, f"status {int(status)} on {engine}"
    _check(a, b, w, v, dtype)
    w2 = jaxmg.eigh_generalized(_on(mesh, a), _on(mesh, b), T_A, mesh, ROWS,
                                return_eigenvectors=False)
    _check(a, b, w2, None, dtype)
    bad = np.array(b)
    bad[n // 2, n // 2] = -100 * abs(b[0, 0])
    w, v, status = jaxmg.eigh_generalized(_on(mesh, a), _on(mesh, bad), T_A, mesh, ROWS,
                                          return_status=True)
    assert int(status) == n + n // 2 + 1, f"status {int(status)} on {engine}"
    assert np.all(np.isnan(np.asarray(w))) and np.all(np.isnan(np.asarray(v)))
    nan_b = np.array(b)
    nan_b[1, n - 1] = np.nan
    w, status = jaxmg.eigh_generalized(_on(mesh, a), _on(mesh, nan_b), T_A, mesh, ROWS,
                                       return_eigenvectors=False, return_status=True)
    assert int(status) == -1 and np.all(np.isnan(np.asarray(w)))


def _rng(request):
    import zlib
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


# 600 / 128: a padded last tile, as 1000 / 128 was, at a fifth of the cost
# (1000 took 8-13 s a dtype on 2 H200, docs/gpu-runs/2026-11-27-s17-h200x4/call3,
# most of it SciPy's float64 references and residuals on the host).
@pytest.mark.parametrize("n,T_A", [(256, 64), (500, None), (600, 128)])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_cusolverdn_one_gpu(request, monkeypatch, dtype, n, T_A):
    monkeypatch.delenv("JAXMG_ENGINE", raising=False)
    _run_engine(_mesh(1), _rng(request), dtype, n, T_A, "cusolverdn")


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=["f64", "c64"])
def test_gather_several_gpus(request, monkeypatch, dtype, k):
    monkeypatch.delenv("JAXMG_ENGINE", raising=False)
    _run_engine(_mesh(k), _rng(request), dtype, 512, 64, "cusolverdn-gather")


@pytest.mark.skipif(not MP_OK, reason=f"cuSOLVERMp not available: {MP_WHY}")
@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_cusolvermp(request, monkeypatch, dtype, k):
    """cuSOLVERMp's sygvd (cusolverMpSygvd after a Cholesky of B's copy,
    csrc/engine/cusolvermp/sygvd.c), on one rank as on several, against
    SciPy, with the statuses of a B that is not positive definite and of a
    NaN in B."""
    if len(GPUS) < k:
        pytest.skip(f"needs {k} GPUs")
    monkeypatch.setenv("JAXMG_ENGINE", "cusolvermp")
    _run_engine(_mesh(k), _rng(request), dtype, 512, 64, "cusolvermp")


def test_cusolvermg_is_refused(request, monkeypatch):
    mesh = _mesh(1)
    monkeypatch.setenv("JAXMG_ENGINE", "cusolvermg")
    a, b = _pencil(_rng(request), 64, np.float64)
    with pytest.raises(ValueError, match="no sygvd"):
        jaxmg.eigh_generalized(_on(mesh, a), _on(mesh, b), 16, mesh, ROWS)


def test_check_grads_one_gpu(request, monkeypatch):
    monkeypatch.delenv("JAXMG_ENGINE", raising=False)
    mesh = _mesh(1)
    rng = _rng(request)
    n, dtype = 16, np.complex128
    q, _ = np.linalg.qr(jt.random_matrix(rng, (n, n), dtype))
    a = ((q * np.arange(1, n + 1)) @ q.conj().T)
    a = ((a + a.conj().T) / 2).astype(dtype)
    x = jt.random_matrix(rng, (n, n), dtype)
    b = (np.eye(n) + 0.1 * x @ x.conj().T / n)
    b = ((b + b.conj().T) / 2).astype(dtype)

    def f(a, b):
        w, v = jaxmg.eigh_generalized(a, b, 4, mesh, ROWS)
        return w, (v * jnp.sin(w)) @ jnp.conj(v).T

    check_grads(jax.jit(f), (_on(mesh, a), _on(mesh, b)), order=1, modes=("fwd", "rev"),
                atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize("n", [2048])
def test_time_beside_jax_composition(request, monkeypatch, n):
    """Printed, not asserted (issue 28 item 7 asks >= 0.95x; the lead's
    benchmark rows decide): eigh_generalized vs JAX's Cholesky, triangular
    solves and eigh composed by hand, float64 on one GPU. N = 2048 (was
    4096, whose SciPy float64 reference and residuals cost the host 8x
    2048's; never reached in the s17 runs): T_A left out on one GPU past
    1024 rows still; the timing that decides is bench/'s."""
    monkeypatch.delenv("JAXMG_ENGINE", raising=False)
    mesh = _mesh(1)
    a, b = _pencil(_rng(request), n, np.float64)
    ad, bd = _on(mesh, a), _on(mesh, b)

    @jax.jit
    def by_hand(a, b):
        chol = jnp.linalg.cholesky(b)
        c = jax.scipy.linalg.solve_triangular(chol, a, lower=True)
        c = jax.scipy.linalg.solve_triangular(chol, jnp.conj(c).T, lower=True)
        w, y = jnp.linalg.eigh(c)
        return w, jax.scipy.linalg.solve_triangular(jnp.conj(chol).T, y, lower=False)

    mine = jax.jit(lambda a, b: jaxmg.eigh_generalized(a, b, None, mesh, ROWS))

    def best(fn):
        jax.block_until_ready(fn(ad, bd))
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(ad, bd))
            times.append(time.perf_counter() - t0)
        return min(times)

    t_jax, t_mine = best(by_hand), best(mine)
    print(f"\nsygvd N={n} float64 one GPU: jaxmg {t_mine:.4f} s, JAX composed {t_jax:.4f} s, "
          f"ratio (JAX / jaxmg) {t_jax / t_mine:.2f}")
    w, v = mine(ad, bd)
    _check(a, b, w, v, np.float64)
