"""potrs and potri while other processes keep the GPUs busy.

cusolverMgPotrf returned wrong factors in every such call (4 H200, CUDA 13.0;
docs/gpu-notes.md); a 4-process MPMD job is such a case by itself. jaxmg's
tiled factorization orders its work by streams and events only, so sharing
the GPUs may slow it down but must not change its results."""

import os
import pathlib
import subprocess
import sys
import time

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import jaxmg

import jaxmg_testing as jt  # noqa: E402
from gpu_env import cuda_ordinal  # noqa: E402

jax.config.update("jax_enable_x64", True)

_BUSY = pathlib.Path(__file__).resolve().parent / "busy_gpu.py"


def _start_neighbours(devices, seconds: float):
    """One busy process per GPU, each seeing only its GPU; returns once every
    one reports that it runs."""
    procs = []
    for d in devices:
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=cuda_ordinal(d),
                   XLA_PYTHON_CLIENT_PREALLOCATE="false", JAX_PLATFORMS="cuda")
        procs.append(subprocess.Popen([sys.executable, str(_BUSY), str(seconds)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    deadline = time.time() + 120.0
    for p in procs:
        line = p.stdout.readline()
        while line and line.strip() != "busy" and time.time() < deadline:
            line = p.stdout.readline()
        if line.strip() != "busy":
            _stop(procs)
            pytest.fail(f"a busy neighbour did not start (exit {p.poll()})")
    return procs


def _stop(procs) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


@pytest.mark.parametrize("op", ["potrs", "potri"])
def test_gpu_right_while_other_processes_use_the_gpus(gpus, op):
    if len(gpus) < 2:
        pytest.skip("needs 2 GPUs")
    ndev = len(gpus)
    n, tile = 1024, 64  # 16 / ndev tiles per GPU: several, as the defect needed
    mesh = jax.make_mesh((ndev,), ("x",), devices=gpus)
    rows = NamedSharding(mesh, P("x", None))
    rng = np.random.default_rng(64)
    neighbours = _start_neighbours(gpus[1:], seconds=300.0)
    try:
        for _ in range(5):
            a = jt.make_hpd(rng, n, np.float64)
            if op == "potrs":
                b = jt.make_rhs(rng, n, 2, np.float64)
                x = jaxmg.potrs(jax.device_put(a, rows),
                                jax.device_put(b, NamedSharding(mesh, P())), T_A=tile,
                                mesh=mesh, in_specs=(P("x", None), P(None, None)))
                res = jt.solve_backward_error(a, np.asarray(x), b)
            else:
                ainv = jaxmg.potri(jax.device_put(a, rows), T_A=tile, mesh=mesh,
                                   in_specs=P("x", None))
                res = jt.inverse_residual(a, np.asarray(ainv))
            assert res < jt.tol(np.float64, n), f"{op} residual {res:.3g}"
    finally:
        _stop(neighbours)
