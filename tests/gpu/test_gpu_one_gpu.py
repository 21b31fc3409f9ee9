"""jaxmg on one GPU (issue 18): the cuSOLVERDn engine for every op and dtype
against NumPy, status and NaN on a matrix that is not positive definite,
JAXMG_ENGINE=cusolvermg against the default on the same GPU, and every op
with T_A left out at N = 1024, 2048, 3000 and 4096 per GPU.

Residuals in float64 (complex128); eigenvectors checked by residual and
orthogonality, never elementwise. Run with scripts/device-test.sh; skipped
without GPUs.
"""

from __future__ import annotations

import re

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
import jaxmg_testing as jt  # noqa: E402

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
EPS = {np.float32: 1.2e-7, np.float64: 2.2e-16, np.complex64: 1.2e-7, np.complex128: 2.2e-16}
ROWS = (P("x", None),)
SPECS = (P("x", None), P(None, None))


def _mesh(devices) -> Mesh:
    return Mesh(np.array(devices), ("x",))


def _wide(dtype):
    return np.complex128 if np.issubdtype(dtype, np.complexfloating) else np.float64


def _tol(dtype, n: int) -> float:
    return 50 * EPS[dtype] * np.sqrt(n)


def _on(mesh: Mesh, a: np.ndarray) -> jax.Array:
    return jax.device_put(a, NamedSharding(mesh, P("x", None)))


def _xp(n: int):
    """NumPy on the host below N = 2048; from there jax.numpy on the GPUs
    (the host's eigvalsh would take most of the run's time), both in float64."""
    return np if n < 2048 else jnp


def _check_potrs_np(a, b, x, dtype):
    xp = _xp(a.shape[0])
    aw, bw, xw = (xp.asarray(v).astype(_wide(dtype)) for v in (a, b, x))
    assert bool(xp.all(xp.isfinite(xw)))
    res = xp.linalg.norm(aw @ xw - bw) / (xp.linalg.norm(aw) * xp.linalg.norm(xw))
    assert float(res) < _tol(dtype, a.shape[0]), float(res)


def _check_potri_np(a, inv, dtype):
    xp = _xp(a.shape[0])
    aw, iw = xp.asarray(a).astype(_wide(dtype)), xp.asarray(inv).astype(_wide(dtype))
    n = aw.shape[0]
    assert bool(xp.all(xp.isfinite(iw)))
    res = xp.linalg.norm(aw @ iw - xp.eye(n)) / (xp.linalg.norm(aw) * xp.linalg.norm(iw))
    herm = xp.linalg.norm(iw - iw.conj().T) / xp.linalg.norm(iw)
    assert float(res) < _tol(dtype, n), float(res)
    assert float(herm) < _tol(dtype, n), float(herm)


def _check_eigvals_np(a, w, dtype, ref=None):
    """w against A's float64 eigenvalues (``ref``: the caller's where it has
    them, from _check_syevd_np's answer for the same A); returns them."""
    xp = _xp(a.shape[0])
    aw = xp.asarray(a).astype(_wide(dtype))
    ref = xp.linalg.eigvalsh(aw) if ref is None else ref
    w = xp.asarray(w).astype(np.float64)
    assert bool(xp.all(xp.diff(w) >= 0)), "eigenvalues not ascending"
    err = xp.max(xp.abs(w - ref)) / xp.max(xp.abs(ref))
    assert float(err) < _tol(dtype, aw.shape[0]), float(err)
    return ref


def _check_syevd_np(a, w, v, dtype):
    """Eigenvalues, residual and orthogonality; returns A's float64
    eigenvalues (for _check_eigvals_np on the same A)."""
    xp = _xp(a.shape[0])
    aw, vw = xp.asarray(a).astype(_wide(dtype)), xp.asarray(v).astype(_wide(dtype))
    n = aw.shape[0]
    ref = _check_eigvals_np(a, w, dtype)
    wf = xp.asarray(w).astype(np.float64)
    res = xp.linalg.norm(aw @ vw - vw * wf) / xp.linalg.norm(aw)
    orth = xp.linalg.norm(vw.conj().T @ vw - xp.eye(n)) / np.sqrt(n)
    assert float(res) < _tol(dtype, n), float(res)
    assert float(orth) < _tol(dtype, n), float(orth)
    return ref


def _engines_in(err: str) -> set[str]:
    return set(re.findall(r"^jaxmg trace .*, engine (\w+), workspace \d+ bytes", err, re.M))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_op_through_cusolverdn_on_one_gpu(dtype, capfd, monkeypatch):
    monkeypatch.delenv("JAXMG_ENGINE", raising=False)
    monkeypatch.setenv("JAXMG_TRACE", "1")
    mesh = _mesh(GPUS[:1])
    rng = np.random.default_rng(18)
    for n, tile in ((1000, None), (777, 128), (1024, 2048)):
        a = jt.make_hpd(rng, n, dtype)
        b = rng.standard_normal((n, 3)).astype(dtype)
        x = jaxmg.potrs(_on(mesh, a), b, tile, mesh, SPECS)
        _check_potrs_np(a, b, x, dtype)
        inv = jaxmg.potri(_on(mesh, a), tile, mesh, ROWS)
        _check_potri_np(a, inv, dtype)
        w, v = jaxmg.syevd(_on(mesh, a), tile, mesh, ROWS)
        ref = _check_syevd_np(a, w, v, dtype)
        w = jaxmg.syevd(_on(mesh, a), tile, mesh, ROWS, return_eigenvectors=False)
        _check_eigvals_np(a, w, dtype, ref)
    assert _engines_in(capfd.readouterr().err) == {"cusolverdn"}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_not_positive_definite_on_one_gpu_gives_status_and_nan(dtype, monkeypatch):
    monkeypatch.delenv("JAXMG_ENGINE", raising=False)
    mesh = _mesh(GPUS[:1])
    n, k = 96, 51
    a = np.eye(n, dtype=dtype)
    a[k, k] = -1
    x, s = jaxmg.potrs(_on(mesh, a), np.ones((n, 1), dtype), None, mesh, ROWS,
                       return_status=True)
    assert int(s) == k + 1 and bool(jnp.all(jnp.isnan(x)))
    inv, s = jaxmg.potri(_on(mesh, a), None, mesh, ROWS, return_status=True)
    assert int(s) == k + 1 and bool(jnp.all(jnp.isnan(inv)))
    # And the next call on the same GPU is right again.
    good = jt.make_hpd(np.random.default_rng(1), n, dtype)
    _check_potri_np(good, jaxmg.potri(_on(mesh, good), None, mesh, ROWS), dtype)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=lambda d: np.dtype(d).name)
def test_cusolvermg_and_the_default_agree_on_one_gpu(dtype, capfd, monkeypatch):
    """The same bytes, the same triangle, the same conjugation: both engines
    give the same answers (eigenvectors up to phase: compared through their
    projectors' action, A V = V w, on each engine's own V)."""
    mesh = _mesh(GPUS[:1])
    rng = np.random.default_rng(7)
    n = 1536
    a = jt.make_hpd(rng, n, dtype)
    b = rng.standard_normal((n, 2)).astype(dtype)
    monkeypatch.setenv("JAXMG_TRACE", "1")
    out = {}
    for engine in ("", "cusolvermg"):
        if engine:
            monkeypatch.setenv("JAXMG_ENGINE", engine)
        else:
            monkeypatch.delenv("JAXMG_ENGINE", raising=False)
        x = np.asarray(jaxmg.potrs(_on(mesh, a), b, 512, mesh, SPECS))
        inv = np.asarray(jaxmg.potri(_on(mesh, a), 512, mesh, ROWS))
        w, v = (np.asarray(t) for t in jaxmg.syevd(_on(mesh, a), 512, mesh, ROWS))
        _check_potrs_np(a, b, x, dtype)
        _check_potri_np(a, inv, dtype)
        _check_syevd_np(a, w, v, dtype)
        out[engine or "default"] = (x, inv, w)
        assert _engines_in(capfd.readouterr().err) == {engine or "cusolverdn"}
    tol = _tol(dtype, n)
    for i, name in enumerate(("x", "inverse", "eigenvalues")):
        d, m = out["default"][i], out["cusolvermg"][i]
        assert np.linalg.norm(d - m) / np.linalg.norm(m) < tol, name


@pytest.mark.timeout(900)
@pytest.mark.parametrize("engine", ["", "cusolvermg"], ids=["default", "cusolvermg"])
@pytest.mark.parametrize("per_gpu", [1024, 2048, 3000])
def test_every_op_with_t_a_left_out(per_gpu, engine, monkeypatch):
    """The default T_A runs every op (cusolverMgSyevd refuses T_A > 1024: the
    default narrows for it). cusolvermg is asked for explicitly on one GPU
    only (on several it is the default). Each branch of
    _checks.default_tile: the whole shard (1024), the whole shard narrowed
    for cuSOLVERMg (2048), a divisor between 1024 and 2048 (3000: 1500,
    narrowed to 1000). 4096 a GPU (a divisor, 2048, narrowed to 1024: the
    same branches) took 14 s on 2 H200, most of it NumPy's references."""
    if engine and len(GPUS) > 1:
        pytest.skip("JAXMG_ENGINE=cusolvermg is the default on several GPUs")
    if engine:
        monkeypatch.setenv("JAXMG_ENGINE", engine)
    else:
        monkeypatch.delenv("JAXMG_ENGINE", raising=False)
    mesh = _mesh(GPUS)
    n = per_gpu * len(GPUS)
    rng = np.random.default_rng(per_gpu)
    a = jt.make_hpd(rng, n, np.float64)
    b = rng.standard_normal((n, 2))
    _check_potrs_np(a, b, jaxmg.potrs(_on(mesh, a), b, mesh=mesh, in_specs=SPECS), np.float64)
    _check_potri_np(a, jaxmg.potri(_on(mesh, a), mesh=mesh, in_specs=ROWS), np.float64)
    w, v = jaxmg.syevd(_on(mesh, a), mesh=mesh, in_specs=ROWS)
    ref = _check_syevd_np(a, w, v, np.float64)
    w = jaxmg.syevd(_on(mesh, a), mesh=mesh, in_specs=ROWS, return_eigenvectors=False)
    _check_eigvals_np(a, w, np.float64, ref)


@pytest.mark.timeout(300)
def test_explicit_t_a_an_engine_cannot_take_is_a_value_error(monkeypatch):
    mesh = _mesh(GPUS[:1])
    a = _on(mesh, jt.make_hpd(np.random.default_rng(3), 4096, np.float64))
    monkeypatch.setenv("JAXMG_ENGINE", "cusolvermg")
    with pytest.raises(ValueError, match="T_A=2048.*1024"):
        jaxmg.syevd(a, 2048, mesh, ROWS)
    # The default engine on one GPU takes it.
    monkeypatch.delenv("JAXMG_ENGINE")
    w = jaxmg.syevd(a, 2048, mesh, ROWS, return_eigenvectors=False)
    assert bool(jnp.all(jnp.isfinite(w)))
