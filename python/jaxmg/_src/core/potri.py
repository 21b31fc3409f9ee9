"""potri's core: the inverse of a Hermitian positive definite A, A's rows
and the inverse's sharded over devices alike.

``shard`` is one shard's FFI program, ``local`` the differentiable local core
(this device's rows of A^-1 and the status; its rule: d(A^-1) = -A^-1 dA
A^-1 by rings of row blocks), ``over_mesh`` ``local`` over a mesh. No API
conventions here (see jaxmg._src.core).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P

from jaxmg._src import _checks, _compat, _ffi_call, _geometry, _manual, _placement


def shard(call: _ffi_call.Call, a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One shard's part: a is r x N. Returns this shard's rows of A^-1 and the
    status (int32 scalar, the same on every shard)."""
    g = call.g
    per_shard, same = _ffi_call.result_types(call.axes, a)
    pos = _ffi_call.position(call.axes, call.others, g.nparts)
    a_p = _geometry.pad_shard(a, g, pos % g.nparts, 1)
    # The solver inverts conj(A) column-major; read row-major, its full
    # (both triangles) inverse conj(A^-1)^T is A^-1 itself.
    inv, info = _ffi_call.ffi_call(
        "potri",
        (a_p, pos),
        (jax.ShapeDtypeStruct(a_p.shape, a.dtype), jax.ShapeDtypeStruct((), jnp.int32)),
        call=call,
        varying=(per_shard, same),
    )
    return _geometry.unpad_shard(inv, g), _geometry.unpad_info(info, g)


@functools.lru_cache(maxsize=256)
def over_mesh(mesh: Mesh, rows: _checks.RowSharding, g: _geometry.Geometry) -> Any:
    """``local``, derivative rules included, over the whole mesh, jitted."""
    call = _ffi_call.mesh_call("potri", mesh, rows, g)
    return jax.jit(_placement.mapped(functools.partial(local, call), mesh,
                                     in_specs=(rows.spec,), out_specs=(rows.spec, P())))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def local(call: _ffi_call.Call, a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """This device's rows of A^-1 and the status inside any shard_map, differentiable in this device's rows a (see _local_jvp)."""
    return shard(call, a)


@local.defjvp
def _local_jvp(call: _ffi_call.Call, primals: tuple[jax.Array],
               tangents: tuple[jax.Array]):
    """d(A^-1) = -A^-1 dA A^-1, rows R_d: -A^-1[R_d, :] (dA A^-1), with dA
    the Hermitian matrix of da's upper triangle. Two products of
    row-sharded matrices, each a ring of ppermutes (no device holds more than
    two shards at a time), linear in da: JAX transposes them for reverse mode."""
    (a,), (da,) = primals, tangents
    inv, status = local(call, a)
    da_inv = _manual.rows_times(call, _manual.hermitian_rows(call, da), inv)
    dinv = -_manual.rows_times(call, inv, da_inv)
    return (inv, status), (dinv, _compat.zero_tangent(status))
