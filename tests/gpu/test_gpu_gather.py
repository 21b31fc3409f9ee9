"""The gather engine (issue 18, item 2) on 2 and 4 GPUs: A gathered onto
GPU 0, cuSOLVERDn there, the results scattered back in each op's layout.

Every op (potrs with its log-determinant, potri, syevd with and without
vectors, lu_solve and its transposed solve through the derivative) through
JAXMG_ENGINE=cusolverdn-gather against NumPy in float64 by residuals
(eigenvectors by residual and orthogonality), with several tiles per GPU and
a padded N so that the gather and the scatter move tiles between every pair
of layouts; status and NaN where the factorization fails; the default choice
by size (engine/gather/thresholds.c: potrs float64 below N = 16384 gathered,
from there cuSOLVERMg) read from JAXMG_TRACE; and a gathered copy that does
not fit (a capped allocator) running cuSOLVERMg's routine instead.

Skipped below 2 GPUs. Run with scripts/device-test.sh.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax.sharding import Mesh, PartitionSpec as P  # noqa: E402

import jaxmg  # noqa: E402
import jaxmg_testing as jt  # noqa: E402
# The one-GPU tests' checks (NumPy references, residual tolerances) and the
# capped-allocator children of the error tests: the same checks here.
from test_gpu_one_gpu import (  # noqa: E402
    DTYPES, ROWS, SPECS, _check_eigvals_np, _check_potri_np, _check_potrs_np,
    _check_syevd_np, _on, _tol, _wide)
from test_gpu_errors import _child, _run_capped, _traces  # noqa: E402


from gpu_env import gpu_devices  # noqa: E402

GPUS = gpu_devices()
pytestmark = pytest.mark.skipif(len(GPUS) < 2, reason="needs 2 GPUs")

GATHER = "cusolverdn-gather"
PARTS = [2, 4]


def _mesh(nparts: int) -> Mesh:
    if len(GPUS) < nparts:
        pytest.skip(f"needs {nparts} GPUs")
    return Mesh(np.array(GPUS[:nparts]), ("x",))


def _engines_in(err: str) -> set[str]:
    return set(re.findall(r"^jaxmg trace .*, engine ([\w>-]+), workspace \d+ bytes", err, re.M))


def _general_host(rng, n: int, dtype) -> np.ndarray:
    """A well-conditioned, strongly non-symmetric matrix (strict upper
    triangle 4x the rest), so that a transposed solve shows."""
    r = rng.standard_normal((n, n))
    if np.issubdtype(dtype, np.complexfloating):
        r = r + 1j * rng.standard_normal((n, n))
    r = r * np.where(np.triu(np.ones((n, n)), 1) > 0, 4.0, 1.0)
    return (r + 4.0 * np.sqrt(n) * np.eye(n)).astype(dtype)


def _check_lu_np(a, b, x, dtype):
    aw, bw, xw = (np.asarray(v).astype(_wide(dtype)) for v in (a, b, x))
    assert np.all(np.isfinite(xw))
    res = np.linalg.norm(aw @ xw - bw) / (np.linalg.norm(aw) * np.linalg.norm(xw))
    assert res < _tol(dtype, a.shape[0]), res
    # Not the transposed solve.
    wrong = np.linalg.norm(aw.T @ xw - bw) / (np.linalg.norm(aw) * np.linalg.norm(xw))
    assert wrong > 1e-3, wrong


# (N, T_A): several tiles per GPU; N not a multiple of the GPUs' tiles
# (padded); T_A left out.
CASES = [(1024, 128), (1000, 128), (2048, None)]


@pytest.mark.timeout(900)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("nparts", PARTS)
def test_every_op_through_the_gather_engine(nparts, dtype, capfd, monkeypatch):
    monkeypatch.setenv("JAXMG_ENGINE", GATHER)
    monkeypatch.setenv("JAXMG_TRACE", "1")
    mesh = _mesh(nparts)
    rng = np.random.default_rng(18 + nparts)
    rtol = 1e-4 if np.finfo(dtype).bits <= 32 else 1e-11
    for n, tile in CASES:
        a = jt.make_hpd(rng, n, dtype)
        b = rng.standard_normal((n, 3)).astype(dtype)
        x, logdet, status = jaxmg.potrs(_on(mesh, a), b, tile, mesh, SPECS,
                                        return_status=True, return_logdet=True)
        assert int(status) == 0
        _check_potrs_np(a, b, x, dtype)
        want = np.linalg.slogdet(a.astype(np.complex128))[1]
        np.testing.assert_allclose(float(logdet), want, rtol=rtol)
        _check_potri_np(a, jaxmg.potri(_on(mesh, a), tile, mesh, ROWS), dtype)
        w, v = jaxmg.syevd(_on(mesh, a), tile, mesh, ROWS)
        ref = _check_syevd_np(a, w, v, dtype)
        w = jaxmg.syevd(_on(mesh, a), tile, mesh, ROWS, return_eigenvectors=False)
        _check_eigvals_np(a, w, dtype, ref)
        g = _general_host(rng, n, dtype)
        x = jaxmg.lu_solve(_on(mesh, g), b, tile, mesh, SPECS)
        _check_lu_np(g, b, x, dtype)
    assert _engines_in(capfd.readouterr().err) == {GATHER}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nparts", PARTS)
def test_lu_solve_transposed_solve_through_the_gather_engine(nparts, capfd, monkeypatch):
    """The reverse derivative of lu_solve solves with Aᵀ (the op's trans):
    d sum(w * x) / db = A⁻ᵀ w."""
    monkeypatch.setenv("JAXMG_ENGINE", GATHER)
    monkeypatch.setenv("JAXMG_TRACE", "1")
    mesh = _mesh(nparts)
    rng = np.random.default_rng(5)
    n = 512
    a = _general_host(rng, n, np.float64)
    b = rng.standard_normal((n, 2))
    w = np.cos(np.arange(2 * n)).reshape(n, 2)
    grad = jax.grad(lambda b: jnp.sum(w * jaxmg.lu_solve(_on(mesh, a), b, 64, mesh, SPECS)))(
        jnp.asarray(b))
    want = np.linalg.solve(a.T, w)
    assert np.linalg.norm(np.asarray(grad) - want) / np.linalg.norm(want) < 1e-10
    assert _engines_in(capfd.readouterr().err) == {GATHER}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("nparts", PARTS)
def test_failures_through_the_gather_engine_give_status_and_nan(nparts, dtype, monkeypatch):
    monkeypatch.setenv("JAXMG_ENGINE", GATHER)
    mesh = _mesh(nparts)
    n, k = 96 * nparts, 51
    a = np.eye(n, dtype=dtype)
    a[k, k] = -1
    x, logdet, s = jaxmg.potrs(_on(mesh, a), np.ones((n, 1), dtype), 32, mesh, SPECS,
                               return_status=True, return_logdet=True)
    assert int(s) == k + 1 and bool(jnp.all(jnp.isnan(x))) and np.isnan(float(logdet))
    inv, s = jaxmg.potri(_on(mesh, a), 32, mesh, ROWS, return_status=True)
    assert int(s) == k + 1 and bool(jnp.all(jnp.isnan(inv)))
    g = np.eye(n, dtype=dtype)
    g[k, :] = 0  # the engine's Aᵀ has a zero column k: U(k+1, k+1) = 0
    x, s = jaxmg.lu_solve(_on(mesh, g), np.ones((n, 2), dtype), 32, mesh, SPECS,
                          return_status=True)
    assert int(s) == k + 1 and bool(jnp.all(jnp.isnan(x)))
    # And the next call on the same GPUs is right again.
    good = jt.make_hpd(np.random.default_rng(1), n, dtype)
    _check_potri_np(good, jaxmg.potri(_on(mesh, good), 32, mesh, ROWS), dtype)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("nparts", PARTS)
def test_default_gathers_below_the_size_and_runs_cusolvermg_from_it(nparts, capfd,
                                                                    monkeypatch):
    """engine/gather/thresholds.c: potrs float64 on 2 to 4 GPUs is gathered
    below N = 16384; syevd float64 on 4 GPUs below 32768 (N = 2048 here).
    The check before tracing names the same engine as the call's trace."""
    from jaxmg._src import _native

    monkeypatch.delenv("JAXMG_ENGINE", raising=False)
    monkeypatch.setenv("JAXMG_TRACE", "1")
    mesh = _mesh(nparts)
    rng = np.random.default_rng(nparts)
    capfd.readouterr()
    for n, engine in ((4096, GATHER), (16384, "cusolvermg")):
        assert _native.engine_check("CUDA", "potrs", nparts, "float64", n, 2048) == (
            True, engine)
        a = np.asarray(jnp.eye(n) * n + 1.0)  # SPD: n I + the all-ones matrix
        b = rng.standard_normal((n, 2))
        x = jaxmg.potrs(_on(mesh, a), b, 2048, mesh, SPECS)
        _check_potrs_np(a, b, x, np.float64)
        assert _engines_in(capfd.readouterr().err) == {engine}, n
    a = jt.make_hpd(rng, 2048, np.float64)
    w, v = jaxmg.syevd(_on(mesh, a), mesh=mesh, in_specs=ROWS)
    _check_syevd_np(a, w, v, np.float64)
    assert _engines_in(capfd.readouterr().err) == {GATHER}


# potrs of a matrix whose shard takes 45% of a capped allocator, the gather
# engine forced: the N x N copy (45% x GPUs of the cap, beside GPU 0's own
# shard) cannot be had, so cuSOLVERMg's routine runs on the distributed A,
# which fits (its in-place permutation and workspace).
_CHILD_NO_ROOM = _child(0.45, """
    solve = jax.jit(lambda b: jaxmg.potrs(
        jax.lax.with_sharding_constraint(make(n), rows), b, 256, mesh,
        (P("x", None), P(None, None)), return_status=True))
    x, s = solve(jnp.ones((n, 1)))
    res = host_residual(np.asarray(x)[:, 0], lambda i: 1.0)
    print(f"SOLVED: status {int(s)} residual {res:.2e}", flush=True)
    sys.exit(0 if int(s) == 0 and res < 1e-14 else 4)
    """)


@pytest.mark.timeout(400)
def test_gathered_copy_that_does_not_fit_runs_cusolvermg():
    out = _run_capped(_CHILD_NO_ROOM, JAXMG_TRACE="1", JAXMG_ENGINE=GATHER)
    assert "SOLVED: status 0" in out.stdout, out.stdout
    traces = _traces(out, "potrs")
    assert traces, out.stderr[-3000:]
    for t in traces:
        assert "no memory to gather: cusolvermg" in t, t
        # The trace's engine, then its workspace ("engine E, workspace ...").
        assert f", engine {GATHER}>cusolvermg, workspace " in t, t
