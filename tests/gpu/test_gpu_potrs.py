"""potrs on every GPU of the machine (cuSOLVERMg): a random SPD float64 matrix."""

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

import jaxmg

jax.config.update("jax_enable_x64", True)


def test_potrs_all_gpus(gpus):
    ndev = len(gpus)
    n = 1024 if 1024 % ndev == 0 else ndev * (1024 // ndev)  # N must split evenly
    T_A = 128
    rng = np.random.default_rng(1024)
    x = rng.standard_normal((n, n))
    a = x @ x.T / n + np.eye(n)  # SPD, condition number about 5
    b = rng.standard_normal((n, 4))

    mesh = jax.make_mesh((ndev,), ("x",), devices=gpus)
    a_s = jax.device_put(a, NamedSharding(mesh, P("x", None)))
    b_r = jax.device_put(b, NamedSharding(mesh, P(None, None)))
    sol, status = jaxmg.potrs(a_s, b_r, T_A, mesh, (P("x", None), P(None, None)),
                              return_status=True)
    assert int(status) == 0
    assert sol.dtype == np.float64 and sol.shape == (n, 4)
    assert sol.sharding.is_fully_replicated
    assert {d.platform for d in sol.sharding.device_set} == {"gpu"}
    sol = np.asarray(sol)

    assert np.isfinite(sol).all()
    backward = np.linalg.norm(a @ sol - b) / (np.linalg.norm(a) * np.linalg.norm(sol))
    assert backward < 30 * n * np.finfo(np.float64).eps, backward
