"""jaxmg's own multi-GPU eigensolver (issue 37; engine eig-mgpu,
csrc/engine/eig_mgpu/): the Householder reduction split over the GPUs by
columns, T on the host, the eigenvectors back-transformed on every GPU.
Chosen by default for float64 syevd on 2 to 4 GPUs where measured faster (N
16384 to 32768), at every N with JAXMG_SYEVD_MGPU=1.
The reduction runs each column on every GPU (the default path,
"replicated") or on the panel's owner (session 19's, "owner",
JAXMG_SYEVD_MGPU_PATH=owner): both are checked, the second on fewer cases.

Checked against NumPy in float64 (eigenvalues, ||A V - V W|| / ||A|| and
the orthogonality of V), with and without eigenvectors, at sizes and T_A
around the reduction's panel (64 columns, never across a tile: T_A = 48 and
100 cut panels) and the back-transformation's block (128 reflectors);
random, clustered and diagonal spectra (a diagonal A: every reflector the
identity); that the engine ran (JAXMG_TRACE) and its steps (T by
cuSOLVERMp's stedc from N = 2048 where its wheel is installed, else on the
host); that without
JAXMG_SYEVD_MGPU below its sizes, with JAXMG_SYEVD_MGPU=0, or for float32,
another engine runs, and that by default it is the engine chosen in the
sizes where it was measured faster (engine/eig_mgpu/context.c). Needs 2
GPUs; skipped without them.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

from gpu_env import gpu_devices  # noqa: E402

GPUS = gpu_devices()
pytestmark = pytest.mark.skipif(len(GPUS) < 2, reason="needs 2 GPUs")

import jaxmg  # noqa: E402
from test_gpu_one_gpu import ROWS, _check_eigvals_np, _check_syevd_np, _mesh, _on  # noqa: E402

ENGINE = "eig-mgpu"


def _engines(err: str) -> set[str]:
    return set(re.findall(r"^jaxmg trace syevd .*, engine ([\w-]+), workspace", err, re.M))


def _hermitian(rng, n: int, spectrum: np.ndarray | None = None) -> np.ndarray:
    r = rng.standard_normal((n, n))
    if spectrum is None:
        return (r + r.T) / 2
    q, _ = np.linalg.qr(r)
    return (q * spectrum) @ q.T


@pytest.fixture
def mgpu(monkeypatch):
    monkeypatch.setenv("JAXMG_SYEVD_MGPU", "1")
    monkeypatch.setenv("JAXMG_TRACE", "1")
    monkeypatch.delenv("JAXMG_ENGINE", raising=False)
    monkeypatch.delenv("JAXMG_SYEVD_MGPU_PATH", raising=False)


def _paths(err: str) -> set[str]:
    """The reduction's paths that the trace names (its profile note)."""
    return set(re.findall(r"sytrd \[(\w+), \d+ GPUs", err))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("t_a", [None, 48, 64, 100], ids=lambda t: f"T_A={t}")
def test_mgpu_syevd_against_numpy(t_a, mgpu, capfd):
    mesh = _mesh(GPUS[:2])
    rng = np.random.default_rng(37)
    for n in (2, 4, 64, 130, 300, 1000):  # rows split evenly over 2 GPUs
        if t_a is not None and t_a > n:
            continue
        a = _hermitian(rng, n)
        w, v = jaxmg.syevd(_on(mesh, a), T_A=t_a, mesh=mesh, in_specs=ROWS)
        ref = _check_syevd_np(a, w, v, np.float64)
        w = jaxmg.syevd(_on(mesh, a), T_A=t_a, mesh=mesh, in_specs=ROWS,
                        return_eigenvectors=False)
        _check_eigvals_np(a, w, np.float64, ref)
    err = capfd.readouterr().err
    assert _engines(err) == {ENGINE}, err[-3000:]
    assert _paths(err) == {"replicated"}, err[-2000:]
    # Its steps: T by cuSOLVERMp's stedc where the wheel is installed, else
    # on the host (stemr with vectors, sterf without).
    assert "sytrd" in err and "ormtr" in err, err[-2000:]
    assert "stedc" in err or ("stemr" in err and "sterf" in err), err[-2000:]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("t_a", [None, 48], ids=lambda t: f"T_A={t}")
def test_mgpu_owner_path_against_numpy(t_a, mgpu, monkeypatch, capfd):
    """Session 19's path, kept selectable (JAXMG_SYEVD_MGPU_PATH=owner) so
    that one GPU run can compare both."""
    monkeypatch.setenv("JAXMG_SYEVD_MGPU_PATH", "owner")
    mesh = _mesh(GPUS[:2])
    rng = np.random.default_rng(38)
    for n in (4, 130, 1000):
        a = _hermitian(rng, n)
        w, v = jaxmg.syevd(_on(mesh, a), T_A=t_a, mesh=mesh, in_specs=ROWS)
        _check_syevd_np(a, w, v, np.float64)
    err = capfd.readouterr().err
    assert _engines(err) == {ENGINE} and _paths(err) == {"owner"}, err[-2000:]


@pytest.mark.timeout(300)
def test_mgpu_path_malformed_is_refused(mgpu, monkeypatch):
    monkeypatch.setenv("JAXMG_SYEVD_MGPU_PATH", "every")
    mesh = _mesh(GPUS[:2])
    a = _hermitian(np.random.default_rng(3), 64)
    with pytest.raises(Exception, match="JAXMG_SYEVD_MGPU_PATH"):
        jax.block_until_ready(jaxmg.syevd(_on(mesh, a), mesh=mesh, in_specs=ROWS))


@pytest.mark.timeout(600)
def test_mgpu_syevd_clustered_and_diagonal(mgpu, capfd):
    """Tight clusters (10^-10 apart, and repeated), and a diagonal A, whose
    reflectors are all the identity (tau 0 in every column), also at N =
    2048, where T (diagonal) goes to stedc."""
    mesh = _mesh(GPUS[:2])
    rng = np.random.default_rng(8)
    n = 600
    spectrum = np.concatenate([np.full(200, -2.0), 0.5 + 1e-10 * np.arange(200),
                               rng.standard_normal(200)])
    for a in (_hermitian(rng, n, spectrum), np.diag(rng.standard_normal(n))):
        w, v = jaxmg.syevd(_on(mesh, a), T_A=64, mesh=mesh, in_specs=ROWS)
        _check_syevd_np(a, w, v, np.float64)
    # From N = 2048 T goes to cuSOLVERMp's stedc (where its wheel is), which
    # leaves the eigenvalues of a T that splits out of order (on 2 H200,
    # 2026-11-28): the engine sorts them, and Q's columns with them.
    a = np.diag(rng.standard_normal(2048))
    w, v = jaxmg.syevd(_on(mesh, a), T_A=256, mesh=mesh, in_specs=ROWS)
    _check_syevd_np(a, w, v, np.float64)
    assert _engines(capfd.readouterr().err) == {ENGINE}


@pytest.mark.timeout(600)
def test_mgpu_syevd_larger(mgpu, monkeypatch, capfd):
    """N = 4096 with T_A = 256 (the layout the bench times), checked on the
    GPUs (jax.numpy in float64); from N = 2048 on, T goes to cuSOLVERMp's
    stedc where its wheel is installed. Both paths of the reduction give
    the same eigenvalues to rounding."""
    mesh = _mesh(GPUS[:2])
    a = _hermitian(np.random.default_rng(5), 4096)
    w, v = jaxmg.syevd(_on(mesh, a), T_A=256, mesh=mesh, in_specs=ROWS)
    _check_syevd_np(a, w, v, np.float64)
    monkeypatch.setenv("JAXMG_SYEVD_MGPU_PATH", "owner")
    w2 = jaxmg.syevd(_on(mesh, a), T_A=256, mesh=mesh, in_specs=ROWS,
                     return_eigenvectors=False)
    w, w2 = np.asarray(w), np.asarray(w2)
    assert np.max(np.abs(w - w2)) <= 1e-12 * np.max(np.abs(w)), np.max(np.abs(w - w2))
    err = capfd.readouterr().err
    assert _engines(err) == {ENGINE}
    assert _paths(err) == {"replicated", "owner"}, err[-2000:]


@pytest.mark.timeout(300)
def test_without_opt_in_or_for_float32_another_engine_runs(monkeypatch, capfd):
    monkeypatch.setenv("JAXMG_TRACE", "1")
    monkeypatch.delenv("JAXMG_ENGINE", raising=False)
    monkeypatch.delenv("JAXMG_SYEVD_MGPU", raising=False)
    mesh = _mesh(GPUS[:2])
    a = _hermitian(np.random.default_rng(1), 256)
    w, v = jaxmg.syevd(_on(mesh, a), mesh=mesh, in_specs=ROWS)
    _check_syevd_np(a, w, v, np.float64)
    monkeypatch.setenv("JAXMG_SYEVD_MGPU", "1")
    a32 = a.astype(np.float32)
    w, v = jaxmg.syevd(_on(mesh, a32), mesh=mesh, in_specs=ROWS)
    _check_syevd_np(a32, w, v, np.float32)
    ran = _engines(capfd.readouterr().err)
    assert ran and ENGINE not in ran, ran


@pytest.mark.timeout(300)
def test_jaxmg_engine_names_it_and_float32_is_refused(monkeypatch):
    monkeypatch.setenv("JAXMG_ENGINE", ENGINE)
    mesh = _mesh(GPUS[:2])
    a = _hermitian(np.random.default_rng(2), 128).astype(np.float32)
    with pytest.raises(Exception, match="float64 only"):
        jaxmg.syevd(_on(mesh, a), mesh=mesh, in_specs=ROWS)


@pytest.mark.parametrize("n,setting,chosen", [
    (8192, None, False), (16384, None, True), (32768, None, True), (65536, None, False),
    (16384, "0", False), (8192, "1", True)])
def test_default_choice_follows_the_measured_sizes(n, setting, chosen, monkeypatch):
    """The library's own engine check (asked before tracing, nothing runs):
    eig-mgpu by default only for N 16384..32768 on 2 GPUs; "1" at every N,
    "0" never."""
    from jaxmg._src import _native
    monkeypatch.delenv("JAXMG_ENGINE", raising=False)
    if setting is None:
        monkeypatch.delenv("JAXMG_SYEVD_MGPU", raising=False)
    else:
        monkeypatch.setenv("JAXMG_SYEVD_MGPU", setting)
    ok, engine = _native.engine_check("CUDA", "syevd", 2, "float64", n, 256)
    assert ok, engine
    assert (engine == ENGINE) == chosen, engine
    ok32, engine32 = _native.engine_check("CUDA", "syevd", 2, "float32", n, 256)
    assert ok32 and engine32 != ENGINE, engine32
