"""Calls with nothing but the arrays: mesh and in_specs read from A's
NamedSharding, host arrays placed on all devices, T_A chosen."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import jaxmg
import jaxmg_testing as jt
from jaxmg._src._checks import default_tile

DT = np.float64


def _check_all_ops(a, b, a_np, b_np, **kw):
    x = jaxmg.potrs(a, b, **kw)
    inv = jaxmg.potri(a, **kw)
    w, v = jaxmg.syevd(a, **kw)
    tol = jt.tol(DT, a_np.shape[0])
    assert jt.solve_backward_error(a_np, x, b_np) < tol
    assert jt.inverse_residual(a_np, inv) < tol
    assert jt.eig_residual(a_np, w, v) < tol
    assert jt.orthogonality(v) < tol
    return x, inv, w, v


def test_only_arrays_read_from_named_sharding(mesh, hpd, rhs):
    a_np, b_np = hpd(24, DT), rhs(24, 2, DT)
    a = jt.shard_rows(a_np, mesh)
    x, inv, w, v = _check_all_ops(a, b_np, a_np, b_np)
    assert x.sharding.is_fully_replicated
    assert inv.sharding.spec == a.sharding.spec and inv.sharding.mesh == mesh


@pytest.mark.parametrize("place", ["numpy", "one_device"])
def test_host_and_single_device_arrays_go_on_all_devices(cpu_devices, hpd, rhs, place):
    a_np, b_np = hpd(20, DT), rhs(20, 1, DT)
    a = a_np if place == "numpy" else jax.device_put(a_np, cpu_devices[0])
    x, inv, _, _ = _check_all_ops(a, b_np, a_np, b_np)
    assert len(inv.sharding.device_set) == jax.device_count()
    assert x.sharding.is_fully_replicated


def test_replicated_array_is_row_sharded_over_all_axes(cpu_devices, hpd, rhs):
    mesh2 = Mesh(np.array(cpu_devices).reshape(2, 2), ("S", "T"))
    a_np, b_np = hpd(16, DT), rhs(16, 1, DT)
    a = jax.device_put(a_np, NamedSharding(mesh2, P(None, None)))
    _, inv, _, _ = _check_all_ops(a, b_np, a_np, b_np)
    assert inv.sharding.spec[0] == ("S", "T")


def test_two_axis_sharding_is_read(cpu_devices, hpd, rhs):
    mesh2 = Mesh(np.array(cpu_devices).reshape(2, 2), ("S", "T"))
    a_np, b_np = hpd(16, DT), rhs(16, 1, DT)
    a = jax.device_put(a_np, NamedSharding(mesh2, P("T", None)))
    _, inv, _, _ = _check_all_ops(a, b_np, a_np, b_np)
    assert inv.sharding.spec[0] == "T"


def test_mesh_given_without_in_specs(mesh, hpd, rhs):
    a_np, b_np = hpd(12, DT), rhs(12, 1, DT)
    _check_all_ops(a_np, b_np, a_np, b_np, mesh=mesh)


@pytest.mark.parametrize("n,nparts,tile", [
    (12, 4, 3),          # shard of 3: one tile per device
    (1024, 4, 256),      # shard of 256: whole shard
    (4096, 4, 512),      # shard of 1024: two tiles
    (8192, 4, 1024),     # shard of 2048: largest divisor <= 1024
    (4000, 4, 500),      # shard of 1000
    (4 * 1009, 4, 256),  # prime shard: 256, padded
    (1200, 4, 150),      # shard of 300
])
def test_default_tile(n, nparts, tile):
    assert default_tile(n, nparts) == tile
    assert tile >= min(128, n // nparts)
