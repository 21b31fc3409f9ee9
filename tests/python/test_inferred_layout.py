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


# default_tile follows bench/results/2026-11-21-h200x4 (potrs float64 on 4
# H200s): T_A = 256 about twice as slow as 1024 and 2048, which are even; at
# N=8192 (shards of 2048) the whole shard is fastest.
@pytest.mark.parametrize("n,nparts,tile", [
    (12, 4, 3),            # shard of 3: one tile per device
    (1024, 4, 256),        # shard of 256: whole shard
    (4096, 4, 1024),       # shard of 1024: whole shard
    (8192, 4, 2048),       # shard of 2048: whole shard (measured fastest)
    (16384, 4, 2048),      # shard of 4096: two tiles of 2048 (measured)
    (32768, 4, 2048),      # shard of 8192 (measured: even with 1024)
    (65536, 4, 2048),      # shard of 16384
    (4000, 4, 1000),       # shard of 1000: whole shard
    (4 * 1009, 4, 1009),   # prime shard below 2048: whole shard
    (1200, 4, 300),        # shard of 300
    (4 * 2050, 4, 1025),   # shard of 2050, not a multiple of 128: two tiles
    (4 * 5000, 4, 1250),   # divisor 1250 rather than 3 padded tiles of 1667
    (4 * 4099, 4, 1367),   # prime shard: 3 tiles of 1367, padded to 4101
    (2 * 128 * 4099, 2, 2042),  # 257 tiles of 2042 (122 padding rows), not 128
])
def test_default_tile(n, nparts, tile):
    assert default_tile(n, nparts) == tile
    assert tile >= min(128, n // nparts)


@pytest.mark.parametrize("n,nparts,tile", [
    (4 * 4099, 4, 4099),        # prime shard: the whole shard, never 1
    (4 * 2 * 4099, 4, 4099),    # shard of 2 * 4099: 4099, not 2
    (2 * 128 * 4099, 2, 128),   # shard of 128 * 4099: 128
    (4 * 5000, 4, 1250),        # as without exact: a divisor
    (8192, 4, 2048),
])
def test_default_tile_exact_divides_the_shard(n, nparts, tile):
    """pad=False, and syevd_shardmap_ctx's eigenvectors, need a T_A that
    divides the shard: then no tile below 128, else the smallest divisor
    above 2048."""
    assert default_tile(n, nparts, exact=True) == tile


@pytest.mark.parametrize("nparts", [1, 2, 3, 4, 8])
def test_default_tile_rule_holds_for_every_shard_size(nparts):
    for r in list(range(1, 5000, 7)) + [6144, 10007, 2 ** 14, 3 * 2 ** 13, 65521, 131072]:
        n = r * nparts
        tile = default_tile(n, nparts)
        exact = default_tile(n, nparts, exact=True)
        assert r % exact == 0 and (exact >= 128 or exact == r or r <= 2048), (r, exact)
        if r <= 2048:
            assert tile == exact == r
            continue
        assert 1024 < tile <= 2048 or (r % tile == 0 and tile >= 1024), (r, tile)
        tiles = -(-r // tile)
        # Padding: none when r has a divisor in 1024..2048, else fewer rows than tiles.
        divisible = any(r % t == 0 for t in range(1024, 2049))
        assert (tiles * tile == r) if divisible else (tiles * tile - r < tiles), (r, tile)


def test_default_tile_lets_pad_false_and_ctx_eigenvectors_work(mesh, hpd, monkeypatch):
    """With T_A left out, pad=False and syevd_shardmap_ctx's eigenvectors
    get a T_A that divides the shard. The rule's widths scaled down 512-fold
    (tiles of 2 to 4, none below 2) keep the matrices small: a prime shard of 5 rows
    would get 2 padded tiles of 3, and gets 5."""
    from jaxmg._src import _checks
    monkeypatch.setattr(_checks, "_TILE_MAX", 4)
    monkeypatch.setattr(_checks, "_TILE_GOOD", 2)
    monkeypatch.setattr(_checks, "_TILE_MIN", 2)
    n = 20
    assert default_tile(n, 4) == 3 and default_tile(n, 4, exact=True) == 5
    a = hpd(n, DT)
    # Padded by default; pad=False takes the exact tile instead of raising.
    x = jaxmg.potrs(jt.shard_rows(a, mesh), np.ones((n, 1)), mesh=mesh, in_specs=(P("x", None),))
    x_exact = jaxmg.potrs(jt.shard_rows(a, mesh), np.ones((n, 1)), mesh=mesh,
                          in_specs=(P("x", None),), pad=False)
    for got in (x, x_exact):
        assert jt.solve_backward_error(a, got, np.ones((n, 1))) < jt.tol(DT, n)
    f = jax.jit(jax.shard_map(lambda a: jaxmg.syevd_shardmap_ctx(a)[:2], mesh=mesh,
                              in_specs=P("x", None), out_specs=(P(None), P(None, "x"))))
    w, v = f(jt.shard_rows(a, mesh))
    assert jt.eig_residual(a, w, v) < jt.tol(DT, n)
