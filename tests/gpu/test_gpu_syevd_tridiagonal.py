"""syevd's tridiagonal path on one GPU (issue 25): jaxmg's own eigensolver
(engine/cusolverdn/syevd_tridiagonal.c: the Householder reduction on cuBLAS,
T's eigenproblem on the host by LAPACK's dstemr in chunks, the reflectors
applied to T's eigenvectors), which runs where cusolverDnXsyevd's 4 A of
workspace does not fit, forced here with JAXMG_SYEVD=tridiagonal at sizes
around its blocks (64-column panels, 128-reflector blocks).

Checked against NumPy in float64: eigenvalues, the residual ||A V - V W||
and the orthogonality of V (never elementwise), for every dtype, with and
without eigenvectors, on random Hermitian matrices, a clustered spectrum and
a diagonal one; the peak memory (A and one more A) against
jaxmg.memory_estimate; a malformed JAXMG_SYEVD. Skipped without GPUs.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

from gpu_env import gpu_devices  # noqa: E402

GPUS = gpu_devices()
pytestmark = pytest.mark.skipif(not GPUS, reason="no GPU")

import jaxmg  # noqa: E402
from test_gpu_memory import Case, run_children  # noqa: E402
from test_gpu_one_gpu import (DTYPES, ROWS, _check_eigvals_np,  # noqa: E402
                              _check_syevd_np, _mesh, _on)

# Around the panel (64) and the reflector block (128); 1 and 2 have no or
# one reflector.
SIZES = (1, 2, 3, 64, 65, 129, 300, 1000)


def _hermitian(rng, n: int, dtype, spectrum: np.ndarray | None = None) -> np.ndarray:
    """A random Hermitian A (indefinite), or Q diag(spectrum) Q^H."""
    cplx = np.issubdtype(dtype, np.complexfloating)
    r = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if cplx else 0)
    if spectrum is None:
        return ((r + r.conj().T) / 2).astype(dtype)
    q, _ = np.linalg.qr(r)
    return ((q * spectrum) @ q.conj().T).astype(dtype)


@pytest.fixture
def tridiagonal(monkeypatch):
    monkeypatch.setenv("JAXMG_SYEVD", "tridiagonal")
    monkeypatch.delenv("JAXMG_ENGINE", raising=False)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_tridiagonal_path_against_numpy(dtype, tridiagonal, capfd, monkeypatch):
    monkeypatch.setenv("JAXMG_TRACE", "1")
    mesh = _mesh(GPUS[:1])
    rng = np.random.default_rng(25)
    for n in SIZES:
        a = _hermitian(rng, n, dtype)
        w, v = jaxmg.syevd(_on(mesh, a), mesh=mesh, in_specs=ROWS)
        ref = _check_syevd_np(a, w, v, dtype)
        w = jaxmg.syevd(_on(mesh, a), mesh=mesh, in_specs=ROWS, return_eigenvectors=False)
        _check_eigvals_np(a, w, dtype, ref)
    err = capfd.readouterr().err
    # The path's own steps ran (syevd_tridiagonal.c's trace marks).
    assert "sytrd" in err and "stemr" in err and "ormtr" in err and "sterf" in err, err[-2000:]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=lambda d: np.dtype(d).name)
def test_tridiagonal_path_on_clustered_and_diagonal_spectra(dtype, tridiagonal):
    """Eigenvalues in tight clusters (10^-10 apart, and exactly repeated),
    which the host's chunks must not split between two dstemr calls, and a
    diagonal A (T diagonal: every reflector the identity)."""
    mesh = _mesh(GPUS[:1])
    rng = np.random.default_rng(7)
    n = 1500
    base = np.repeat(np.linspace(-1.0, 1.0, n // 5), 5)
    spectra = [base + 1e-10 * np.tile(np.arange(5), n // 5),
               np.repeat(np.array([-2.0, 0.5, 3.0]), n // 3)]
    for s in spectra:
        a = _hermitian(rng, n, dtype, s)
        w, v = jaxmg.syevd(_on(mesh, a), mesh=mesh, in_specs=ROWS)
        _check_syevd_np(a, w, v, dtype)
    a = np.diag(np.arange(1.0, n + 1.0)).astype(dtype)
    w, v = jaxmg.syevd(_on(mesh, a), mesh=mesh, in_specs=ROWS)
    _check_syevd_np(a, w, v, dtype)


@pytest.mark.timeout(600)
def test_tridiagonal_path_agrees_with_cusolver(monkeypatch):
    mesh = _mesh(GPUS[:1])
    a = _hermitian(np.random.default_rng(3), 2000, np.complex128)
    out = {}
    for solver in ("cusolver", "tridiagonal"):
        monkeypatch.setenv("JAXMG_SYEVD", solver)
        out[solver] = np.asarray(jaxmg.syevd(_on(mesh, a), mesh=mesh, in_specs=ROWS,
                                             return_eigenvectors=False))
    scale = np.abs(out["cusolver"]).max()
    assert np.abs(out["cusolver"] - out["tridiagonal"]).max() < 1e-12 * 2000 * scale


# The peak tests' children (bench/largest.py, as test_gpu_memory.py's), each
# with its own environment: the path forced (JAXMG_SYEVD=tridiagonal), or,
# for the engine's own choice, JAXMG_SYEVD unset under a pool cut to about
# 3.6 A at N = 8192; the default engine (JAXMG_ENGINE unset) in each. Run
# together when the first test asks, spread over the GPUs. (They used to
# take test_gpu_memory.py's cached records, keyed without the environment:
# in a run of both files the forced path's tests read that file's children,
# which had run cuSOLVER's path, and the cut pool's child never ran in any
# run, its test reading the forced path's record.)
PEAK_N = 8192


def _peak_cases() -> dict[str, Case]:
    forced = (("JAXMG_ENGINE", None), ("JAXMG_SYEVD", "tridiagonal"))
    cut = (("JAXMG_ENGINE", None), ("JAXMG_SYEVD", None),
           ("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{3.6 * PEAK_N * PEAK_N * 8 / _gpu_bytes():.5f}"))
    return {"syevd": ("syevd", "float64", PEAK_N, None, forced),
            "syevd_values": ("syevd_values", "float64", PEAK_N, None, forced),
            "chosen": ("syevd", "float64", PEAK_N, None, cut)}


_peaks: dict[str, dict | str] = {}


def _peak(name: str) -> dict:
    """The record of _peak_cases()[name]'s child (all three run at the first
    call)."""
    if not _peaks:
        cases = _peak_cases()
        records = run_children(list(cases.values()))
        _peaks.update({k: records[case] for k, case in cases.items()})
    r = _peaks[name]
    assert isinstance(r, dict), r
    return r


@pytest.mark.timeout(600)
@pytest.mark.parametrize("op", ["syevd", "syevd_values"])
def test_tridiagonal_path_peak_is_a_and_one_more(op):
    """Donated A: the peak is A, plus one more A for the eigenvectors (none
    for eigenvalues alone), plus the panels; memory_estimate knows it."""
    r = _peak(op)
    print(json.dumps(r))
    assert r["status"] == "ok", r
    peak, a_bytes = r["peak_bytes_in_use"][0], r["matrix_bytes_per_gpu"]
    assert r["estimate_workspace"] is not None, r
    assert r["estimate_workspace"] <= (1.06 if op == "syevd" else 0.06) * a_bytes, r
    assert peak <= (2.1 if op == "syevd" else 1.1) * a_bytes, (peak / a_bytes, r)
    assert abs(r["estimate_peak"] - peak) <= 0.1 * peak, (r["estimate_peak"], peak, r)


def test_malformed_jaxmg_syevd_names_the_variable(monkeypatch):
    monkeypatch.setenv("JAXMG_SYEVD", "qr-algorithm")
    mesh = _mesh(GPUS[:1])
    a = _hermitian(np.random.default_rng(1), 64, np.float64)
    with pytest.raises(Exception, match="JAXMG_SYEVD"):
        jax.block_until_ready(jaxmg.syevd(_on(mesh, a), mesh=mesh, in_specs=ROWS))


@pytest.mark.timeout(600)
def test_engine_and_estimate_choose_the_path_where_cusolver_does_not_fit():
    """JAXMG_SYEVD unset, XLA's pool cut to about 3.6 A at N = 8192: the
    engine finds cusolverDnXsyevd's 4 A refused and runs the tridiagonal
    path (A and one more A), and memory_estimate says so beforehand."""
    r = _peak("chosen")
    print(json.dumps(r))
    assert r["status"] == "ok", r
    peak, a_bytes = r["peak_bytes_in_use"][0], r["matrix_bytes_per_gpu"]
    assert r["estimate_workspace"] <= 1.06 * a_bytes, r  # the path's, not cuSOLVER's
    assert peak <= 2.1 * a_bytes, (peak / a_bytes, r)
    assert abs(r["estimate_peak"] - peak) <= 0.1 * peak, (r["estimate_peak"], peak, r)


def _gpu_bytes() -> int:
    """The first GPU's memory (what XLA's fraction is of; the GPUs of a
    machine here are alike, and the child may run on another)."""
    import subprocess

    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits",
                          "-i", "0"], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0]) * 2**20
