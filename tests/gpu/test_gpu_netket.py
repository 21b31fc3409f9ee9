"""NetKet's distributed solvers and SR driver on the GPUs (issue 16), the twin
of tests/python/test_netket.py: NetKet's mesh (one axis "S" over every GPU,
Auto, set with jax.sharding.set_mesh), its solvers called unchanged, eagerly
and under jit, against NumPy; nan_fallback; a short VMC_SR run. Skipped
without GPUs or without netket."""

import jax
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import jaxmg_testing as jt  # noqa: E402

jax.config.update("jax_enable_x64", True)


@pytest.fixture
def nk_mesh(nk, gpus):
    """NetKet's mesh over every GPU (NetKet sizes its process grid by
    jax.device_count(), the default backend's devices)."""
    mesh = jax.make_mesh((len(gpus),), ("S",), devices=gpus, axis_types=(AxisType.Auto,))
    with jax.sharding.set_mesh(mesh):
        yield mesh


def _problem(mesh, n, definite=True, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, n))
    a = x @ x.T / n + np.eye(n) if definite else (x + x.T) / 2
    b = rng.standard_normal(n)
    return (a, b, jax.device_put(a, NamedSharding(mesh, P("S", None))),
            jax.device_put(b, NamedSharding(mesh, P())))


@pytest.mark.timeout(300)
@pytest.mark.parametrize("name", ["cholesky_distributed", "pinv_smooth_distributed"])
def test_distributed_solvers_on_gpus(nk, nk_mesh, name):
    n = 256 * len(nk_mesh.devices.flat)
    a, b, A, B = _problem(nk_mesh, n)
    solver = getattr(nk.optimizer.solver, name)
    ref = np.linalg.solve(a, b)
    for fn in (solver, jax.jit(solver)):
        x, _ = fn(A, B)
        assert {d.platform for d in x.sharding.device_set} == {"gpu"}
        np.testing.assert_allclose(np.asarray(x), ref, atol=1e-9)
    np.testing.assert_array_equal(np.asarray(A), a)


@pytest.mark.timeout(300)
def test_nan_fallback_on_gpus(nk, nk_mesh):
    n = 64 * len(nk_mesh.devices.flat)
    a, b, A, B = _problem(nk_mesh, n, definite=False, seed=1)
    solver = nk.optimizer.solver.nan_fallback(
        nk.optimizer.solver.cholesky_distributed,
        nk.optimizer.solver.pinv_smooth(rtol=1e-12, rtol_smooth=1e-12))
    x, info = jax.jit(solver)(A, B)
    assert bool(info["solver_fallback"])
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(a, b), atol=1e-6)


@pytest.mark.timeout(300)
def test_vmc_sr_with_the_distributed_cholesky_on_gpus(nk, nk_mesh):
    energy, exact = jt.minsr_ising_chain(nk)
    assert abs(energy - exact) < 0.05 * abs(exact), (energy, exact)
