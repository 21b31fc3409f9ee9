"""NetKet's distributed solvers and its SR driver, called unchanged on jaxmg
(issue 16): on NetKet's mesh (one axis "S", Auto, set with
jax.sharding.set_mesh) over the 4 CPU devices, in this process; and with 4
processes of one CPU device each (jax.distributed). Skipped without netket
(a test dependency: scripts/setup-venv.sh installs it)."""

import jax
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import jaxmg_testing as jt
from mpmd_launch import assert_all_passed, run_job

# The tests that start processes run one after another on one pytest-xdist
# worker (scripts/test.sh: --dist loadgroup): they look for shared memory
# segments and sockets left behind, which another worker's job would make.
pytestmark = [pytest.mark.skipif(
    jax.default_backend() != "cpu",
    reason="NetKet sizes its process grid by the default backend's devices; the GPU "
           "twin is tests/gpu/test_gpu_netket.py"), pytest.mark.xdist_group("processes")]

N = 16


@pytest.fixture
def nk_mesh(nk, cpu_devices):
    """NetKet's mesh, set as the context mesh for the test."""
    mesh = jax.make_mesh((4,), ("S",), devices=cpu_devices, axis_types=(AxisType.Auto,))
    with jax.sharding.set_mesh(mesh):
        yield mesh


def _problem(rng, mesh, dtype, definite=True):
    a = jt.make_hpd(rng, N, dtype) if definite else jt.make_hermitian(rng, N, dtype)
    b = jt.make_rhs(rng, N, None, dtype)
    A = jax.device_put(a, NamedSharding(mesh, P("S", None)))
    B = jax.device_put(b, NamedSharding(mesh, P()))
    return a, b, A, B


SOLVERS = ("cholesky_distributed", "pinv_smooth_distributed")


@pytest.mark.parametrize("engine", [None, "lapack-local"], ids=["default", "local-model"])
@pytest.mark.parametrize("grid", [None, (2, 2)], ids=["default-grid", "grid-2x2"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128], ids=["f64", "c128"])
@pytest.mark.parametrize("name", SOLVERS)
def test_distributed_solvers_eager_and_jit(nk, nk_mesh, rng, monkeypatch, name, dtype, grid,
                                           engine):
    """Also in the local model (lapack-local on CPU devices, as cuSOLVERMp
    runs it on GPUs), where process_grid=(2, 2) runs on a 2 x 2 grid."""
    if engine:
        monkeypatch.setenv("JAXMG_ENGINE", engine)
    solver = getattr(nk.optimizer.solver, name)
    a, b, A, B = _problem(rng, nk_mesh, dtype)
    ref = np.linalg.solve(a, b)
    kw = {} if grid is None else {"process_grid": grid}
    x, info = solver(A, B, **kw)
    assert info is None
    np.testing.assert_allclose(np.asarray(x), ref, atol=1e-11)
    x, _ = jax.jit(lambda A, B: solver(A, B, **kw))(A, B)
    np.testing.assert_allclose(np.asarray(x), ref, atol=1e-11)
    np.testing.assert_array_equal(np.asarray(A), a)  # A is not consumed


def test_nan_fallback_on_a_matrix_that_is_not_positive_definite(nk, nk_mesh, rng):
    a, b, A, B = _problem(rng, nk_mesh, np.float64, definite=False)
    solver = nk.optimizer.solver.nan_fallback(
        nk.optimizer.solver.cholesky_distributed,
        nk.optimizer.solver.pinv_smooth(rtol=1e-12, rtol_smooth=1e-12))
    x, info = jax.jit(solver)(A, B)
    assert bool(info["solver_fallback"])
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(a, b), atol=1e-8)
    x, info = jax.jit(solver)(jax.device_put(jt.make_hpd(rng, N, np.float64),
                                             NamedSharding(nk_mesh, P("S", None))), B)
    assert not bool(info["solver_fallback"]) and np.isfinite(np.asarray(x)).all()


def test_vmc_sr_with_the_distributed_cholesky_converges(nk, nk_mesh):
    """minSR (use_ntk=True) on an 8-site transverse-field Ising chain: within
    5% of the exact ground-state energy in 30 steps, as with NetKet's plain
    cholesky solver (measured: both end at -10.24437 of -10.25166)."""
    energy, exact = jt.minsr_ising_chain(nk)
    assert abs(energy - exact) < 0.05 * abs(exact), (energy, exact)


def test_distributed_solvers_with_four_processes(nk):
    """One CPU device per process (jax.distributed): eager and jit, both
    solvers, against NumPy in every process."""
    assert_all_passed(run_job("netket", 4, timeout_s=60.0), 4, expect=4)
