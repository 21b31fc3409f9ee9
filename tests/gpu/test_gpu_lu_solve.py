"""lu_solve on GPUs: every dtype against NumPy-free residuals on the GPUs,
the transpose (a strongly non-symmetric A: x must solve A x = b, not
Aᵀ x = b), several tiles on one GPU through jaxmg's tiled LU
(JAXMG_ENGINE=cusolvermg), a singular A, derivatives against
jnp.linalg.solve. Skipped without GPUs; each test bounded by a wall-clock
check (the C library's rendezvous timeout bounds a hang)."""

from __future__ import annotations

import functools
import os
import time

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402


from gpu_env import gpu_devices  # noqa: E402

GPUS = gpu_devices()
pytestmark = pytest.mark.skipif(not GPUS, reason="no GPU")

import jaxmg  # noqa: E402

SPECS = (P("x", None), P(None, None))
DTYPES = [jnp.float32, jnp.float64, jnp.complex64, jnp.complex128]
EPS = {jnp.float32: 1.2e-7, jnp.float64: 2.2e-16, jnp.complex64: 1.2e-7, jnp.complex128: 2.2e-16}
BOUND_S = 300.0  # no single test here should come near this


@pytest.fixture(autouse=True)
def _bounded():
    t0 = time.monotonic()
    yield
    assert time.monotonic() - t0 < BOUND_S, "test took longer than its bound"


def _mesh() -> Mesh:
    return Mesh(np.array(GPUS), ("x",))


def _wide(dtype):
    return jnp.complex128 if jnp.issubdtype(dtype, jnp.complexfloating) else jnp.float64


@functools.partial(jax.jit, static_argnames=("n", "dtype", "sharding"))
def _make_general(key, n: int, dtype, sharding: NamedSharding) -> jax.Array:
    k1, k2 = jax.random.split(key)
    r = jax.random.normal(k1, (n, n), jnp.float64)
    if jnp.issubdtype(dtype, jnp.complexfloating):
        r = r + 1j * jax.random.normal(k2, (n, n), jnp.float64)
    r = r * jnp.where(jnp.triu(jnp.ones((n, n)), 1) > 0, 4.0, 1.0)
    return jax.lax.with_sharding_constraint(r.astype(dtype), sharding)


def _general(key, n: int, dtype, mesh: Mesh) -> jax.Array:
    """A random, strongly non-symmetric matrix (strict upper triangle 4x the
    rest), generated row-sharded on the GPUs (one compiled program for each
    size and dtype, where each call compiled its own)."""
    return _make_general(key, n=n, dtype=jnp.dtype(dtype),
                         sharding=NamedSharding(mesh, P("x", None)))


@functools.partial(jax.jit, static_argnames="transpose")
def _backward_error_of(a, x, b, transpose: bool = False) -> jax.Array:
    """||A x - b|| / (||A|| ||x||) (Aᵀ for A with ``transpose``) in float64
    (complex128), as one compiled program: op by op, the first case of
    each size compiled a dozen small programs (3-4.5 s for the first dtype
    of each size on 2 H200, docs/gpu-runs/2026-11-27-s17-h200x4/call3,
    against 1-1.5 s for the next)."""
    aw, bw, xw = (v.astype(_wide(a.dtype)) for v in (a, b, x))
    aw = aw.T if transpose else aw
    return jnp.linalg.norm(aw @ xw - bw) / (jnp.linalg.norm(aw) * jnp.linalg.norm(xw))


def _backward_error(a, x, b, transpose: bool = False) -> float:
    return float(_backward_error_of(a, x, b, transpose=transpose))


def _tol(dtype, n: int) -> float:
    return 50 * EPS[dtype] * np.sqrt(n)


def _solve_and_check(n, T_A, dtype, nrhs=3, seed=0):
    mesh = _mesh()
    a = _general(jax.random.PRNGKey(seed), n, dtype, mesh)
    b = jax.random.normal(jax.random.PRNGKey(seed + 1), (n, nrhs), jnp.float64).astype(dtype)
    x, status = jaxmg.lu_solve(a, b, T_A, mesh, SPECS, return_status=True)
    assert int(status) == 0
    assert bool(jnp.all(jnp.isfinite(x)))
    be = _backward_error(a, x, b)
    assert be < _tol(dtype, n), be
    # Not the transposed solve: a wrong transpose leaves a residual of O(1).
    assert _backward_error(a, x, b, transpose=True) > 1e-3


NAMES = dict(zip(DTYPES, ["f32", "f64", "c64", "c128"]))


def _every_dtype_then_two(first: tuple[int, int], *others: tuple[int, int]):
    """The parametrization of (n, T_A, dtype): every dtype at the first
    size, two dtypes at each other size, so that every dtype runs at a
    second size too: each dtype's routines and each size's tiling and
    padding are met, not every pair of them (the full grids of 12 took 26
    and 22 s on 2 H200, docs/gpu-runs/2026-11-27-s18 call2, each case
    mostly compiling its pair)."""
    pairs = [(DTYPES[0], DTYPES[3]), (DTYPES[1], DTYPES[2])]
    cases = [(*first, d) for d in DTYPES]
    cases += [(*size, d) for size, two in zip(others, pairs) for d in two]
    ids = [f"{n}-{t}-{NAMES[d]}" for n, t, d in cases]
    return pytest.mark.parametrize("n,T_A,dtype", cases, ids=ids)


@_every_dtype_then_two((1024, 256), (3000, 512), (4096, 1024))
def test_gpu_lu_solve_every_dtype(dtype, n, T_A):
    _solve_and_check(n, T_A, dtype)


@_every_dtype_then_two((1024, 128), (1000, 96), (2048, 256))
def test_gpu_lu_solve_tiled_lu(monkeypatch, dtype, n, T_A):
    """jaxmg's own tiled LU (engine/cusolvermg/cuda_lu.c) with several tiles
    per GPU, also on one GPU; (1000, 96) is padded."""
    monkeypatch.setenv("JAXMG_ENGINE", "cusolvermg")
    _solve_and_check(n, T_A, dtype)


@pytest.mark.parametrize("engine", [None, "cusolvermg"], ids=["default", "cusolvermg"])
def test_gpu_lu_solve_singular(monkeypatch, engine):
    if engine:
        monkeypatch.setenv("JAXMG_ENGINE", engine)
    mesh = _mesh()
    n, k = 512, 37
    a = np.array(_general(jax.random.PRNGKey(3), n, jnp.float64, mesh))
    a[k, :] = 0  # the engine's Aᵀ has a zero column k: U(k+1, k+1) = 0
    x, status = jaxmg.lu_solve(a, np.ones((n, 2)), 64, mesh, SPECS, return_status=True)
    assert int(status) == k + 1
    assert bool(jnp.all(jnp.isnan(x)))


def test_gpu_lu_solve_grads_match_jnp():
    mesh = _mesh()
    n = 256
    a = np.asarray(_general(jax.random.PRNGKey(5), n, jnp.complex128, mesh))
    a = a + 3 * np.sqrt(n) * np.eye(n)
    b = np.asarray(jax.random.normal(jax.random.PRNGKey(6), (n, 2), jnp.float64)).astype(complex)
    w = np.cos(np.arange(2 * n)).reshape(n, 2)
    ours = lambda a, b: jnp.real(jnp.sum(w * jaxmg.lu_solve(a, b, 64, mesh, SPECS)))  # noqa: E731
    ref = lambda a, b: jnp.real(jnp.sum(w * jnp.linalg.solve(a, b)))  # noqa: E731
    got = jax.jit(jax.grad(ours, argnums=(0, 1)))(a, b)
    want = jax.jit(jax.grad(ref, argnums=(0, 1)))(a, b)
    for g, r in zip(got, want):
        err = float(jnp.linalg.norm(g - r) / jnp.linalg.norm(r))
        assert err < 1e-9, err


def test_gpu_lu_solve_engine_choice_is_per_call(monkeypatch):
    """The same program under two engines gives the same solution (to
    rounding): JAXMG_ENGINE is read at every call."""
    mesh = _mesh()
    n = 1024
    a = _general(jax.random.PRNGKey(9), n, jnp.float64, mesh)
    b = jnp.ones((n, 1))
    f = jax.jit(lambda a, b: jaxmg.lu_solve(a, b, 128, mesh, SPECS))
    x0 = f(a, b)
    monkeypatch.setenv("JAXMG_ENGINE", "cusolvermg")
    x1 = f(a, b)
    assert float(jnp.linalg.norm(x0 - x1) / jnp.linalg.norm(x0)) < 1e-8
    assert os.environ["JAXMG_ENGINE"] == "cusolvermg"
