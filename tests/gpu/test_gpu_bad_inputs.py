"""The table of bad inputs (tests/python/bad_inputs.py) on GPUs, for every
CUDA engine forced by JAXMG_ENGINE: cusolverdn (one GPU), cusolvermg,
cusolverdn-gather (two GPUs and more) and cusolvermp (where
jaxmg.cusolvermp_available() says it runs). A NaN or an Inf anywhere in A
gives every op status -1 and NaN outputs, without raising (no solver runs:
exec/finite.c); lu_solve of a singular A gives the first zero pivot. The
same table runs on CPU devices in tests/python/test_bad_inputs.py.

Each engine runs on one GPU and, where there are two or more, on two (the
engines that take that group). Skipped without GPUs (conftest)."""

from __future__ import annotations

import os

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)
from jax.sharding import Mesh  # noqa: E402

import bad_inputs as bi  # noqa: E402
import jaxmg_testing as jt  # noqa: E402
from gpu_env import gpu_devices  # noqa: E402

GPUS = gpu_devices()
pytestmark = pytest.mark.skipif(not GPUS, reason="no GPU")

import jaxmg  # noqa: E402

ENGINES = ("cusolverdn", "cusolvermg", "cusolverdn-gather", "cusolvermp")
GROUPS = (1, 2)
# (engine, op, GPUs) that no engine routine exists for: the only skips the
# table allows besides missing GPUs and a missing cuSOLVERMp.
NO_ROUTINE = {
    ("cusolvermg", "gesvd"),  # cuSOLVERMg has no SVD
    ("cusolvermp", "gesvd"),  # cuSOLVERMp 0.8 has none; jaxmg does not call 0.9's
    ("cusolvermg", "polar"),  # polar runs through qr's QRs (QDWH)
    ("cusolvermg", "qr"),  # cuSOLVERMg has no QR
    ("cusolvermg", "least_squares"),
}
N, T_A = 64, 16


def _rng(request) -> np.random.Generator:
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed} for {request.node.name}")
    return np.random.default_rng(seed)


@pytest.fixture(params=ENGINES)
def engine(request, monkeypatch):
    monkeypatch.setenv("JAXMG_ENGINE", request.param)
    return request.param


def _mesh_or_skip(engine: str, op: str, k: int) -> Mesh:
    if len(GPUS) < k:
        pytest.skip(f"needs {k} GPUs")
    if engine == "cusolverdn" and k != 1:
        pytest.skip("cusolverdn runs a group of one GPU")
    if engine == "cusolverdn-gather" and k < 2:
        pytest.skip("cusolverdn-gather runs a group of two GPUs or more")
    if engine == "cusolvermp":
        ok, why = jaxmg.cusolvermp_available()
        if not ok:
            pytest.skip(f"cuSOLVERMp not available: {why}")
    ok, why = bi.engine_runs(engine, op, "CUDA", k, np.float64, N, T_A)
    if not ok:
        assert (engine, op) in NO_ROUTINE, (engine, op, why)
        pytest.skip(f"{engine} has no {op}: {why}")
    return Mesh(np.array(GPUS[:k]), ("x",))


@pytest.mark.parametrize("k", GROUPS)
@pytest.mark.parametrize("case", bi.NONFINITE)
@pytest.mark.parametrize("op", bi.OPS)
@pytest.mark.parametrize("dtype", [np.float64, np.complex64], ids=["f64", "c64"])
def test_nonfinite_a(request, engine, dtype, op, case, k):
    mesh = _mesh_or_skip(engine, op, k)
    bi.check_nonfinite(op, case, dtype, mesh, N, T_A, _rng(request))


@pytest.mark.parametrize("k", GROUPS)
@pytest.mark.parametrize("case", bi.SINGULAR)
@pytest.mark.parametrize("dtype", jt.DTYPES, ids=jt.DTYPE_IDS)
def test_singular_lu_solve(request, engine, dtype, case, k):
    mesh = _mesh_or_skip(engine, "lu_solve", k)
    bi.check_singular(case, dtype, mesh, N, T_A, _rng(request))


@pytest.mark.parametrize("k", GROUPS)
def test_the_next_call_solves(request, engine, k):
    """After a NaN matrix, the same engine solves a good one (nothing was
    left broken: handles, workspaces, the communicator)."""
    mesh = _mesh_or_skip(engine, "potrs", k)
    rng = _rng(request)
    bi.check_nonfinite("potrs", "nan_upper", np.float64, mesh, N, T_A, rng)
    a = jt.make_hpd(rng, N, np.float64)
    b = jt.make_rhs(rng, N, 3, np.float64)
    status, out = bi.run_op("potrs", a, mesh, T_A, rng, b)
    assert status == 0
    assert jt.solve_backward_error(a, out["x"], b) < jt.tol(np.float64, N)
    sign, logdet = np.linalg.slogdet(a)
    assert abs(float(out["logdet"]) - logdet) < 1e-10 * max(1.0, abs(logdet))
